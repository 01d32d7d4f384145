// peak_hip_to_cuda.h: HIP device-code names mapped to CUDA's, so that nvcc compiles a HIP
// candidate for an NVIDIA GPU (docs/backend-hip.md). peak places this header first in every nvcc
// build of a HIP source and answers the source's own `#include <hip/...>` lines with it; hipcc
// builds of the same source use the real HIP headers. A HIP name this header lacks is a compile
// error on NVIDIA, never a silent substitute.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

// Platform macros, as HIP's own headers define them on NVIDIA. Code for AMD only (MFMA builtins,
// __builtin_amdgcn_*) goes under `#if defined(__HIP_PLATFORM_AMD__)`.
#define __HIP_PLATFORM_NVIDIA__ 1
#define __HIP_PLATFORM_NVCC__ 1
#define PEAK_HIP_ON_NVIDIA 1

// Thread and block coordinates.
#define hipThreadIdx_x (threadIdx.x)
#define hipThreadIdx_y (threadIdx.y)
#define hipThreadIdx_z (threadIdx.z)
#define hipBlockIdx_x (blockIdx.x)
#define hipBlockIdx_y (blockIdx.y)
#define hipBlockIdx_z (blockIdx.z)
#define hipBlockDim_x (blockDim.x)
#define hipBlockDim_y (blockDim.y)
#define hipBlockDim_z (blockDim.z)
#define hipGridDim_x (gridDim.x)
#define hipGridDim_y (gridDim.y)
#define hipGridDim_z (gridDim.z)

// Kernel declarations.
#define HIP_KERNEL_NAME(...) __VA_ARGS__
#define HIP_DYNAMIC_SHARED(type, var) extern __shared__ type var[];
#define HIP_DYNAMIC_SHARED_ATTRIBUTE

// Cross-lane operations. HIP's shuffles take no mask: every lane of the wavefront takes part,
// which on NVIDIA is the whole warp.
template <typename T>
__device__ __forceinline__ T __shfl(T var, int src_lane, int width = warpSize) {
  return __shfl_sync(0xffffffffu, var, src_lane, width);
}
template <typename T>
__device__ __forceinline__ T __shfl_up(T var, unsigned int delta, int width = warpSize) {
  return __shfl_up_sync(0xffffffffu, var, delta, width);
}
template <typename T>
__device__ __forceinline__ T __shfl_down(T var, unsigned int delta, int width = warpSize) {
  return __shfl_down_sync(0xffffffffu, var, delta, width);
}
template <typename T>
__device__ __forceinline__ T __shfl_xor(T var, int lane_mask, int width = warpSize) {
  return __shfl_xor_sync(0xffffffffu, var, lane_mask, width);
}
// CUDA declares older __ballot/__any/__all of its own; HIP's (64-bit ballot) win in candidate code.
#define __ballot(predicate) (static_cast<unsigned long long>(__ballot_sync(0xffffffffu, (predicate))))
#define __any(predicate) (__any_sync(0xffffffffu, (predicate)))
#define __all(predicate) (__all_sync(0xffffffffu, (predicate)))
__device__ __forceinline__ unsigned int __lane_id() { return threadIdx.x % warpSize; }

// Runtime types and names (a candidate has no host code; these let shared headers compile).
typedef cudaError_t hipError_t;
typedef cudaStream_t hipStream_t;
typedef cudaEvent_t hipEvent_t;
typedef dim3 hipDim3_t;
#define hipSuccess cudaSuccess
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipMemcpy cudaMemcpy
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemset cudaMemset
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipStreamCreate cudaStreamCreate
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamSynchronize cudaStreamSynchronize
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipGetLastError cudaGetLastError
#define hipPeekAtLastError cudaPeekAtLastError
#define hipGetErrorString cudaGetErrorString
#define hipLaunchKernelGGL(kernel, grid, block, shared, stream, ...) \
  kernel<<<(grid), (block), (shared), (stream)>>>(__VA_ARGS__)

// Half precision: HIP's hip_fp16.h and CUDA's cuda_fp16.h share __half, __half2 and their
// intrinsics (__float2half, __half2float, __hadd, __hfma, ...), so no mapping is needed.
