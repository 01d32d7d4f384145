#include "engine/demo.h"

#include <cstdio>

#include <fmt/format.h>

#include "engine/paths.h"
#include "engine/workspace.h"
#include "peak/version.h"
#include "report/report.h"
#include "util/fs.h"

namespace peak {

using json = nlohmann::json;

namespace {

// The backend `auto` resolves to: CUDA when its runner finds a GPU, else HLSL (Vulkan).
std::string choose_backend(const std::string& requested, const std::string& device,
                           std::string* why) {
  if (requested != "auto") return requested;
  auto cuda = make_backend("cuda");
  if (cuda) {
    auto facts = (*cuda)->probe(device, false);
    if (facts) {
      *why = fmt::format("CUDA GPU found: {}", facts->name);
      return "cuda";
    }
    *why = "no CUDA GPU (" + split_lines(facts.error()).front() + "); using HLSL through Vulkan";
  }
  return "hlsl";
}

}  // namespace

int run_demo(const DemoOptions& opts) {
  Progress out(stdout);
  std::string why;
  std::string backend = choose_backend(opts.backend, opts.device, &why);
  if (!why.empty() && !opts.quiet) out.print(why);
  fs::path ctx_dir = data_path("examples") / fmt::format("matmul-{}-fp32", backend);
  fs::path seq_path = data_path("sequences") / fmt::format("{}-fp32.toml", backend);
  fs::path rec_dir = data_path("recordings") / fmt::format("{}-fp32", backend);
  std::error_code ec;
  for (const auto& p : {ctx_dir, seq_path, rec_dir})
    if (!fs::exists(p, ec)) {
      std::fprintf(stderr,
                   "peak demo: %s is missing (set PEAK_DATA_DIR to the peak source folder)\n",
                   p.string().c_str());
      return 4;
    }
  fs::path dir;
  if (!opts.dir.empty()) {
    dir = opts.dir;
  } else {
    auto t = make_temp_dir("peak-demo-");
    if (!t) {
      std::fprintf(stderr, "peak demo: %s\n", t.error().c_str());
      return 4;
    }
    dir = *t;
  }
  auto ws = Workspace::init(ctx_dir, dir);
  if (!ws) {
    std::fprintf(stderr, "peak demo: %s\n", ws.error().c_str());
    return 2;
  }
  (*ws)->progress().set_quiet(opts.quiet);
  auto seq = load_sequence(seq_path);
  if (!seq) {
    std::fprintf(stderr, "peak demo: %s\n", seq.error().c_str());
    return 2;
  }
  auto dev = (*ws)->device(opts.device);
  if (!dev) {
    std::fprintf(
        stderr,
        "peak demo: no device for the %s backend: %s\nrun `peak doctor` to see what is missing\n",
        backend.c_str(), dev.error().c_str());
    return 4;
  }
  RunOptions ro;
  ro.apply.llm = "replay:" + rec_dir.string();
  ro.apply.driver.workspace = (*ws)->root();
  ro.apply.eval = default_eval_options(dev->is_cpu);
  ro.apply.eval.device = opts.device;
  if (opts.small) ro.apply.eval.small = true;
  if (opts.full) ro.apply.eval.small = false;
  if (opts.budget > 0) {
    ro.apply.eval.budget = static_cast<size_t>(opts.budget);
    ro.apply.eval.budget_fraction = 0;
  }
  if (!opts.quiet) {
    out.print(fmt::format("peak demo: {} on {} ({} backend), workspace {}", seq->name, dev->name,
                          backend, (*ws)->root().string()));
    out.print(fmt::format("LLM replies replayed from {}", rec_dir.string()));
  }
  auto rr = (*ws)->run(*seq, ro);
  auto head = (*ws)->head();
  Report rep;
  if (head)
    if (auto built = (*ws)->report(head->id, seq->name)) rep = std::move(*built);
  (void)write_file((*ws)->root() / "report.md", render_markdown(rep));
  (void)write_file((*ws)->root() / "report.json", render_json(rep).dump(2) + "\n");
  if (auto html = render_html(rep)) (void)write_file((*ws)->root() / "report.html", *html);
  if (opts.json_out) {
    json j = render_json(rep);
    j["disposition"] = std::string(to_string(rr.disposition));
    j["message"] = rr.message;
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("\n%s", render_text(rep).c_str());
    std::printf("\n%s: %s\nreports: %s, %s, %s\n",
                rr.disposition == Disposition::passed ? "done" : "stopped", rr.message.c_str(),
                ((*ws)->root() / "report.md").string().c_str(),
                ((*ws)->root() / "report.json").string().c_str(),
                ((*ws)->root() / "report.html").string().c_str());
  }
  return rr.disposition == Disposition::passed ? 0 : 1;
}

std::string DoctorReport::text() const {
  std::string out;
  for (const auto& c : checks) {
    out += fmt::format("[{}] {}: {}\n", c.ok ? " ok " : "MISS", c.what, c.detail);
    if (!c.ok && !c.fix.empty()) out += fmt::format("       fix: {}\n", c.fix);
  }
  out += ok ? "peak can run kernels on this machine.\n"
            : "no backend can run kernels here; see the fixes above.\n";
  return out;
}

json DoctorReport::to_json() const {
  json j{{"ok", ok}, {"checks", json::array()}};
  for (const auto& c : checks)
    j["checks"].push_back({{"what", c.what}, {"ok", c.ok}, {"detail", c.detail}, {"fix", c.fix}});
  return j;
}

DoctorReport run_doctor(const std::string& device) {
  DoctorReport r;
  r.checks.push_back(
      {"peak", true,
       fmt::format("{} ({}), data in {}", PEAK_VERSION, PEAK_CXX_COMPILER, data_dir().string()),
       ""});
  for (const std::string name : {"hlsl", "cuda"}) {
    auto b = make_backend(name);
    if (!b) {
      r.checks.push_back({name + " backend", false, b.error(), ""});
      continue;
    }
    std::string tc;
    for (const auto& [k, v] : (*b)->toolchain()) tc += (tc.empty() ? "" : ", ") + k + " " + v;
    std::error_code ec;
    fs::path runner = (*b)->runner();
    bool have_runner = !runner.empty() && fs::exists(runner, ec);
    r.checks.push_back({name + " toolchain", !tc.empty(), tc.empty() ? "not found" : tc,
                        name == "cuda" ? "install the CUDA toolkit (nvcc) and rebuild peak"
                                       : "run scripts/setup-debian.sh (shaderc, Vulkan headers)"});
    r.checks.push_back({name + " runner", have_runner, have_runner ? runner.string() : "not built",
                        name == "cuda"
                            ? "build peak where the CUDA toolkit is installed (peak-runner-cuda)"
                            : "rebuild peak (peak-runner)"});
    if (!have_runner) continue;
    auto facts = (*b)->probe(device, false);
    if (facts) {
      r.ok = true;
      std::string detail =
          fmt::format("{} — {} {}", facts->name, facts->driver, facts->api_version);
      if (!facts->arch.empty()) detail += ", " + facts->arch;
      if (facts->compute_units) detail += fmt::format(", {} compute units", facts->compute_units);
      if (auto p = documented_peaks(facts->name))
        detail += fmt::format(", documented FP32 {:.1f} / FP16 {:.1f} TFLOP/s", p->fp32_tflops,
                              p->fp16_tflops);
      if (facts->is_cpu) detail += " (a CPU device: fine for tests and small demos)";
      r.checks.push_back({name + " device", true, detail, ""});
    } else {
      r.checks.push_back(
          {name + " device", false,
           split_lines(facts.error()).empty() ? "" : split_lines(facts.error()).front(),
           name == "cuda"
               ? "needs an NVIDIA GPU and driver"
               : "apt-get install mesa-vulkan-drivers libvulkan1 (lavapipe) or a GPU driver"});
    }
  }
  return r;
}

}  // namespace peak
