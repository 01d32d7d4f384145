// Times small-M kernel variants at a decode shape (16 x 4096 x 4096 by default) against cuBLAS
// SGEMM (TF32 off): each configuration a cubin loaded through the driver API, checked against
// cuBLAS, then 30 samples each, interleaved, events tight around the launches (the small-M kernel
// and its reduction), with the L2 flushed (a memset of twice its size, as peak does), warm, and
// "fresh" as peak times: new inputs uploaded into the other of two buffer sets before each sample,
// then the L2 flushed.
// Usage: bench CONFIGS CUBIN_DIR [M N K]; CONFIGS lines: NAME FUNCTION ROWS WARPS SPLITS UNROLL
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#define CK(x) do { auto e_ = (x); if (e_ != 0) { fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, (int)e_); exit(1);} } while (0)
struct Cfg { std::string name, fn; int rows, warps, splits, unroll; CUfunction f = nullptr, red = nullptr; bool ok = false; std::vector<double> cold, warm, fresh; };
static double median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
int main(int argc, char** argv) {
  const char* list = argc > 1 ? argv[1] : "configs.txt";
  const char* dir = argc > 2 ? argv[2] : "cubins";
  int M = argc > 5 ? atoi(argv[3]) : 16, N = argc > 5 ? atoi(argv[4]) : 4096, K = argc > 5 ? atoi(argv[5]) : 4096;
  CK(cuInit(0)); CK(cudaFree(0));
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  size_t flushbytes = 2 * (size_t)prop.l2CacheSize; void* flushbuf; CK(cudaMalloc(&flushbuf, flushbytes));
  std::vector<Cfg> cfgs;
  { std::ifstream in(list); std::string line; while (std::getline(in, line)) { if (line.empty() || line[0] == '#') continue; std::istringstream s(line); Cfg c; s >> c.name >> c.fn >> c.rows >> c.warps >> c.splits >> c.unroll; cfgs.push_back(c);} }
  float *A, *B, *C, *R, *P, *A2, *B2;
  CK(cudaMalloc(&A, (size_t)M * K * 4)); CK(cudaMalloc(&B, (size_t)K * N * 4));
  CK(cudaMalloc(&A2, (size_t)M * K * 4)); CK(cudaMalloc(&B2, (size_t)K * N * 4));
  std::vector<float> hA((size_t)M * K), hB((size_t)K * N); CK(cudaMalloc(&C, (size_t)M * N * 4)); CK(cudaMalloc(&R, (size_t)M * N * 4));
  CK(cudaMalloc(&P, (size_t)64 * M * N * 4));
  srand(1); for (auto& x : hB) x = (rand() / (float)RAND_MAX) * 2 - 1; for (auto& x : hA) x = (rand() / (float)RAND_MAX) * 2 - 1;
  CK(cudaMemcpy(B, hB.data(), hB.size() * 4, cudaMemcpyHostToDevice)); CK(cudaMemcpy(A, hA.data(), hA.size() * 4, cudaMemcpyHostToDevice));
  // Peak's way: the other buffer set gets the inputs again (new addresses), then the L2 is flushed.
  auto renew = [&] { std::swap(A, A2); std::swap(B, B2); CK(cudaMemcpy(B, hB.data(), hB.size() * 4, cudaMemcpyHostToDevice)); CK(cudaMemcpy(A, hA.data(), hA.size() * 4, cudaMemcpyHostToDevice)); };
  cublasHandle_t hb; CK(cublasCreate(&hb)); CK(cublasSetMathMode(hb, CUBLAS_PEDANTIC_MATH));
  auto cublas = [&] { float one = 1, zero = 0; CK(cublasSgemm(hb, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, N, A, K, &zero, R, N)); };
  auto launch = [&](Cfg& c) {
    void* args[] = {&A, &B, &C, &P, &M, &N, &K};
    CK(cuLaunchKernel(c.f, (N + 127) / 128, c.splits, 1, 32, c.warps, 1, 0, 0, args, nullptr));
    if (c.splits > 1) { void* rargs[] = {&P, &C, &M, &N}; CK(cuLaunchKernel(c.red, (M * N + 255) / 256, 1, 1, 256, 1, 1, 0, 0, rargs, nullptr)); }
  };
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  auto timeit = [&](bool cold, auto&& f) { if (cold) CK(cudaMemsetAsync(flushbuf, 0xA5, flushbytes)); CK(cudaEventRecord(e0)); f(); CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1)); float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); return (double)ms; };
  cublas(); CK(cudaDeviceSynchronize());
  std::vector<float> hr((size_t)M * N), hc((size_t)M * N);
  CK(cudaMemcpy(hr.data(), R, hr.size() * 4, cudaMemcpyDeviceToHost));
  std::vector<Cfg*> ok;
  for (auto& c : cfgs) {
    CUmodule mod; std::string path = std::string(dir) + "/" + c.name + ".cubin";
    if (cuModuleLoad(&mod, path.c_str()) != CUDA_SUCCESS) { fprintf(stderr, "%s: no cubin\n", c.name.c_str()); continue; }
    if (cuModuleGetFunction(&c.f, mod, c.fn.c_str()) != CUDA_SUCCESS || cuModuleGetFunction(&c.red, mod, "_Z14reduce_small_mPKfPfii") != CUDA_SUCCESS) { fprintf(stderr, "%s: no function\n", c.name.c_str()); continue; }
    CK(cudaMemset(C, 0xff, hc.size() * 4)); launch(c);
    if (cudaDeviceSynchronize() != cudaSuccess) { fprintf(stderr, "%s: launch failed\n", c.name.c_str()); continue; }
    CK(cudaMemcpy(hc.data(), C, hc.size() * 4, cudaMemcpyDeviceToHost));
    double worst = 0; for (size_t i = 0; i < hc.size(); ++i) { double d = std::fabs((double)hc[i] - hr[i]); if (!(d <= 1e30)) d = 1e30; worst = std::max(worst, d); }
    if (worst > 1e-2) { fprintf(stderr, "%s: wrong (max err %g)\n", c.name.c_str(), worst); continue; }
    c.ok = true; ok.push_back(&c);
  }
  double flops = 2.0 * M * N * K, bbytes = 4.0 * K * N;
  std::vector<double> bc, bw, bf;
  const int samples = getenv("SAMPLES") ? atoi(getenv("SAMPLES")) : 30;
  for (int s = 0; s < samples; ++s) {
    bc.push_back(timeit(true, cublas)); bw.push_back(timeit(false, cublas));
    renew(); bf.push_back(timeit(true, cublas));
    for (auto* c : ok) {
      c->cold.push_back(timeit(true, [&] { launch(*c); })); c->warm.push_back(timeit(false, [&] { launch(*c); }));
      renew(); c->fresh.push_back(timeit(true, [&] { launch(*c); }));
    }
  }
  double b = median(bc), w = median(bw), f = median(bf);
  printf("%s: M=%d N=%d K=%d, median of %d samples: us and TFLOP/s with the L2 flushed (B read at GB/s) | warm L2 | fresh inputs and flushed L2\n", prop.name, M, N, K, samples);
  printf("%-24s %8.1f %6.2f %6.0f | %8.1f %6.2f | %8.1f %6.2f\n", "cuBLAS", b * 1e3, flops / b / 1e9, bbytes / b / 1e6, w * 1e3, flops / w / 1e9, f * 1e3, flops / f / 1e9);
  for (auto* c : ok) { double m = median(c->cold), mw = median(c->warm), mf = median(c->fresh); printf("%-24s %8.1f %6.2f %6.0f | %8.1f %6.2f | %8.1f %6.2f | %5.1f%% of cuBLAS flushed, %5.1f%% fresh\n", c->name.c_str(), m * 1e3, flops / m / 1e9, bbytes / m / 1e6, mw * 1e3, flops / mw / 1e9, mf * 1e3, flops / mf / 1e9, 100 * b / m, 100 * f / mf); }
  return 0;
}
