#pragma once
// Test helpers of the backend interface: a backend that compiles nothing.
#include "backend/backend.h"

namespace peak::testing {

// A backend that builds every configuration (an empty artifact), evaluates launch plans of the
// plan language without arguments or shared memory, resolves them as they are, and has no
// baseline; tests override what they observe.
class StubBackend : public Backend {
 public:
  std::string name() const override { return "fake"; }
  std::string source_extension() const override { return ".txt"; }
  std::map<std::string, std::string> translation_table() const override { return {}; }
  std::filesystem::path runner() const override { return {}; }
  std::vector<std::pair<std::string, std::string>> toolchain() const override { return {}; }
  Result<DeviceFacts> probe(const std::string&, bool) override { return DeviceFacts{}; }
  BuildResult build(const BuildRequest&) override {
    BuildResult r;
    r.disposition = Disposition::passed;
    return r;
  }
  PlanDialect plan_dialect() const override {
    PlanDialect d;
    d.backend = "fake";
    d.args = false;
    d.shared = false;
    return d;
  }
  std::string baseline(const KernelContext&, const DeviceFacts&) const override { return ""; }

 protected:
  PlanResult resolve_plan(LaunchPlan&, const BuildResult&, const DeviceFacts&) override {
    return {};
  }
};

}  // namespace peak::testing
