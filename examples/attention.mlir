// An attention written the long way as wl ops: wl-fuse turns the five ops into one wl.attention.
//   warploom compile examples/attention.mlir --target sm_90a --dump-dir out     (the IR after every pass, PTX, SASS,
//                                                                                cubin, resources.json and .png)
//   warploom-opt examples/attention.mlir --wl-fuse                             (just the fusion)
func.func @attention(%q: tensor<1x8x256x64xbf16>, %k: tensor<1x8x256x64xbf16>, %v: tensor<1x8x256x64xbf16>) -> tensor<1x8x256x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x8x256x64xbf16>, tensor<1x8x256x64xbf16>) -> tensor<1x8x256x256xbf16>
  %t = "wl.scale"(%s) {factor = 0.125 : f32} : (tensor<1x8x256x256xbf16>) -> tensor<1x8x256x256xbf16>
  %m = "wl.causal_mask"(%t) : (tensor<1x8x256x256xbf16>) -> tensor<1x8x256x256xbf16>
  %p = "wl.softmax"(%m) {axis = -1 : i64} : (tensor<1x8x256x256xbf16>) -> tensor<1x8x256x256xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x8x256x256xbf16>, tensor<1x8x256x64xbf16>) -> tensor<1x8x256x64xbf16>
  return %o : tensor<1x8x256x64xbf16>
}
