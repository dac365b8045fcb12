// A tiny dense layer for ci-matrix's real-build tests: relu(x * w + b) on 4x8 * 8x4 f32.
// Compiles for the CPU only with --iree-hal-local-target-device-backends=llvm-cpu next to
// --iree-hal-target-device=local (iree-org/iree#20283).
func.func @dense_relu(%x: tensor<4x8xf32>, %w: tensor<8x4xf32>, %b: tensor<4xf32>) -> tensor<4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<4x4xf32>
  %filled = linalg.fill ins(%zero : f32) outs(%init : tensor<4x4xf32>) -> tensor<4x4xf32>
  %product = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x4xf32>)
                           outs(%filled : tensor<4x4xf32>) -> tensor<4x4xf32>
  %result = linalg.generic {
      indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                       affine_map<(i, j) -> (i, j)>],
      iterator_types = ["parallel", "parallel"]}
      ins(%product, %b : tensor<4x4xf32>, tensor<4xf32>) outs(%init : tensor<4x4xf32>) {
    ^bb0(%p: f32, %bias: f32, %out: f32):
      %sum = arith.addf %p, %bias : f32
      %relu = arith.maximumf %sum, %zero : f32
      linalg.yield %relu : f32
  } -> tensor<4x4xf32>
  return %result : tensor<4x4xf32>
}
