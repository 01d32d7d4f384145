// peak-export-check: runs an exported CUDA library (built as a shared library) at every shape of
// its checkpoint's suite, beside peak's own runner on the same configuration and inputs:
//  - outputs: the export's against the runner's checked run, byte for byte (same seed, same
//    generator: context/inputs.h);
//  - time: the export timed with its own CUDA events under the runner's protocol: fresh inputs
//    before every sample, the outputs overwritten, the L2 flushed (twice its size, waited for),
//    then the call enqueued between the two events while the stream waits at a gate kernel (the
//    runner's, backend/cuda/fma_bench_ptx.h), so that the window holds the device's work of the
//    call and none of its host work. `--queued-flush` instead queues a flush of 512 MiB (twice the
//    L2 with --flush-l2-only) just before the call, with no gate: the call's host work overlaps
//    the flush, as it overlaps earlier work on a stream that an application keeps busy.
// It holds the device's lock (util/device_lock.h) while it runs, as peak's timers do.
// Writes one JSON row per shape (scripts/export-table.py puts it beside `peak bench`).
//
//   peak-export-check WORKSPACE CHECKPOINT LIBRARY.so ENTRY [--small] [--samples N]
//                     [--queued-flush [--flush-l2-only]] [--threads N] [-o FILE]
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "backend/backend.h"
#include "backend/cuda/fma_bench_ptx.h"
#include "context/inputs.h"
#include "engine/evaluate_internal.h"
#include "engine/workspace.h"
#include "runner/client.h"
#include "util/fs.h"

