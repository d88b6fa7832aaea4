// RUN: warploom-opt %s --split-input-file --verify-diagnostics
// XFAIL: *
// BUG (dialect): a wrong attribute kind is rejected by IRDL's `irdl.base` constraint, whose
// message ("expected base attribute 'builtin.integer' but got 'builtin.string'") names neither
// the attribute nor the op, unlike every other wl diagnostic. Expected: the message names the
// attribute, e.g. "'wl.attention' op attribute causal must be ... (bool), got \"yes\"".

func.func @causal_is_string(%q: tensor<1x8x16x64xf16>) -> tensor<1x8x16x64xf16> {
  // expected-error @+1 {{causal}}
  %0 = "wl.attention"(%q, %q, %q) {causal = "yes", scale = 1.0 : f32, layout = "bhsd"} : (tensor<1x8x16x64xf16>, tensor<1x8x16x64xf16>, tensor<1x8x16x64xf16>) -> tensor<1x8x16x64xf16>
  return %0 : tensor<1x8x16x64xf16>
}

// -----

func.func @factor_is_integer(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{factor}}
  %0 = "wl.scale"(%a) {factor = 2 : i32} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
