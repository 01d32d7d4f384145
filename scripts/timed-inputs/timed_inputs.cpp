// Host time of the timed checks' inputs of one softmax shape, 20 checked samples (seeds): the
// whole X each time (a family without reference_reads) against the rows of the 34 elements each
// check reads back, written into a buffer kept from one check to the next
// (Validator::timed_inputs).
#include <chrono>
#include <cstdio>
#include <cstring>
#include "context/bound.h"
#include "context/inputs.h"
#include "context/loader.h"
#include "family/family.h"
using namespace peak;
using clk = std::chrono::steady_clock;
static double since(clk::time_point t) {
  return std::chrono::duration<double>(clk::now() - t).count();
}
int main(int argc, char** argv) {
  auto ctx = load_context(argv[1]);
  const ArraySpec* x = nullptr;
  for (auto& a : ctx->arrays)
    if (a.name == "X") x = &a;
  for (auto [R, N] :
       {std::pair<int64_t, int64_t>{65536, 4096}, {32768, 8192}, {65536, 1024}, {2048, 50257}}) {
    Shape s{{{"R", R}, {"N", N}}};
    auto b = bind_shape(*ctx, s);
    auto t0 = clk::now();
    for (uint64_t seed = 1; seed <= 20; ++seed) auto whole = generate_inputs(*ctx, *b, seed, 0);
    const double whole_s = since(t0);
    t0 = clk::now();
    std::vector<uint8_t> buf(R * N * 4, 0);
    std::vector<int64_t> written;
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      ReferenceIndices asked;
      for (int i = 0; i < 34; ++i)
        asked["Y"].push_back((int64_t)(((i + 1) * seed * 2654435761ull) % (uint64_t)(R * N)));
      auto reads = family_of(*ctx).reference_reads(*ctx, s, asked);
      for (int64_t i : written) std::memset(buf.data() + i * 4, 0, 4);
      write_elements(*x, R * N, array_seed(seed, "X"), 0, reads->at("X"), buf);
      written = reads->at("X");
    }
    std::printf("R=%lld N=%lld, 20 checks: whole X each time %.1f s; the rows read %.2f s\n",
                (long long)R, (long long)N, whole_s, since(t0));
  }
}
