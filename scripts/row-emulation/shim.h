// CPU emulation of the CUDA features the row kernels use: one block at a time, its threads as
// std::threads, __syncthreads as a barrier of the block, warp shuffles through a per-warp
// exchange with a barrier of the warp.
#pragma once
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstddef>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
struct float4 {
  float x, y, z, w;
};
inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

struct Warp {
  std::barrier<> bar{32};
  float slot[32];
};
inline std::barrier<>* g_block_bar = nullptr;
inline std::vector<std::unique_ptr<Warp>> g_warps;

inline void __syncthreads() { g_block_bar->arrive_and_wait(); }
inline float __shfl_xor_sync(unsigned, float v, int o) {
  Warp& w = *g_warps[threadIdx.x / 32];
  unsigned l = threadIdx.x % 32;
  w.slot[l] = v;
  w.bar.arrive_and_wait();
  float r = w.slot[l ^ o];
  w.bar.arrive_and_wait();
  return r;
}
inline int atomicAdd(int* p, int v) { return std::atomic_ref<int>(*p).fetch_add(v); }
using std::max;
using std::min;
#define __global__
#define __device__
#define __forceinline__
#define __launch_bounds__(x)
#define __shared__ static

// Runs kernel body `f` over grid x block (block.x a multiple of 32), one block at a time.
inline void launch(dim3 grid, dim3 block, const std::function<void()>& f) {
  gridDim = grid;
  blockDim = block;
  for (unsigned by = 0; by < grid.y; ++by)
    for (unsigned bx = 0; bx < grid.x; ++bx) {
      std::barrier<> bar(block.x);
      g_block_bar = &bar;
      g_warps.clear();
      for (unsigned w = 0; w < block.x / 32; ++w) g_warps.push_back(std::make_unique<Warp>());
      std::vector<std::thread> ts;
      for (unsigned t = 0; t < block.x; ++t)
        ts.emplace_back([&, t] {
          threadIdx = {t, 0, 0};
          blockIdx = {bx, by, 0};
          f();
        });
      for (auto& t : ts) t.join();
    }
}
