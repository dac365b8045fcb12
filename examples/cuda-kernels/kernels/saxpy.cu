// y = a * x + y over n floats: builds for every arch nvcc supports.
#include <cuda_runtime.h>

__global__ void saxpy(int n, float a, const float* __restrict__ x, float* __restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = a * x[i] + y[i];
  }
}

// Host launcher, so that `nvcc -c` also exercises the host compiler.
cudaError_t saxpy_launch(int n, float a, const float* x, float* y, cudaStream_t stream) {
  const int threads = 256;
  saxpy<<<(n + threads - 1) / threads, threads, 0, stream>>>(n, a, x, y);
  return cudaGetLastError();
}
