// Runs a row kernel's device region (softmax fp32, RMSNorm bf16 or LayerNorm fp32, the kernels
// of the recorded row campaigns) on the CPU under its launch plan's dispatch, against a float64
// reference, on shapes whose rows mostly start off a 16-byte boundary. Built by run.sh with the
// region files (macros.h, device.inc) and a configuration's -D values; see README.md.
#include <cstdio>
#include <cstdlib>
#include <random>

#include "shim.h"
using std::size_t;

#if FAMILY == 2
#include "bf16.h"
using elem = __nv_bfloat16;
inline elem to_elem(float f) { return __float2bfloat16_rn(f); }
inline double from_elem(elem e) { return __bfloat162float(e); }
#else
using elem = float;
inline elem to_elem(float f) { return f; }
inline double from_elem(elem e) { return e; }
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
#endif
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }

// The checkpoint's regions, in the file's order.
#include "macros.h"
// (its device region)
#include "device.inc"

namespace {

elem* alloc(size_t n) {
  return static_cast<elem*>(aligned_alloc(64, (n * sizeof(elem) + 63) / 64 * 64 + 64));
}

// The float64 reference of row r into ref.
void reference(const elem* X, const elem* W, const elem* B, int r, int N,
               std::vector<double>& ref) {
  const elem* x = X + (size_t)r * N;
  ref.assign(N, 0);
#if FAMILY == 1
  double m = -1e300, s = 0;
  for (int c = 0; c < N; ++c) m = std::max(m, from_elem(x[c]));
  for (int c = 0; c < N; ++c) s += std::exp(from_elem(x[c]) - m);
  for (int c = 0; c < N; ++c) ref[c] = std::exp(from_elem(x[c]) - m) / s;
  (void)W, (void)B;
#elif FAMILY == 2
  double q = 0;
  for (int c = 0; c < N; ++c) q += from_elem(x[c]) * from_elem(x[c]);
  const double scale = 1.0 / std::sqrt(q / N + 1e-6);
  for (int c = 0; c < N; ++c) ref[c] = from_elem(x[c]) * scale * from_elem(W[c]);
  (void)B;
#else
  double s = 0, q = 0;
  for (int c = 0; c < N; ++c) s += from_elem(x[c]);
  const double mean = s / N;
  for (int c = 0; c < N; ++c) q += (from_elem(x[c]) - mean) * (from_elem(x[c]) - mean);
  const double rstd = 1.0 / std::sqrt(q / N + 1e-5);
  for (int c = 0; c < N; ++c)
    ref[c] = (from_elem(x[c]) - mean) * rstd * from_elem(W[c]) + from_elem(B[c]);
#endif
}

// The launch plan of the row campaigns: split rows for R < compute units, else the persistent
// row kernel, or the short-row kernel for rows one warp holds (from grid-rows on, with a block
// per row where every row fits in registers, and the short kernel's groups from the grid). The
// cluster path is not emulated: run.sh leaves the cluster kernel out.
void dispatch(elem* X, elem* W, elem* B, elem* Y, int R, int N, int cu) {
  int rc[2] = {0, 0};
  std::vector<float> partial(3 * SPLITS * R + 1, 12345.0f);
  float* p = partial.data();
  const bool split = R < cu && N >= SPLIT_MIN_N;
  const int resident = std::max(cu, 1) * BLOCKS_PER_CU;
  const int short_rows = SHORT_THREADS / 32;
  const dim3 sgrid{SPLITS, (unsigned)R, 1}, block{BLOCK, 1, 1};
#if GRID_ROWS
  // grid-rows: rows that all fit in the register path, and the short-row kernel's groups, come
  // from the grid; only the looping path's rows from the counter.
  const int from_grid = N <= ROW_CAPACITY;
  const dim3 rgrid{(unsigned)(from_grid ? R : std::min(R, resident)), 1, 1};
  const dim3 shgrid{(unsigned)((R + short_rows - 1) / short_rows), 1, 1};
#define ROW_ARGS rc, from_grid
#define SHORT_ARGS
#else
  const dim3 rgrid{(unsigned)std::min(R, resident), 1, 1};
  const dim3 shgrid{(unsigned)std::min((R + short_rows - 1) / short_rows, resident), 1, 1};
#define ROW_ARGS rc
#define SHORT_ARGS rc,
#endif
  const bool short_kernel = N <= SHORT_VECS * VEC * 32;
  (void)W, (void)B;
#if SIZED
  // sized-instances: the smallest instance of each register-path kernel that holds the row, or
  // the looping instance (0) for rows longer than ITEMS vectors per thread hold, as the plan's
  // row_items and short_items choose them.
  const int row_items = N > ROW_CAPACITY       ? 0
                        : N <= BLOCK * VEC     ? 1
                        : N <= 2 * BLOCK * VEC ? 2
                        : N <= 4 * BLOCK * VEC ? 4
                                               : 8;
  const int short_items = N <= VEC * 32 ? 1 : N <= 2 * VEC * 32 ? 2 : N <= 4 * VEC * 32 ? 4 : 8;
#define ROW_KERNEL(name, ...)              \
  if (row_items == 0) {                    \
    name##_loop(__VA_ARGS__);              \
  } else {                                 \
    INSTANCE(row_items, name, __VA_ARGS__) \
  }
#define SHORT_KERNEL(name, ...) INSTANCE(short_items, name##_short, __VA_ARGS__)
#define INSTANCE(k, name, ...) \
  switch (k) {                 \
    case 1:                    \
      name##_1(__VA_ARGS__);   \
      break;                   \
    case 2:                    \
      name##_2(__VA_ARGS__);   \
      break;                   \
    case 4:                    \
      name##_4(__VA_ARGS__);   \
      break;                   \
    default:                   \
      name##_8(__VA_ARGS__);   \
  }
#else
#define ROW_KERNEL(name, ...) name(__VA_ARGS__)
#define SHORT_KERNEL(name, ...) name##_short(__VA_ARGS__)
#endif
#if FAMILY == 1
  if (split) {
    launch(sgrid, block, [&] { softmax_partials(X, p, R, N); });
    launch(sgrid, block, [&] { softmax_apply(X, Y, p, R, N); });
  } else if (!short_kernel) {
    launch(rgrid, block, [&] { ROW_KERNEL(softmax, X, Y, ROW_ARGS, R, N); });
  } else {
    launch(shgrid, {SHORT_THREADS, 1, 1}, [&] { SHORT_KERNEL(softmax, X, Y, SHORT_ARGS R, N); });
  }
#elif FAMILY == 2
  if (split) {
    launch(sgrid, block, [&] { rmsnorm_partials(X, p, R, N); });
    launch(sgrid, block, [&] { rmsnorm_apply(X, W, Y, p, R, N); });
  } else if (!short_kernel) {
    launch(rgrid, block, [&] { ROW_KERNEL(rmsnorm, X, W, Y, ROW_ARGS, R, N); });
  } else {
    launch(shgrid, {SHORT_THREADS, 1, 1}, [&] { SHORT_KERNEL(rmsnorm, X, W, Y, SHORT_ARGS R, N); });
  }
#else
  if (split) {
    launch(sgrid, block, [&] { layernorm_partials(X, p, R, N); });
    launch(sgrid, block, [&] { layernorm_apply(X, W, B, Y, p, R, N); });
  } else if (!short_kernel) {
    launch(rgrid, block, [&] { ROW_KERNEL(layernorm, X, W, B, Y, ROW_ARGS, R, N); });
  } else {
    launch(shgrid, {SHORT_THREADS, 1, 1},
           [&] { SHORT_KERNEL(layernorm, X, W, B, Y, SHORT_ARGS R, N); });
  }
#endif
#undef ROW_ARGS
#undef SHORT_ARGS
#undef ROW_KERNEL
#undef SHORT_KERNEL
}

// One shape with `cu` compute units (2: R < cu rarely, no split; 64: the split path for few
// rows); every element within the tolerance of the precision, none left unwritten.
int run(int R, int N, int cu) {
  std::mt19937 g(R * 131 + N);
  std::uniform_real_distribution<float> d(FAMILY == 1 ? -8 : -2, FAMILY == 1 ? 8 : 2);
  const size_t n = (size_t)R * N;
  elem *X = alloc(n), *Y = alloc(n), *W = alloc(N), *B = alloc(N);
  for (size_t i = 0; i < n; ++i) X[i] = to_elem(d(g) + (FAMILY == 3 ? 0.5f : 0.0f));
  for (size_t i = 0; i < n; ++i) Y[i] = to_elem(NAN);
  for (int c = 0; c < N; ++c) W[c] = to_elem(d(g)), B[c] = to_elem(d(g));
  dispatch(X, W, B, Y, R, N, cu);
  const double rtol = FAMILY == 2 ? 1e-2 : 1e-4, atol = FAMILY == 2 ? 1e-3 : 1e-6;
  std::vector<double> ref;
  int bad = 0;
  for (int r = 0; r < R && !bad; ++r) {
    reference(X, W, B, r, N, ref);
    for (int c = 0; c < N && !bad; ++c) {
      const double y = from_elem(Y[(size_t)r * N + c]);
      if (!(std::fabs(y - ref[c]) <= rtol * std::fabs(ref[c]) + atol)) {
        std::printf("FAIL R=%d N=%d compute_units=%d at row %d column %d: %g, expected %g\n", R, N,
                    cu, r, c, y, ref[c]);
        bad = 1;
      }
    }
  }
  free(X), free(Y), free(W), free(B);
  return bad;
}

}  // namespace

int main() {
  const int shapes[][2] = {{1, 1},     {3, 1},      {5, 3},     {7, 5},     {9, 7},    {1, 4099},
                           {7, 50257}, {129, 1023}, {37, 3201}, {67, 2050}, {300, 97}, {2, 127},
                           {9, 130},   {5, 4096},   {3, 8191},  {6, 1030},  {4, 2047}, {11, 1029}};
  int fails = 0, runs = 0;
  for (const auto& s : shapes)
    for (int cu : {2, 64}) fails += run(s[0], s[1], cu), ++runs;
  std::printf("%d of %d shape runs failed\n", fails, runs);
  return fails != 0;
}
