// Sums n ints into *out, one warp-shuffle reduction per block: builds for every arch nvcc
// supports (__shfl_down_sync needs sm_30).
#include <cuda_runtime.h>

__device__ int warp_sum(int value) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2) {
    value += __shfl_down_sync(0xffffffffu, value, offset);
  }
  return value;
}

__global__ void block_sum(const int* __restrict__ in, int n, int* __restrict__ out) {
  __shared__ int warp_totals[32];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int lane = threadIdx.x % warpSize;
  int warp = threadIdx.x / warpSize;
  int total = warp_sum(i < n ? in[i] : 0);
  if (lane == 0) {
    warp_totals[warp] = total;
  }
  __syncthreads();
  if (warp == 0) {
    int warps = (blockDim.x + warpSize - 1) / warpSize;
    total = warp_sum(lane < warps ? warp_totals[lane] : 0);
    if (lane == 0) {
      atomicAdd(out, total);
    }
  }
}

cudaError_t block_sum_launch(const int* in, int n, int* out, cudaStream_t stream) {
  const int threads = 256;
  block_sum<<<(n + threads - 1) / threads, threads, 0, stream>>>(in, n, out);
  return cudaGetLastError();
}
