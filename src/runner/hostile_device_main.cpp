// peak-hostile-runner: the runner (runner/main.cpp, runner/execute.cpp) with a device whose
// "kernel" attacks the host from inside the runner process, as code loaded by a GPU driver could.
// Built with the tests only; runner_sandbox_test.cpp starts it through run_job, under the sandbox
// every runner gets, and checks that each attack is refused and nothing leaks.
//
// PEAK_HOSTILE_ATTACK picks the attack, PEAK_HOSTILE_TARGET its argument:
//   environment  dump the whole environment into every channel the runner has, then abort
//   read PATH    read a file and show its content on stderr, then abort
//   write PATH   create a file
//   connect PORT connect to 127.0.0.1:PORT
//   fork         start up to 1000 processes (each exits at once)
//   memory       reserve 100 GiB of host memory, 1 GiB at a time (never touched)
//   hang [PATH]  never return (a hung kernel); with PATH, first append the task's id to it (one
//                line per hung launch)
//   hang-once PATH  hang when PATH.<task id> does not exist, after creating it; return at once
//                when it does (a machine busy for a moment: the task misses its deadline once)
//   none         no attack: the kernel writes its outputs (zeros) and returns
//   fast MS      do nothing and report MS ms on both the device timer and the host clock (a
//                kernel that claims a time its context's traffic or work cannot take)
//
// What the device reports of its timings, for the tests of the parent's judgement of them (a
// kernel faster than a copy of its traffic, say):
//   PEAK_HOSTILE_KERNEL_MS  the device time of every timed launch (default 0)
//   PEAK_HOSTILE_COPY_MS    when set, the device has one same-traffic copy method,
//                           "hostile-copy", whose timed copies take this long (the bytes are
//                           copied); unset, it has none
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runner/device.h"

extern char** environ;

