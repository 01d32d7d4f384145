// The device region of a peak checkpoint (the macros and device regions of its kernel.cu, cut
// out by build-peakrows.sh into PEAK_REGION) timed by rows.cu's harness with one block per row
// (the register path from the grid) and the short-row kernel from the grid, at the given
// configuration (-DP_BLOCK=... -DP_ITEMS=... -DP_SHORT_THREADS=... -DP_SHORT_VECS=..., defined
// under their tuning names after rows.cu, whose templates use some of the names; the other tuning
// parameters only size paths these launches do not take).
#define ROWS_NO_MAIN
#include "rows.cu"
#define BLOCK P_BLOCK
#define ITEMS P_ITEMS
#define SHORT_THREADS P_SHORT_THREADS
#define SHORT_VECS P_SHORT_VECS
#define SPLITS 32
#define SPLIT_MIN_N 1024
#define CLUSTER 8
#define BLOCKS_PER_CU 8
#define LOOP_VECS 4
namespace pk {  // the checkpoint's helpers beside rows.cu's
#include PEAK_REGION
}  // namespace pk
using pk::softmax;
using pk::softmax_short;

int main() {
  cudaDeviceProp p;
  CHECK(cudaGetDeviceProperties(&p, 0));
  std::printf("# %s, BLOCK=%d ITEMS=%d SHORT_THREADS=%d SHORT_VECS=%d\n", p.name, BLOCK, ITEMS,
              SHORT_THREADS, SHORT_VECS);
  for (auto [R, N] : std::vector<std::pair<int, int>>{{65536, 128}, {4096, 1024}, {1024, 4096}, {4096, 4096}, {65536, 4096}, {256, 8192}, {8192, 8192}}) {
    Bench b(R, N);
    const size_t n4 = b.elems / 4;
    double c = 1e30;
    for (int g : {b.sms * 4, b.sms * 8, b.sms * 16})
      c = std::min(c, b.time([&](const float* x) {
        copy4<<<g, 512>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(b.y), n4);
      }));
    auto run = [&](const char* name, const std::function<void(const float*)>& fn) {
      const double err = b.check(fn);
      const double ms = b.time(fn);
      std::printf("%dx%d,%s,%.4f,%.4f,%.1f,%.1f,%.2e\n", R, N, name, ms, c, 100.0 * c / ms,
                  2.0 * b.elems * 4 / ms / 1e6, err);
    };
    if (N <= SHORT_VECS * 4 * 32) {
      const int rows = SHORT_THREADS / 32;
      run("peak_short_grid", [&](const float* x) {
        softmax_short<<<(R + rows - 1) / rows, SHORT_THREADS>>>(x, b.y, R, N);
      });
    } else if (N <= ROW_CAPACITY) {
      run("peak_rows_grid", [&](const float* x) {
        softmax<<<R, BLOCK>>>(x, b.y, b.counter, 1, R, N);
      });
      run("peak_rows_persistent", [&](const float* x) {
        CHECK(cudaMemsetAsync(b.counter, 0, 4));
        softmax<<<std::min(R, b.sms * 8), BLOCK>>>(x, b.y, b.counter, 0, R, N);
      });
    }
  }
}
