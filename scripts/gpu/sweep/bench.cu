// Quick sweep of configurations of one matmul kernel: each configuration a cubin, launched
// through the driver API, checked against cuBLAS SGEMM (TF32 off) at 2048, screened at 4096,
// and the best timed at 2048 and 4096 interleaved with cuBLAS. Events tight around each launch,
// L2 flushed before each sample.
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>
#define CK(x) do { auto e_ = (x); if (e_ != 0) { fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, (int)e_); exit(1);} } while (0)
struct Cfg { std::string name; std::map<std::string,int> p; CUmodule mod = nullptr; CUfunction fn = nullptr; bool ok = false; double screen = 1e9; double t2048 = 0, t4096 = 0; double err = 0; };
static float* flushbuf; static size_t flushbytes;
static void flush() { CK(cudaMemsetAsync(flushbuf, 1, flushbytes)); }
static double median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size()/2]; }
static void launch(Cfg& c, float* A, float* B, float* C, int M, int N, int K) {
  int bx = c.p["BLOCK_X"], by = c.p["BLOCK_Y"];
  int bm = by * c.p["TRD_Y_DIM"], bn = bx * c.p["TRD_X_DIM"];
  void* args[] = {&A, &B, &C, &M, &N, &K};
  CK(cuLaunchKernel(c.fn, (N + bn - 1) / bn, (M + bm - 1) / bm, 1, bx, by, 1, 0, 0, args, nullptr));
}
int main(int argc, char** argv) {
  const char* list = argc > 1 ? argv[1] : "configs.txt";
  const char* dir = argc > 2 ? argv[2] : "cubins";
  int top = argc > 3 ? atoi(argv[3]) : 12;
  CK(cuInit(0)); CK(cudaFree(0));
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  flushbytes = 2 * (size_t)prop.l2CacheSize; CK(cudaMalloc(&flushbuf, flushbytes));
  std::vector<Cfg> cfgs;
  { std::ifstream in(list); std::string line; while (std::getline(in, line)) { std::istringstream s(line); Cfg c; s >> c.name; std::string kv; while (s >> kv) { auto e = kv.find('='); c.p[kv.substr(0,e)] = atoi(kv.c_str()+e+1);} cfgs.push_back(c);} }
  const int NMAX = 4096;
  float *A, *B, *C, *R;
  size_t bytes = (size_t)NMAX * NMAX * 4;
  CK(cudaMalloc(&A, bytes)); CK(cudaMalloc(&B, bytes)); CK(cudaMalloc(&C, bytes)); CK(cudaMalloc(&R, bytes));
  { std::vector<float> h((size_t)NMAX*NMAX); srand(1); for (auto& x : h) x = (rand() / (float)RAND_MAX) * 2 - 1; CK(cudaMemcpy(A, h.data(), bytes, cudaMemcpyHostToDevice)); for (auto& x : h) x = (rand() / (float)RAND_MAX) * 2 - 1; CK(cudaMemcpy(B, h.data(), bytes, cudaMemcpyHostToDevice)); }
  cublasHandle_t hb; CK(cublasCreate(&hb)); CK(cublasSetMathMode(hb, CUBLAS_PEDANTIC_MATH));
  auto cublas = [&](float* Cout, int M, int N, int K) { float one = 1, zero = 0; CK(cublasSgemm(hb, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, N, A, K, &zero, Cout, N)); };
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  auto timeit = [&](auto&& f) { flush(); CK(cudaEventRecord(e0)); f(); CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1)); float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); return (double)ms; };
  // Check each configuration at an odd shape and at 2048, then screen at 4096.
  std::vector<float> hc((size_t)NMAX*NMAX), hr((size_t)NMAX*NMAX);
  int loaded = 0, passed = 0;
  for (auto& c : cfgs) {
    std::string path = std::string(dir) + "/" + c.name + ".cubin";
    if (cuModuleLoad(&c.mod, path.c_str()) != CUDA_SUCCESS) continue;
    if (cuModuleGetFunction(&c.fn, c.mod, "_Z6matmulPKfS0_Pfiii") != CUDA_SUCCESS) continue;
    ++loaded;
    bool good = true;
    for (int sh : {1000, 2048}) {
      int M = sh, N = sh == 1000 ? 1003 : sh, K = sh == 1000 ? 997 : sh;
      CK(cudaMemset(C, 0xff, (size_t)M*N*4));
      cublas(R, M, N, K); launch(c, A, B, C, M, N, K);
      if (cudaDeviceSynchronize() != cudaSuccess) { good = false; break; }
      CK(cudaMemcpy(hc.data(), C, (size_t)M*N*4, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(hr.data(), R, (size_t)M*N*4, cudaMemcpyDeviceToHost));
      double worst = 0; for (size_t i = 0; i < (size_t)M*N; ++i) { double d = std::fabs((double)hc[i]-hr[i]); if (!(d <= 1e30)) d = 1e30; worst = std::max(worst, d); }
      c.err = std::max(c.err, worst);
      if (worst > 1e-2) good = false;
    }
    if (!good) { fprintf(stderr, "%s: wrong (max err %g)\n", c.name.c_str(), c.err); continue; }
    c.ok = true; ++passed;
    launch(c, A, B, C, 4096, 4096, 4096);
    std::vector<double> t; for (int i = 0; i < 3; ++i) t.push_back(timeit([&]{ launch(c, A, B, C, 4096, 4096, 4096); }));
    c.screen = median(t);
  }
  printf("loaded %d, passed %d of %zu\n", loaded, passed, cfgs.size());
  std::vector<Cfg*> ok; for (auto& c : cfgs) if (c.ok) ok.push_back(&c);
  std::sort(ok.begin(), ok.end(), [](Cfg* a, Cfg* b) { return a->screen < b->screen; });
  FILE* all = fopen("screen.tsv", "w");
  for (auto* c : ok) { fprintf(all, "%s\t%.4f", c->name.c_str(), c->screen); for (auto& [k,v] : c->p) fprintf(all, "\t%s=%d", k.c_str(), v); fprintf(all, "\n"); }
  fclose(all);
  if ((int)ok.size() > top) ok.resize(top);
  for (int n : {2048, 4096}) {
    double flops = 2.0 * n * n * n;
    std::vector<double> tb;
    std::map<Cfg*, std::vector<double>> tc;
    for (int i = 0; i < 3; ++i) { cublas(R, n, n, n); for (auto* c : ok) launch(*c, A, B, C, n, n, n); }
    for (int s = 0; s < 20; ++s) {
      tb.push_back(timeit([&]{ cublas(R, n, n, n); }));
      for (auto* c : ok) tc[c].push_back(timeit([&]{ launch(*c, A, B, C, n, n, n); }));
    }
    double b = median(tb);
    printf("n=%d cuBLAS %.4f ms %.1f TFLOP/s\n", n, b, flops / b / 1e9);
    for (auto* c : ok) { double m = median(tc[c]); printf("n=%d %s %.4f ms %.1f TFLOP/s %.1f%% of cuBLAS |", n, c->name.c_str(), m, flops / m / 1e9, 100 * b / m); for (auto& [k,v] : c->p) printf(" %s=%d", k.c_str(), v); printf("\n"); }
  }
  return 0;
}
