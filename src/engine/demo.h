#pragma once
// `peak demo` and `peak doctor`.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "llm/llm.h"

namespace peak {

struct DemoOptions {
  std::string backend = "auto";  // cuda, hip, hlsl or auto (CUDA when a CUDA GPU answers)
  // The kernel family of the campaign: matmul (recordings/BACKEND-fp32 and BACKEND-fp32-full,
  // whose names predate the other families), or a family with a whole recording
  // recordings/FAMILY-BACKEND, its sequence sequences/FAMILY-BACKEND.toml and its context
  // examples/FAMILY-BACKEND-PRECISION.
  std::string family = "matmul";
  std::string dir;  // workspace folder ("" = a new temporary folder)
  std::string device;
  std::string devices;  // several GPUs of one host (engine/devices.h); excludes `device`
  bool small = false, full = false, quiet = false, json_out = false;
  int budget = 0;
};
// Runs the recorded campaign for the chosen backend; returns a CLI exit code.
int run_demo(const DemoOptions& opts);

struct DoctorCheck {
  std::string what;
  bool ok = false;
  std::string detail;
  std::string fix;  // how to get it, when missing
};
struct DoctorReport {
  bool ok = false;         // at least one backend can run kernels (or: the LLM endpoint works)
  bool llm = false;        // a report of `peak doctor --llm`
  bool bad_input = false;  // the --llm spec itself is malformed
  std::vector<DoctorCheck> checks;
  std::string text() const;
  nlohmann::json to_json() const;
};
DoctorReport run_doctor(const std::string& device);
// `peak doctor --llm SPEC`: the endpoint answers, accepts the key, offers the model; one tiny
// completion (latency, tokens) and whether the reply keeps the format (one fenced code block).
// Manual, command and replay specs are checked for what applies to them.
DoctorReport run_llm_doctor(const std::string& spec, const DriverOptions& opts);

}  // namespace peak
