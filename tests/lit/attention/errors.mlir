// RUN: warploom-opt %s --split-input-file --verify-diagnostics --wl-tile
// RUN: not warploom-opt %s --split-input-file --wl-tile=block-n=72 2>&1 | FileCheck %s --check-prefix=BN72

func.func @head_dim_96(%q: tensor<?x?x?x96xbf16>, %k: tensor<?x?x?x96xbf16>, %v: tensor<?x?x?x96xbf16>) -> tensor<?x?x?x96xbf16> {
  // expected-error @+1 {{wl-tile: head dim 96: the sm_90a attention kernels take head dims 64, 128, 256; zero-pad q, k and v to head dim 128}}
  %o = "wl.attention"(%q, %k, %v) {causal = false, scale = 0.1 : f32, layout = "bshd"} : (tensor<?x?x?x96xbf16>, tensor<?x?x?x96xbf16>, tensor<?x?x?x96xbf16>) -> tensor<?x?x?x96xbf16>
  return %o : tensor<?x?x?x96xbf16>
}

// -----

func.func @f32(%q: tensor<?x?x?x64xf32>, %k: tensor<?x?x?x64xf32>, %v: tensor<?x?x?x64xf32>) -> tensor<?x?x?x64xf32> {
  // expected-error @+1 {{wl-tile: attention kernels take bf16 or f16 q, k, v, got f32, f32, f32: cast them to bf16 or f16}}
  %o = "wl.attention"(%q, %k, %v) {causal = false, scale = 0.125 : f32, layout = "bshd"} : (tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>) -> tensor<?x?x?x64xf32>
  return %o : tensor<?x?x?x64xf32>
}

// -----

func.func @dv(%q: tensor<?x?x?x128xbf16>, %k: tensor<?x?x?x128xbf16>, %v: tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16> {
  // expected-error @+1 {{wl-tile: v has head dim 64, q and k 128: the attention kernel computes O with the q/k head dim (Dv = D); zero-pad v to 128 and slice the output}}
  %o = "wl.attention"(%q, %k, %v) {causal = false, scale = 0.088388 : f32, layout = "bshd"} : (tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16>
  return %o : tensor<?x?x?x64xbf16>
}

// -----

func.func @negative_scale(%q: tensor<?x?x?x64xbf16>, %k: tensor<?x?x?x64xbf16>, %v: tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16> {
  // expected-error @+1 {{for a negative scale negate k and use -scale}}
  %o = "wl.attention"(%q, %k, %v) {causal = true, scale = -0.125 : f32, layout = "bshd"} : (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16>
  return %o : tensor<?x?x?x64xbf16>
}

// -----

// BN72: error: block-n = 72: must be a multiple of 16 (O += P V contracts block_n keys, 16 per wgmma) up to 256 (the rows of one TMA box of K or V)
func.func @block_n(%q: tensor<?x?x?x64xbf16>, %k: tensor<?x?x?x64xbf16>, %v: tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16> {
  %o = "wl.attention"(%q, %k, %v) {causal = true, scale = 0.125 : f32, layout = "bshd"} : (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16>
  return %o : tensor<?x?x?x64xbf16>
}
