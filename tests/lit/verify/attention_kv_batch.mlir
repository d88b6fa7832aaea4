// RUN: warploom-opt %s --split-input-file --verify-diagnostics

func.func @kv_batch_dynamic_q(%q: tensor<?x8x16x64xf16>, %k: tensor<2x2x16x64xf16>, %v: tensor<3x2x16x64xf16>) -> tensor<?x8x16x64xf16> {
  // expected-error @+1 {{batch of k and v differs: 2 vs 3}}
  %0 = "wl.attention"(%q, %k, %v) {causal = false, scale = 1.0 : f32, layout = "bhsd"} : (tensor<?x8x16x64xf16>, tensor<2x2x16x64xf16>, tensor<3x2x16x64xf16>) -> tensor<?x8x16x64xf16>
  return %0 : tensor<?x8x16x64xf16>
}