namespace {

using namespace peak;
namespace fs = std::filesystem;

using Entry6 = int (*)(const void*, const void*, void*, int, int, int, void*, size_t, cudaStream_t);
using Entry4 = int (*)(const void*, void*, int, int, void*, size_t, cudaStream_t);
using Entry5 = int (*)(const void*, const void*, void*, int, int, void*, size_t, cudaStream_t);
using Entry6r = int (*)(const void*, const void*, const void*, void*, int, int, void*, size_t,
                        cudaStream_t);
using ConfigFn3 = int (*)(int, int, int);
using ConfigFn2 = int (*)(int, int);
using TextFn = const char* (*)(int);
using Ws3 = size_t (*)(int, int, int);
using Ws2 = size_t (*)(int, int);

struct Library {
  void* handle = nullptr;
  void* entry = nullptr;
  void* config = nullptr;
  TextFn text = nullptr;
  void* ws = nullptr;
};

int call_entry(const Library& l, const KernelContext& ctx, std::vector<void*>& ptr,
               const std::vector<int>& s, void* ws, size_t ws_bytes,
               cudaStream_t stream = nullptr) {
  const size_t na = ctx.arrays.size(), ns = ctx.scalars.size();
  if (na == 3 && ns == 3)
    return reinterpret_cast<Entry6>(l.entry)(ptr[0], ptr[1], ptr[2], s[0], s[1], s[2], ws, ws_bytes,
                                             stream);
  if (na == 2 && ns == 2)
    return reinterpret_cast<Entry4>(l.entry)(ptr[0], ptr[1], s[0], s[1], ws, ws_bytes, stream);
  if (na == 3 && ns == 2)
    return reinterpret_cast<Entry5>(l.entry)(ptr[0], ptr[1], ptr[2], s[0], s[1], ws, ws_bytes,
                                             stream);
  if (na == 4 && ns == 2)
    return reinterpret_cast<Entry6r>(l.entry)(ptr[0], ptr[1], ptr[2], ptr[3], s[0], s[1], ws,
                                              ws_bytes, stream);
  return -100;
}

int call_config(const Library& l, const std::vector<int>& s) {
  return s.size() == 3 ? reinterpret_cast<ConfigFn3>(l.config)(s[0], s[1], s[2])
                       : reinterpret_cast<ConfigFn2>(l.config)(s[0], s[1]);
}

size_t call_ws(const Library& l, const std::vector<int>& s) {
  return s.size() == 3 ? reinterpret_cast<Ws3>(l.ws)(s[0], s[1], s[2])
                       : reinterpret_cast<Ws2>(l.ws)(s[0], s[1]);
}

Config parse_config(const std::string& text) {
  Config c;
  std::istringstream in(text);
  for (std::string kv; in >> kv;)
    if (auto eq = kv.find('='); eq != std::string::npos)
      c[kv.substr(0, eq)] = std::stoll(kv.substr(eq + 1));
  return c;
}

struct Args {
  std::string workspace, checkpoint, library, entry, out;
  bool small = false;
  bool queued_flush = false;   // the flush queued before the call, no gate (see the top)
  bool flush_l2_only = false;  // with queued_flush: twice the L2 alone (not 512 MiB at least)
  int threads = 1;             // also call from this many host threads at once, a stream each
  int samples = 30;
};

#define CU(x)                                                                      \
  do {                                                                             \
    cudaError_t e_ = (x);                                                          \
    if (e_ != cudaSuccess)                                                         \
      throw std::runtime_error(fmt::format("{}: {}", #x, cudaGetErrorString(e_))); \
  } while (0)

#define CUD(x)                                                                            \
  do {                                                                                    \
    CUresult r_ = (x);                                                                    \
    if (r_ != CUDA_SUCCESS) throw std::runtime_error(fmt::format("{}: {}", #x, int(r_))); \
  } while (0)

// One timed sample of the call under the protocol of `Args` (the top of this file).
class Timer {
 public:
  Timer(const Args& a, int64_t l2_bytes) : queued_(a.queued_flush) {
    bytes_ = static_cast<size_t>(std::max<int64_t>(l2_bytes, 1 << 20)) * 2;
    if (queued_ && !a.flush_l2_only) bytes_ = std::max<size_t>(bytes_, size_t{512} << 20);
    CU(cudaMalloc(&flush_, bytes_));
    CU(cudaStreamCreate(&stream_));
    CU(cudaEventCreate(&e0_));
    CU(cudaEventCreate(&e1_));
    if (queued_) return;
    void* flag = nullptr;
    CU(cudaHostAlloc(&flag, 2 * sizeof(unsigned), cudaHostAllocMapped));
    flag_ = static_cast<volatile unsigned*>(flag);
    CU(cudaHostGetDevicePointer(&flag_dev_, flag, 0));
    const std::string ptx = cuda::gate_ptx();
    CUD(cuModuleLoadData(&module_, ptx.c_str()));
    CUD(cuModuleGetFunction(&gate_, module_, cuda::kGateName));
  }
  ~Timer() {
    if (module_) cuModuleUnload(module_);
    if (flag_) cudaFreeHost(const_cast<unsigned*>(flag_));
    cudaEventDestroy(e0_);
    cudaEventDestroy(e1_);
    cudaStreamDestroy(stream_);
    cudaFree(flush_);
  }
  cudaStream_t stream() const { return stream_; }

  // The device's time of `call(stream)` in ms, and its host time in `host_us`; throws when the
  // gate gave up before the host released it (the window would hold host time).
  template <class Call>
  double sample(int round, Call&& call, double& host_us) {
    CU(cudaMemsetAsync(flush_, (round & 1) ? 0x5A : 0xA5, bytes_, stream_));
    if (!queued_) {
      CU(cudaStreamSynchronize(stream_));
      flag_[0] = 0;
      flag_[1] = 0;
      unsigned long long limit_ns = 2'000'000'000ull;
      void* args[] = {&flag_dev_, &limit_ns};
      CUD(cuLaunchKernel(gate_, 1, 1, 1, 1, 1, 1, 0, reinterpret_cast<CUstream>(stream_), args,
                         nullptr));
    }
    CU(cudaEventRecord(e0_, stream_));
    const auto h0 = std::chrono::steady_clock::now();
    call(stream_);
    host_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - h0).count();
    CU(cudaEventRecord(e1_, stream_));
    if (!queued_) {
      __atomic_thread_fence(__ATOMIC_SEQ_CST);
      flag_[0] = 1;
      __atomic_thread_fence(__ATOMIC_SEQ_CST);
    }
    CU(cudaEventSynchronize(e1_));
    if (!queued_ && flag_[1] != 0)
      throw std::runtime_error("the timing gate gave up before the host released it");
    float t = 0;
    CU(cudaEventElapsedTime(&t, e0_, e1_));
    return t;
  }

 private:
  bool queued_;
  size_t bytes_ = 0;
  void* flush_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t e0_ = nullptr, e1_ = nullptr;
  volatile unsigned* flag_ = nullptr;
  void* flag_dev_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction gate_ = nullptr;
};

// The same call from `a.threads` host threads at once, each on a stream and with outputs and a
// workspace of its own: every thread's outputs must be the runner's.
bool threads_agree(const Args& a, const Library& lib, const KernelContext& ctx,
                   const std::vector<void*>& inputs, const std::vector<int>& scal,
                   const std::map<std::string, int64_t>& sizes, const TaskResult& tr) {
  struct Lane {
    std::vector<void*> ptr;
    void* ws = nullptr;
    cudaStream_t stream = nullptr;
    int status = -1;
  };
  const size_t ws_bytes = call_ws(lib, scal);
  std::vector<Lane> lanes(static_cast<size_t>(a.threads));
  for (Lane& l : lanes) {
    l.ptr = inputs;
    for (size_t i = 0; i < ctx.arrays.size(); ++i)
      if (ctx.arrays[i].output)
        CU(cudaMalloc(&l.ptr[i], static_cast<size_t>(sizes.at(ctx.arrays[i].name)) *
                                     dtype_size(ctx.arrays[i].dtype)));
    if (ws_bytes > 0) CU(cudaMalloc(&l.ws, ws_bytes));
    CU(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking));
  }
  std::vector<std::thread> threads;
  for (Lane& l : lanes)
    threads.emplace_back([&, lane = &l] {
      for (int r = 0; r < 4 && lane->status <= 0; ++r)
        lane->status = call_entry(lib, ctx, lane->ptr, scal, lane->ws, ws_bytes, lane->stream);
    });
  for (auto& t : threads) t.join();
  CU(cudaDeviceSynchronize());
  bool all = true;
  for (Lane& l : lanes) {
    all = all && l.status == 0;
    for (size_t i = 0; i < ctx.arrays.size(); ++i) {
      const ArraySpec& spec = ctx.arrays[i];
      if (!spec.output) continue;
      const size_t n = static_cast<size_t>(sizes.at(spec.name)) * dtype_size(spec.dtype);
      std::vector<uint8_t> got(n);
      CU(cudaMemcpy(got.data(), l.ptr[i], n, cudaMemcpyDeviceToHost));
      auto want = read_file(tr.outputs.count(spec.name) ? tr.outputs.at(spec.name) : "");
      all = all && want && want->size() == n && std::memcmp(got.data(), want->data(), n) == 0;
      cudaFree(l.ptr[i]);
    }
    if (l.ws) cudaFree(l.ws);
    cudaStreamDestroy(l.stream);
  }
  return all;
}

// The export's run at one shape: outputs against the runner's files, then timed.
nlohmann::json run_shape(const Args& a, const Library& lib, const KernelContext& ctx,
                         const SuiteShape& ss, const TaskResult& tr, uint64_t seed,
                         const std::map<std::string, int64_t>& sizes, double flops, Timer& timer) {
  nlohmann::json row;
  std::vector<void*> ptr(ctx.arrays.size(), nullptr);
  std::vector<int> scal;
  for (const auto& s : ctx.scalars) scal.push_back(static_cast<int>(ss.shape.values.at(s.name)));
  for (size_t i = 0; i < ctx.arrays.size(); ++i) {
    const ArraySpec& spec = ctx.arrays[i];
    const int64_t n = sizes.at(spec.name);
    CU(cudaMalloc(&ptr[i], static_cast<size_t>(n) * dtype_size(spec.dtype) + 256));
    if (!spec.output) {
      auto bytes = generate_array(spec, n, array_seed(seed, spec.name), 0);
      CU(cudaMemcpy(ptr[i], bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
    }
  }
  const size_t ws_bytes = call_ws(lib, scal);
  void* ws = nullptr;
  if (ws_bytes > 0) CU(cudaMalloc(&ws, ws_bytes));
  int st = call_entry(lib, ctx, ptr, scal, ws, ws_bytes);
  CU(cudaDeviceSynchronize());
  row["status"] = st;
  row["workspace_bytes"] = ws_bytes;
  bool identical = st == 0;
  int64_t differing = 0;
  for (size_t i = 0; i < ctx.arrays.size() && st == 0; ++i) {
    const ArraySpec& spec = ctx.arrays[i];
    if (!spec.output) continue;
    const size_t n = static_cast<size_t>(sizes.at(spec.name)) * dtype_size(spec.dtype);
    std::vector<uint8_t> got(n);
    CU(cudaMemcpy(got.data(), ptr[i], n, cudaMemcpyDeviceToHost));
    auto want = read_file(tr.outputs.count(spec.name) ? tr.outputs.at(spec.name) : "");
    if (!want || want->size() != n) {
      identical = false;
      row["message"] = "the runner wrote no output of that size";
      continue;
    }
    for (size_t b = 0; b < n; ++b) differing += got[b] != static_cast<uint8_t>((*want)[b]);
  }
  identical = identical && differing == 0;
  row["identical"] = identical;
  row["differing_bytes"] = differing;
  if (st == 0 && a.threads > 1)
    row["threads_identical"] = threads_agree(a, lib, ctx, ptr, scal, sizes, tr);
  std::vector<double> ms, host_us;
  if (st == 0) {
    for (int w = 0; w < 3; ++w) call_entry(lib, ctx, ptr, scal, ws, ws_bytes, timer.stream());
    // The runner's protocol for every timed launch: fresh inputs (a new seed), the outputs
    // overwritten, the L2 flushed; then the call between two events (Timer).
    for (int i = 0; i < a.samples; ++i) {
      for (size_t k = 0; k < ctx.arrays.size(); ++k) {
        const ArraySpec& spec = ctx.arrays[k];
        const int64_t n = sizes.at(spec.name);
        if (spec.output) {
          CU(cudaMemset(ptr[k], 0xff, static_cast<size_t>(n) * dtype_size(spec.dtype)));
          continue;
        }
        auto bytes = generate_array(spec, n, array_seed(seed + 1000 + i, spec.name), 0);
        CU(cudaMemcpy(ptr[k], bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
      }
      CU(cudaDeviceSynchronize());
      double h = 0;
      ms.push_back(timer.sample(
          i, [&](cudaStream_t s) { call_entry(lib, ctx, ptr, scal, ws, ws_bytes, s); }, h));
      host_us.push_back(h);
    }
  }
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();  // the median as peak's timers take it
  const double median = n == 0  ? 0
                        : n % 2 ? sorted[n / 2]
                                : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  row["samples_ms"] = ms;
  row["host_us"] = host_us;  // wall time of each timed call on the host
  row["median_ms"] = median;
  row["gflops"] = median > 0 ? flops / (median * 1e6) : 0;
  for (void* p : ptr) cudaFree(p);
  if (ws) cudaFree(ws);
  return row;
}

int run(const Args& a) {
  auto ws = Workspace::open(a.workspace);
  if (!ws) throw std::runtime_error(ws.error());
  auto id = (*ws)->resolve(a.checkpoint);
  if (!id) throw std::runtime_error(id.error());
  auto files = (*ws)->checkpoint_files(*id);
  if (!files) throw std::runtime_error(files.error());
  KernelContext ctx = files->first;
  if (ctx.suite.empty())
    if (auto w = load_context((*ws)->root())) {
      ctx.suite = w->suite;
      ctx.suite_small = w->suite_small;
    }
  const auto& suite = a.small ? ctx.suite_small : ctx.suite;
  auto regions = split_regions(files->second, ctx.source_file);
  if (!regions) throw std::runtime_error(regions.error());
  auto be = (*ws)->backend();
  if (!be) throw std::runtime_error(be.error());
  auto dev = (*be)->probe("", false);
  if (!dev) throw std::runtime_error(dev.error());

  Library lib;
  lib.handle = dlopen(a.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib.handle) throw std::runtime_error(dlerror());
  lib.entry = dlsym(lib.handle, a.entry.c_str());
  lib.config = dlsym(lib.handle, (a.entry + "_configuration").c_str());
  lib.text = reinterpret_cast<TextFn>(dlsym(lib.handle, (a.entry + "_configuration_text").c_str()));
  lib.ws = dlsym(lib.handle, (a.entry + "_workspace_size").c_str());
  if (!lib.entry || !lib.config || !lib.text || !lib.ws)
    throw std::runtime_error("the library lacks the entry points of " + a.entry);

  // With --queued-flush, 512 MiB (over 100 us on any HBM device) so that the flush outlasts the
  // call's host work queued behind it (host_us in the rows).
  Timer timer(a, dev->l2_bytes);
  auto tmp = make_temp_dir("peak-export-check-");
  if (!tmp) throw std::runtime_error(tmp.error());
  // The device's lock for the whole run, as peak's timers hold it (the runner's jobs nest in it):
  // no other peak times on this device meanwhile.
  auto lock = detail::device_lock_for(*dev);
  lock->set_wait_notice([](const std::string& m) { std::fprintf(stderr, "%s\n", m.c_str()); });
  auto held = lock->acquire();
  if (!held) throw std::runtime_error(held.error());
  RunnerOptions ro;
  ro.executable = (*be)->runner();
  ro.device_lock = lock;
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < suite.size(); ++i) {
    const SuiteShape& ss = suite[i];
    nlohmann::json row = {{"suite", ss.name}, {"shape", ss.shape.text()}};
    std::vector<int> scal;
    for (const auto& s : ctx.scalars) scal.push_back(static_cast<int>(ss.shape.values.at(s.name)));
    const int c = call_config(lib, scal);
    row["configuration"] = c;
    if (c < 0) {
      row["status"] = "refused";
      rows.push_back(row);
      std::fprintf(stderr, "%s: refused by the export\n", ss.name.c_str());
      continue;
    }
    const Config config = parse_config(lib.text(c));
    row["config"] = lib.text(c);
    BuildResult b = (*be)->build(
        BuildRequest{&ctx, files->second, config, *dev, (*ws)->root() / ".peak" / "cache"});
    PlanResult pr = (*be)->plan(ctx, *regions, ss.shape, config, *dev, b);
    auto sizes = array_sizes(ctx, ss.shape);
    if (b.disposition != Disposition::passed || pr.disposition != Disposition::passed || !sizes) {
      row["runner"] = "no plan: " + pr.message;
      rows.push_back(row);
      continue;
    }
    const uint64_t seed = 0x5e1 + i;
    RunnerJob job = RunnerJob::for_context(ctx);
    RunnerTask t;
    t.id = fmt::format("s{}", i);
    t.artifact = b.artifact.string();
    t.plan = pr.plan;
    t.shape = ss.shape;
    t.sizes = *sizes;
    t.seed = seed;
    t.repeat = false;
    t.output_dir = (*tmp / t.id).string();
    fs::create_directories(t.output_dir);
    job.tasks.push_back(t);
    auto results = run_job(job, ro);
    if (!results || results->empty() || results->front().disposition != Disposition::passed) {
      row["runner"] = results && !results->empty() ? results->front().message : "runner failed";
      rows.push_back(row);
      continue;
    }
    auto flops = shape_flops(ctx, ss.shape);
    nlohmann::json r =
        run_shape(a, lib, ctx, ss, results->front(), seed, *sizes, flops ? *flops : 0, timer);
    row.update(r);
    std::fprintf(stderr, "%s: configuration %d, %s, %.1f GFLOP/s\n", ss.name.c_str(), c,
                 r.value("identical", false) ? "identical outputs" : "OUTPUTS DIFFER",
                 r.value("gflops", 0.0));
    rows.push_back(row);
  }
  nlohmann::json out = {{"checkpoint", *id},
                        {"device", dev->name},
                        {"driver", dev->driver},
                        {"library", a.library},
                        {"entry", a.entry},
                        {"protocol", a.queued_flush ? (a.flush_l2_only ? "queued flush of 2x L2"
                                                                       : "queued flush of 512 MiB")
                                                    : "runner (flush of 2x L2, gate)"},
                        {"rows", rows}};
  if (a.out.empty())
    std::printf("%s\n", out.dump(2).c_str());
  else
    std::ofstream(a.out) << out.dump(2) << "\n";
  fs::remove_all(*tmp);
  bool all = std::all_of(rows.begin(), rows.end(), [](const nlohmann::json& r) {
    return (r.value("identical", false) && r.value("threads_identical", true)) ||
           r.value("status", nlohmann::json()) == "refused";
  });
  return all ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--small")
      a.small = true;
    else if (s == "--queued-flush")
      a.queued_flush = true;
    else if (s == "--flush-l2-only")
      a.flush_l2_only = true;
    else if (s == "--threads" && i + 1 < argc)
      a.threads = std::max(1, std::atoi(argv[++i]));
    else if (s == "--samples" && i + 1 < argc)
      a.samples = std::atoi(argv[++i]);
    else if (s == "-o" && i + 1 < argc)
      a.out = argv[++i];
    else
      pos.push_back(s);
  }
  if (pos.size() != 4) {
    std::fprintf(stderr,
                 "usage: peak-export-check WORKSPACE CHECKPOINT LIBRARY.so ENTRY [--small] "
                 "[--samples N] [--queued-flush [--flush-l2-only]] [--threads N] [-o FILE]\n");
    return 2;
  }
  a.workspace = pos[0];
  a.checkpoint = pos[1];
  a.library = pos[2];
  a.entry = pos[3];
  try {
    return run(a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "peak-export-check: %s\n", e.what());
    return 4;
  }
}
