// peak-runner (Vulkan) and peak-runner-cuda: the separate process that runs untrusted candidates.
// Reads one job document (JSON) on stdin and answers one JSON object per line on stdout
// (runner/protocol.h). The device comes from the device file linked in (make_device); the per-task
// work is runner/execute.cpp. docs/runner.md describes the protocol.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <iterator>
#include <string>

#include "runner/device.h"
#include "runner/execute.h"
#include "runner/protocol.h"

namespace {

using peak::json;

int g_protocol_fd = 1;
const auto g_t0 = std::chrono::steady_clock::now();  // the process's start, near enough
std::string g_name = "peak-runner";

// One protocol line, written whole and unbuffered so the parent sees it at once.
void emit(const json& j) {
  std::string line = j.dump(-1, ' ', false, json::error_handler_t::replace);
  line += '\n';
  size_t off = 0;
  while (off < line.size()) {
    ssize_t n = ::write(g_protocol_fd, line.data() + off, line.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) std::_Exit(1);  // the parent is gone
    off += static_cast<size_t>(n);
  }
}

void complain(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", g_name.c_str(), message.c_str());
  std::fflush(stderr);
}

int run(const peak::RunnerJob& job, peak::Device& device) {
  if (job.mode == "probe") {
    peak::DeviceFacts facts = device.facts();
    if (job.microbench) facts.measured_fp32_tflops = device.measure_fp32_tflops();
    emit(json{{"event", "probe"}, {"device", facts.to_json()}});
    emit(json{{"event", "done"}});
    return 0;
  }
  json started = device.startup_seconds();
  started["job"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - g_t0).count();
  emit(json{{"event", "started"}, {"seconds", started}});
  if (job.hold) {  // the parent says when the tasks may run
    std::string go;
    if (!std::getline(std::cin, go) || go != "go") return 0;
  }
  for (const peak::RunnerTask& task : job.tasks) {
    emit(json{{"event", "begin"}, {"id", task.id}});
    json out;
    try {
      out = peak::execute_task(device, job, task).to_json();
    } catch (const std::exception& e) {  // execute_task catches; this guards the rest
      peak::TaskResult r;
      r.id = task.id;
      r.disposition = peak::Disposition::crashed;
      r.message = std::string("runner internal error: ") + e.what();
      out = r.to_json();
    }
    out["event"] = "result";
    emit(out);
    if (device.lost()) {
      complain("the device was lost during task " + task.id + "; exiting for a fresh runner");
      std::_Exit(peak::kRunnerExitDeviceLost);
    }
  }
  emit(json{{"event", "done"}});
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 0 && argv[0]) {
    g_name = argv[0];
    if (auto slash = g_name.rfind('/'); slash != std::string::npos)
      g_name = g_name.substr(slash + 1);
  }
  if (argc > 1) {
    std::fprintf(stderr,
                 "usage: %s < job.json\n"
                 "Runs GPU kernels for peak; the job document and the answers are described in "
                 "docs/runner.md.\n",
                 g_name.c_str());
    return peak::kRunnerExitBadJob;
  }
  // The protocol keeps the real stdout. Anything else that writes to fd 1 (a driver, a
  // candidate's printf) lands in stderr instead of corrupting the protocol.
  int fd = ::dup(1);
  if (fd >= 0) {
    g_protocol_fd = fd;
    ::dup2(2, 1);
  }

  // The job: its first line when that is a whole document (the parent's compact JSON, which a
  // held job's "go" follows), else the whole of stdin (a document written by hand).
  std::string input;
  std::getline(std::cin, input);
  json j = json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() && std::cin) {
    input += '\n';
    input.append(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    j = json::parse(input, nullptr, /*allow_exceptions=*/false);
  }
  if (j.is_discarded()) {
    complain("the job on stdin is not valid JSON (" + std::to_string(input.size()) + " bytes)");
    return peak::kRunnerExitBadJob;
  }
  auto job = peak::RunnerJob::from_json(j);
  if (!job) {
    complain(job.error());
    return peak::kRunnerExitBadJob;
  }

  try {
    auto device = peak::make_device(*job);
    if (!device) {
      complain(device.error());
      return peak::kRunnerExitNoDevice;
    }
    return run(*job, *device.value());
  } catch (const std::exception& e) {
    complain(std::string("internal error: ") + e.what());
  } catch (...) {
    complain("internal error: an unknown exception");
  }
  return 1;
}
