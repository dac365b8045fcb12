// Runs saxpy on the GPU and checks every element: the `kernel-tests` build of the example
// manifest, on GPU runners only. A kernel built for an arch the GPU cannot run fails here
// with "no kernel image is available for execution on the device".
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../kernels/saxpy.cu"

static int check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "CUDA error: %s: %s\n", what, cudaGetErrorString(status));
    return 1;
  }
  return 0;
}

int main() {
  const int n = 1 << 20;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 1000) * 0.5f;
    y[i] = static_cast<float>((i * 7) % 1000);
  }
  float *dx = nullptr, *dy = nullptr;
  if (check(cudaMalloc(&dx, n * sizeof(float)), "cudaMalloc x") ||
      check(cudaMalloc(&dy, n * sizeof(float)), "cudaMalloc y") ||
      check(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice), "copy x") ||
      check(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice), "copy y") ||
      check(saxpy_launch(n, 3.0f, dx, dy, nullptr), "saxpy launch") ||
      check(cudaDeviceSynchronize(), "saxpy") ||
      check(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost), "copy back")) {
    return 1;
  }
  for (int i = 0; i < n; ++i) {
    const float want = 3.0f * (static_cast<float>(i % 1000) * 0.5f) + static_cast<float>((i * 7) % 1000);
    if (y[i] != want) {
      std::fprintf(stderr, "saxpy: wrong result at %d: %f != %f\n", i, y[i], want);
      return 1;
    }
  }
  std::printf("saxpy ok: %d elements\n", n);
  return 0;
}
