// RUN: warploom-opt %s --split-input-file --verify-diagnostics

// wl.attention shape rules; messages name q, k and v.

func.func @head_dim(%q: tensor<1x8x16x64xf16>, %k: tensor<1x8x16x32xf16>, %v: tensor<1x8x16x64xf16>) -> tensor<1x8x16x64xf16> {
  // expected-error @+1 {{'wl.attention' op head dim of q and k differs: 64 vs 32}}
  %0 = "wl.attention"(%q, %k, %v) {causal = false, scale = 1.0 : f32, layout = "bhsd"} : (tensor<1x8x16x64xf16>, tensor<1x8x16x32xf16>, tensor<1x8x16x64xf16>) -> tensor<1x8x16x64xf16>
  return %0 : tensor<1x8x16x64xf16>
}

// -----

// In bshd the head dim is still the last axis; heads are axis 2.
func.func @head_dim_bshd(%q: tensor<1x16x8x128xbf16>, %k: tensor<1x16x8x64xbf16>) -> tensor<1x16x8x64xbf16> {
  // expected-error @+1 {{head dim of q and k differs: 128 vs 64}}
  %0 = "wl.attention"(%q, %k, %k) {causal = true, scale = 1.0 : f32, layout = "bshd"} : (tensor<1x16x8x128xbf16>, tensor<1x16x8x64xbf16>, tensor<1x16x8x64xbf16>) -> tensor<1x16x8x64xbf16>
  return %0 : tensor<1x16x8x64xbf16>
}

// -----

func.func @gqa_not_multiple(%q: tensor<1x8x16x64xf16>, %kv: tensor<1x3x16x64xf16>) -> tensor<1x8x16x64xf16> {
  // expected-error @+1 {{'wl.attention' op q heads (8) must be a multiple of kv heads (3) for grouped-query attention}}
  %0 = "wl.attention"(%q, %kv, %kv) {causal = false, scale = 1.0 : f32, layout = "bhsd"} : (tensor<1x8x16x64xf16>, tensor<1x3x16x64xf16>, tensor<1x3x16x64xf16>) -> tensor<1x8x16x64xf16>
  return %0 : tensor<1x8x16x64xf16>
}

// -----

// The same shapes read as bshd: now the heads are 16 (q) and 64 (kv) -- fewer q heads than kv heads.
func.func @gqa_not_multiple_bshd(%q: tensor<1x8x16x64xf16>, %kv: tensor<1x8x64x64xf16>) -> tensor<1x8x16x64xf16> {
  // expected-error @+1 {{q heads (16) must be a multiple of kv heads (64)}}
  %0 = "wl.attention"(%q, %kv, %kv) {causal = false, scale = 1.0 : f32, layout = "bshd"} : (tensor<1x8x16x64xf16>, tensor<1x8x64x64xf16>, tensor<1x8x64x64xf16>) -> tensor<1x8x16x64xf16>
  return %0 : tensor<1x8x16x64xf16>
}

// -----

func.func @kv_heads(%q: tensor<1x8x16x64xf16>, %k: tensor<1x2x16x64xf16>, %v: tensor<1x4x16x64xf16>) -> tensor<1x8x16x64xf16> {
  // expected-error @+1 {{'wl.attention' op head count of k and v differs: 2 vs 4}}
  %0 = "wl.attention"(%q, %k, %v) {causal = false, scale = 1.0 : f32, layout = "bhsd"} : (tensor<1x8x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x4x16x64xf16>) -> tensor<1x8x16x64xf16>
  return %0 : tensor<1x8x16x64xf16>
}

// -----

func.func @kv_sequence(%q: tensor<1x8x16x64xf16>, %k: tensor<1x8x32x64xf16>, %v: tensor<1x8x48x64xf16>) -> tensor<1x8x16x64xf16> {
  // expected-error @+1 {{'wl.attention' op sequence length of k and v differs: 32 vs 48}}
  %0 = "wl.attention"(%q, %k, %v) {causal = false, scale = 1.0 : f32, layout = "bhsd"} : (tensor<1x8x16x64xf16>, tensor<1x8x32x64xf16>, tensor<1x8x48x64xf16>) -> tensor<1x8x16x64xf16>
  return %0 : tensor<1x8x16x64xf16>
}

