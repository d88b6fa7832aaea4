// Input for stdin.mlir: line 5 has a result type the verifier rejects.
func.func @bad(%a: tensor<8xf32>) -> tensor<4xf32> {
  // The relu below keeps its operand's shape, so tensor<4xf32> is wrong.

  %0 = "wl.relu"(%a) : (tensor<8xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