namespace peak {
namespace {

std::string env_or(const char* name, const char* fallback = "") {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

std::string all_environment() {
  std::string out;
  for (char** e = environ; *e; ++e) out += std::string(*e) + "\n";
  return out;
}

struct HostBuffer {
  std::vector<uint8_t> bytes;
};
class NoKernel : public LoadedKernel {};

class HostileDevice : public Device {
 public:
  DeviceFacts facts() override {
    DeviceFacts f;
    f.backend = "hostile";
    f.name = "hostile test device";
    f.is_cpu = true;
    return f;
  }
  double measure_fp32_tflops() override { return 0; }
  Result<DeviceBuffer> alloc(size_t bytes) override {
    return DeviceBuffer{new HostBuffer{std::vector<uint8_t>(bytes)}, bytes};
  }
  void free(DeviceBuffer& b) override {
    delete static_cast<HostBuffer*>(b.handle);
    b.handle = nullptr;
  }
  Status upload(DeviceBuffer& b, const void* data, size_t bytes) override {
    std::memcpy(bytes_of(b).data(), data, std::min(bytes, bytes_of(b).size()));
    return Status::ok();
  }
  Status download(const DeviceBuffer& b, void* data, size_t bytes) override {
    std::memcpy(data, bytes_of(b).data(), std::min(bytes, bytes_of(b).size()));
    return Status::ok();
  }
  Status fill_u32(DeviceBuffer& b, uint32_t word) override {
    auto& v = bytes_of(b);
    for (size_t o = 0; o + 4 <= v.size(); o += 4) std::memcpy(&v[o], &word, 4);
    return Status::ok();
  }
  Result<std::unique_ptr<LoadedKernel>> load(const RunnerTask&, const RunnerJob&,
                                             const LaunchPlan&) override {
    return std::unique_ptr<LoadedKernel>(new NoKernel);
  }
  LaunchOutcome launch(LoadedKernel&, const RunnerTask& task, const RunnerJob& job,
                       const LaunchPlan&, TaskBuffers& buffers, bool timed) override {
    std::vector<DeviceBuffer>& arrays = buffers.arrays;
    LaunchOutcome o = attack(task);
    // Set, the variable decides the device time (the `fast` attack's own time otherwise).
    if (timed && std::getenv("PEAK_HOSTILE_KERNEL_MS"))
      o.device_ms = env_ms("PEAK_HOSTILE_KERNEL_MS");
    // The outputs get written, so that a refused attack is the only failure.
    for (size_t i = 0; i < job.arrays.size(); ++i)
      if (job.arrays[i].output) {
        size_t n = static_cast<size_t>(task.sizes.at(job.arrays[i].name)) * 4;
        std::memset(bytes_of(arrays[i]).data(), 0, n);
      }
    return o;
  }
  LaunchOutcome baseline(const std::string&, const RunnerTask&, const RunnerJob&,
                         std::vector<DeviceBuffer>&, bool) override {
    return {Disposition::not_run, "no baseline", 0, 0};
  }
  std::vector<std::string> copy_methods() override {
    if (env_or("PEAK_HOSTILE_COPY_MS").empty()) return {};
    return {"hostile-copy"};
  }
  LaunchOutcome copy(const std::string& method, const DeviceBuffer& src, DeviceBuffer& dst,
                     size_t bytes, bool timed) override {
    if (copy_methods().empty() || method != "hostile-copy")
      return Device::copy(method, src, dst, bytes, timed);
    std::memcpy(bytes_of(dst).data(), bytes_of(src).data(),
                std::min({bytes, bytes_of(src).size(), bytes_of(dst).size()}));
    LaunchOutcome o = done("copied");
    if (timed) o.device_ms = env_ms("PEAK_HOSTILE_COPY_MS");
    return o;
  }
  void flush_caches() override {}
  double clock_mhz() override { return 0; }
  bool lost() override { return false; }

 private:
  static double env_ms(const char* name) { return std::atof(env_or(name, "0").c_str()); }
  static std::vector<uint8_t>& bytes_of(const DeviceBuffer& b) {
    return static_cast<HostBuffer*>(b.handle)->bytes;
  }
  static LaunchOutcome refused(const std::string& what) {
    return {Disposition::launch_failed, fmt::format("{}: {}", what, std::strerror(errno)), 0, 0};
  }
  static LaunchOutcome done(const std::string& what) { return {Disposition::passed, what, 0, 0}; }

  LaunchOutcome attack(const RunnerTask& task) {
    const std::string kind = env_or("PEAK_HOSTILE_ATTACK");
    const std::string target = env_or("PEAK_HOSTILE_TARGET");
    if (kind == "environment") {
      std::string env = all_environment();
      // Everywhere this process can write: its streams, the output folder, HOME, TMPDIR and the
      // machine's /tmp; then a crash, so the parent shows its stderr.
      std::fprintf(stdout, "%s", env.c_str());
      std::fprintf(stderr, "%s", env.c_str());
      for (const std::string& dir :
           {task.output_dir, env_or("HOME"), env_or("TMPDIR"), std::string("/tmp")}) {
        if (dir.empty()) continue;
        std::ofstream(dir + "/stolen-environment.txt") << env;
      }
      std::fflush(nullptr);
      std::abort();
    }
    if (kind == "read") {
      std::ifstream f(target, std::ios::binary);
      if (!f) return refused("cannot read " + target);
      std::string content((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      // Out through stderr: the parent shows it in the crash message.
      std::fprintf(stderr, "read %s: %s\n", target.c_str(), content.c_str());
      std::fflush(stderr);
      std::abort();
    }
    if (kind == "write") {
      FILE* f = std::fopen(target.c_str(), "w");
      if (!f) return refused("cannot create " + target);
      std::fputs("written from inside the runner\n", f);
      std::fclose(f);
      return done("created " + target);
    }
    if (kind == "connect") {
      int s = ::socket(AF_INET, SOCK_STREAM, 0);
      if (s < 0) return refused("socket(AF_INET)");
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<uint16_t>(std::atoi(target.c_str())));
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      int rc = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
      if (rc != 0) {
        LaunchOutcome o = refused("connect to 127.0.0.1:" + target);
        ::close(s);
        return o;
      }
      (void)!::write(s, "hello from the runner\n", 22);
      ::close(s);
      return done("connected to 127.0.0.1:" + target);
    }
    if (kind == "fork") {
      int started = 0;
      for (; started < 1000; ++started) {
        pid_t pid = ::fork();
        if (pid < 0) break;
        if (pid == 0) ::_exit(0);
        ::waitpid(pid, nullptr, 0);
      }
      if (started < 1000) return refused(fmt::format("fork refused after {} processes", started));
      return done("started 1000 processes");
    }
    if (kind == "memory") {
      std::vector<void*> held;
      constexpr size_t kGiB = size_t{1} << 30;
      while (held.size() < 100) {
        void* p = std::malloc(kGiB);
        if (!p) break;
        held.push_back(p);
      }
      size_t got = held.size();
      for (void* p : held) std::free(p);
      if (got < 100) {
        errno = ENOMEM;
        return {
            Disposition::crashed,
            fmt::format("host memory refused after {} GiB of 100: {}", got, std::strerror(ENOMEM)),
            0, 0};
      }
      return done("reserved 100 GiB of host memory");
    }
    if (kind == "fast") {
      const double ms = std::atof(target.c_str());
      return {Disposition::passed, "", ms, ms};
    }
    if (kind == "hang" || kind == "hang-once") {
      if (kind == "hang-once") {
        const std::string marker = target + "." + task.id;
        if (std::ifstream(marker)) return done("ran at once: " + marker + " exists");
        std::ofstream(marker) << "hung once\n";
      } else if (!target.empty()) {
        std::ofstream(target, std::ios::app) << task.id << "\n";
      }
      for (;;) ::pause();
    }
    if (kind == "none") return done("no attack");
    return {Disposition::launch_failed, "unknown PEAK_HOSTILE_ATTACK '" + kind + "'", 0, 0};
  }
};

}  // namespace

Result<std::unique_ptr<Device>> make_device(const RunnerJob&) {
  return std::unique_ptr<Device>(new HostileDevice);
}

}  // namespace peak
