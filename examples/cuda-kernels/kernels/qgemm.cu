// One 16x8 tile of C = A * B with int8 tensor cores (mma.sync m16n8k16 .s8), the
// instruction Marlin QQQ is built on. It needs sm_80.
//
// Below sm_80 this file mirrors torchao's marlin_qqq kernel before pytorch/ao#1651: a
// TORCH_CHECK_NOT_IMPLEMENTED-style check inside the __global__ function throws, and nvcc
// for sm_75 stops with "device code does not support exception handling"
// (pytorch/ao#1648). Compiling with -DQGEMM_GUARD_BELOW_SM80 applies the upstream fix
// instead: the kernel body is compiled out below sm_80 and the launcher refuses at run time.
#include <cstdint>
#include <stdexcept>

#include <cuda_runtime.h>

// Stands in for c10::NotImplementedError and TORCH_CHECK_NOT_IMPLEMENTED, which throw.
struct NotImplementedError : std::logic_error {
  using std::logic_error::logic_error;
};
#define QGEMM_CHECK_NOT_IMPLEMENTED(cond, msg) \
  if (!(cond)) {                               \
    throw NotImplementedError(msg);            \
  }

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
// m16n8k16 int8 tensor-core multiply-accumulate; operand layouts as in the PTX ISA's
// "Matrix Fragments for mma.m16n8k16 with integer type".
__device__ inline void mma_s8(const uint32_t (&a)[2], uint32_t b, int (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.satfinite.s32.s8.s8.s32 "
      "{%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%8,%9,%10};\n"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(b), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
}
#endif

// A: 16x16 int8 row-major, B: 16x8 int8 column-major, C: 16x8 int32 row-major; one warp.
__global__ void qgemm_m16n8k16(const int8_t* __restrict__ A, const int8_t* __restrict__ B,
                               int* __restrict__ C) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#if defined(QGEMM_GUARD_BELOW_SM80)
  return;  // Compiled out: qgemm_launch refuses such devices before launching.
#else
  QGEMM_CHECK_NOT_IMPLEMENTED(false, "qgemm_m16n8k16(..) requires CUDA_ARCH >= 8.0");
#endif
#else
  const int group = threadIdx.x / 4;
  const int lane_in_group = threadIdx.x % 4;
  const uint32_t a[2] = {
      *reinterpret_cast<const uint32_t*>(A + group * 16 + lane_in_group * 4),
      *reinterpret_cast<const uint32_t*>(A + (group + 8) * 16 + lane_in_group * 4)};
  const uint32_t b = *reinterpret_cast<const uint32_t*>(B + group * 16 + lane_in_group * 4);
  int c[4] = {0, 0, 0, 0};
  mma_s8(a, b, c);
  const int col = lane_in_group * 2;
  C[group * 8 + col] = c[0];
  C[group * 8 + col + 1] = c[1];
  C[(group + 8) * 8 + col] = c[2];
  C[(group + 8) * 8 + col + 1] = c[3];
#endif
}

// Launches one warp; refuses devices below sm_80 (the run-time half of the upstream fix).
cudaError_t qgemm_launch(const int8_t* A, const int8_t* B, int* C, cudaStream_t stream) {
  int device = 0;
  int major = 0;
  cudaError_t status = cudaGetDevice(&device);
  if (status == cudaSuccess) {
    status = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  }
  if (status != cudaSuccess) {
    return status;
  }
  if (major < 8) {
    return cudaErrorNoKernelImageForDevice;
  }
  qgemm_m16n8k16<<<1, 32, 0, stream>>>(A, B, C);
  return cudaGetLastError();
}