// -----

func.func @batch(%q: tensor<2x8x16x64xf16>, %kv: tensor<3x8x16x64xf16>) -> tensor<2x8x16x64xf16> {
  // expected-error @+1 {{'wl.attention' op batch of q and k differs: 2 vs 3}}
  %0 = "wl.attention"(%q, %kv, %kv) {causal = false, scale = 1.0 : f32, layout = "bhsd"} : (tensor<2x8x16x64xf16>, tensor<3x8x16x64xf16>, tensor<3x8x16x64xf16>) -> tensor<2x8x16x64xf16>
  return %0 : tensor<2x8x16x64xf16>
}

// -----

func.func @element_types(%q: tensor<1x8x16x64xbf16>, %k: tensor<1x8x16x64xbf16>, %v: tensor<1x8x16x64xf16>) -> tensor<1x8x16x64xbf16> {
  // expected-error @+1 {{'wl.attention' op element types differ: q is bf16, k is bf16, v is f16}}
  %0 = "wl.attention"(%q, %k, %v) {causal = false, scale = 1.0 : f32, layout = "bhsd"} : (tensor<1x8x16x64xbf16>, tensor<1x8x16x64xbf16>, tensor<1x8x16x64xf16>) -> tensor<1x8x16x64xbf16>
  return %0 : tensor<1x8x16x64xbf16>
}

// -----

func.func @rank(%q: tensor<8x16x64xf16>) -> tensor<8x16x64xf16> {
  // expected-error @+1 {{'wl.attention' op q must have rank 4 (bhsd), got tensor<8x16x64xf16>}}
  %0 = "wl.attention"(%q, %q, %q) {causal = false, scale = 1.0 : f32, layout = "bhsd"} : (tensor<8x16x64xf16>, tensor<8x16x64xf16>, tensor<8x16x64xf16>) -> tensor<8x16x64xf16>
  return %0 : tensor<8x16x64xf16>
}

// -----

func.func @layout(%q: tensor<1x8x16x64xf16>) -> tensor<1x8x16x64xf16> {
  // expected-error @+1 {{'wl.attention' op layout 'sbhd' is not one of bhsd, bshd}}
  %0 = "wl.attention"(%q, %q, %q) {causal = false, scale = 1.0 : f32, layout = "sbhd"} : (tensor<1x8x16x64xf16>, tensor<1x8x16x64xf16>, tensor<1x8x16x64xf16>) -> tensor<1x8x16x64xf16>
  return %0 : tensor<1x8x16x64xf16>
}

// -----

// The result has q's heads and sequence and v's head dim.
func.func @wrong_result(%q: tensor<1x8x16x64xf16>, %kv: tensor<1x2x32x64xf16>) -> tensor<1x2x16x64xf16> {
  // expected-error @+1 {{'wl.attention' op result type tensor<1x2x16x64xf16> does not match the inferred tensor<1x8x16x64xf16>}}
  %0 = "wl.attention"(%q, %kv, %kv) {causal = false, scale = 1.0 : f32, layout = "bhsd"} : (tensor<1x8x16x64xf16>, tensor<1x2x32x64xf16>, tensor<1x2x32x64xf16>) -> tensor<1x2x16x64xf16>
  return %0 : tensor<1x2x16x64xf16>
}

// -----

func.func @wrong_result_element(%q: tensor<1x8x16x64xbf16>) -> tensor<1x8x16x64xf32> {
  // expected-error @+1 {{'wl.attention' op result element type f32 differs from the operands' bf16}}
  %0 = "wl.attention"(%q, %q, %q) {causal = false, scale = 1.0 : f32, layout = "bhsd"} : (tensor<1x8x16x64xbf16>, tensor<1x8x16x64xbf16>, tensor<1x8x16x64xbf16>) -> tensor<1x8x16x64xf32>
  return %0 : tensor<1x8x16x64xf32>
}
