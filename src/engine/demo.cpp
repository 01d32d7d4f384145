#include "engine/demo.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "engine/paths.h"
#include "engine/workspace.h"
#include "llm/spec.h"
#include "peak/version.h"
#include "report/report.h"
#include "transform/reply.h"
#include "util/fs.h"
#include "util/sandbox.h"

namespace peak {

using json = nlohmann::json;

namespace {

// Tuning configurations per step of the demo on a CPU device: the fourteen steps of the whole
// HLSL sequence then replay at the small shapes in a few minutes on two cores.
constexpr int kCpuDemoBudget = 2;

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

// The files of the campaign `peak demo` replays: its context, the recording of its first steps
// with their sequence (matmul alone has one), and the whole recording with its sequence.
struct DemoCampaign {
  fs::path context, short_rec, short_seq, full_rec, full_seq;
};

// The contexts for `backend` by family: examples/FAMILY-BACKEND-PRECISION, sorted.
std::map<std::string, std::vector<fs::path>> demo_contexts(const std::string& backend) {
  std::map<std::string, std::vector<fs::path>> found;
  std::error_code ec;
  const std::string infix = "-" + backend + "-";
  for (const auto& e : fs::directory_iterator(data_path("examples"), ec)) {
    const std::string name = e.path().filename().string();
    if (auto at = name.find(infix); at != std::string::npos && at > 0)
      found[name.substr(0, at)].push_back(e.path());
  }
  for (auto& [family, paths] : found) std::sort(paths.begin(), paths.end());
  return found;
}

// The context of `family` for `backend`: its fp32 one where it exists, else the first (rmsnorm's
// is bf16); "" when there is none.
fs::path demo_context(const std::string& family, const std::string& backend) {
  const auto found = demo_contexts(backend);
  auto it = found.find(family);
  if (it == found.end()) return {};
  for (const fs::path& p : it->second)
    if (p.filename().string() == family + "-" + backend + "-fp32") return p;
  return it->second.front();
}

DemoCampaign demo_campaign(const std::string& family, const std::string& backend) {
  const fs::path rec = data_path("recordings"), seq = data_path("sequences");
  if (family == "matmul")  // the first campaigns, named before there were other families
    return {demo_context(family, backend), rec / (backend + "-fp32"),
            seq / (backend + "-fp32-short.toml"), rec / (backend + "-fp32-full"),
            seq / (backend + "-fp32.toml")};
  const std::string name = family + "-" + backend;
  return {demo_context(family, backend), {}, {}, rec / name, seq / (name + ".toml")};
}

// Whether a recording and its sequence are there to replay (a campaign without a short one has
// empty paths for it).
bool replayable(const fs::path& rec, const fs::path& seq) {
  std::error_code ec;
  return !rec.empty() && fs::exists(rec, ec) && fs::exists(seq, ec);
}

// Whether `family` has a recording and sequence `peak demo` can replay on `backend`.
bool has_recorded_campaign(const std::string& family, const std::string& backend) {
  const DemoCampaign c = demo_campaign(family, backend);
  return replayable(c.short_rec, c.short_seq) || replayable(c.full_rec, c.full_seq);
}

}  // namespace

int run_demo(const DemoOptions& opts) {
  // With --json, standard output holds the report's JSON alone.
  Progress out(opts.json_out ? stderr : stdout);
  std::string why;
  std::string backend = choose_backend(opts.backend, opts.device, &why);
  if (!why.empty() && !opts.quiet) out.print(why);
  const DemoCampaign campaign = demo_campaign(opts.family, backend);
  std::error_code ec;
  if (campaign.context.empty() && !fs::exists(data_path("examples"), ec)) {
    std::fprintf(stderr, "peak demo: %s is missing (set PEAK_DATA_DIR to the peak source folder)\n",
                 data_path("examples").string().c_str());
    return 4;
  }
  if (campaign.context.empty()) {
    std::vector<std::string> families;
    for (const auto& [family, paths] : demo_contexts(backend)) families.push_back(family);
    std::fprintf(stderr, "peak demo: no %s context for the %s backend in %s (--family: %s)\n",
                 opts.family.c_str(), backend.c_str(), data_path("examples").string().c_str(),
                 join(families, ", ").c_str());
    return 2;
  }
  const fs::path ctx_dir = campaign.context;
  // The short recording covers the first three steps, which the short sequence names; the full
  // one (where it exists) the whole sequence.
  fs::path rec_dir = campaign.short_rec, seq_path = campaign.short_seq;
  const fs::path full_rec = campaign.full_rec, full_seq = campaign.full_seq;
  const bool have_short = replayable(rec_dir, seq_path);
  const bool have_full = replayable(full_rec, full_seq);
  // A family with a context here but no recorded campaign of this backend (attention): say which
  // families have one.
  if (!have_short && !have_full && fs::exists(data_path("recordings"), ec)) {
    std::vector<std::string> with;
    for (const auto& [family, paths] : demo_contexts(backend))
      if (has_recorded_campaign(family, backend)) with.push_back(family);
    std::fprintf(stderr,
                 "peak demo: family %s has a %s context but no recorded campaign (%s); --family "
                 "with one: %s\n",
                 opts.family.c_str(), backend.c_str(), full_rec.string().c_str(),
                 join(with, ", ").c_str());
    return 2;
  }
  // Missing: the context, or both recordings (named by the short one's files, or the whole one's
  // where a family has no short one).
  std::vector<fs::path> needed = {ctx_dir};
  if (!have_short && !have_full) {
    needed.push_back(rec_dir.empty() ? full_seq : seq_path);
    needed.push_back(rec_dir.empty() ? full_rec : rec_dir);
  }
  for (const auto& p : needed)
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
  EvalChoices wanted;
  wanted.device = opts.device;
  wanted.devices = opts.devices;
  auto devices = (*ws)->resolve_devices(wanted);  // with --devices, the first makes the timing
  if (!devices && devices.error_kind() == ErrorKind::input) {
    std::fprintf(stderr, "peak demo: %s\n", devices.error().c_str());
    return 2;
  }
  auto dev = devices ? Result<DeviceFacts>(*devices->facts) : Result<DeviceFacts>(devices.status());
  if (!dev) {
    std::fprintf(
        stderr,
        "peak demo: no device for the %s backend: %s\nrun `peak doctor` to see what is missing\n",
        backend.c_str(), dev.error().c_str());
    return 4;
  }
  // The whole sequence where its recording exists: with --full (the bench shapes), and on a CPU
  // device (lavapipe), where it runs at the small shapes with a few tuning configurations per
  // step unless --budget says otherwise. A GPU without --full replays the first three steps
  // where their short recording exists (HIP has only the whole one).
  const bool cpu_demo = dev->is_cpu && !opts.full;
  int budget = opts.budget;
  if ((opts.full || cpu_demo || !have_short) && have_full) {
    rec_dir = full_rec;
    seq_path = full_seq;
    if (cpu_demo && budget <= 0) budget = kCpuDemoBudget;
  }
  auto seq = load_sequence(seq_path);
  if (!seq) {
    std::fprintf(stderr, "peak demo: %s\n", seq.error().c_str());
    return 2;
  }
  RunOptions ro;
  ro.apply.llm = "replay:" + rec_dir.string();
  ro.apply.driver.workspace = (*ws)->root();
  ro.apply.eval.device = opts.device;
  ro.apply.eval.devices = opts.devices;
  if (opts.small) ro.apply.eval.small = true;
  if (opts.full) ro.apply.eval.small = false;
  // A budget N means N configurations at most (eval_options_for drops the space fraction), in
  // every step: as the strategy budget too, it also caps the steps whose sequence asks for their
  // whole space (a CPU demo's last step would otherwise search all of it at lavapipe's pace).
  if (budget > 0) {
    ro.apply.eval.budget = static_cast<size_t>(budget);
    ro.apply.eval.strategy_budget = Budget{static_cast<size_t>(budget), 0, 0};
  }
  if (!opts.quiet) {
    out.print(fmt::format("peak demo: {} ({} steps) on {} ({} backend), workspace {}", seq->name,
                          seq->steps.size(), dev->name, backend, (*ws)->root().string()));
    out.print(fmt::format("LLM replies replayed from {}", rec_dir.string()));
    if (budget > 0)
      out.print(fmt::format("at most {} tuning configuration{} per step{}", budget,
                            budget == 1 ? "" : "s",
                            opts.budget > 0 ? "" : " (a CPU device; --budget N for more)"));
  }
  auto rr = (*ws)->run(*seq, ro);
  if (rr.input_error || rr.environment_error) {
    std::fprintf(stderr, "peak demo: %s\n", rr.message.c_str());
    return rr.input_error ? 2 : 4;
  }
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

namespace {

// The vendor libraries the CUDA runner times as baselines, as its facts say: cuBLAS, and cuDNN,
// loaded at run time and "none: <why>" where it is absent (the row families then run with no
// baseline).
DoctorCheck cuda_baselines_check(const DeviceFacts& facts) {
  auto fact = [&](const char* key) {
    auto it = facts.extra.find(key);
    return it == facts.extra.end() ? std::string("not reported") : it->second;
  };
  const std::string cudnn = fact("cudnn");
  return {"cuda baselines", !starts_with(cudnn, "none"),
          fmt::format("cuBLAS {}, cuDNN {}", fact("cublas"), cudnn),
          "install cuDNN 9 (libcudnn.so.9 where the loader finds it) for the cudnn baseline of "
          "softmax, rmsnorm and layernorm"};
}

}  // namespace

std::string DoctorReport::text() const {
  std::string out;
  for (const auto& c : checks) {
    out += fmt::format("[{}] {}: {}\n", c.ok ? " ok " : "MISS", c.what, c.detail);
    if (!c.ok && !c.fix.empty()) out += fmt::format("       fix: {}\n", c.fix);
  }
  if (llm)
    out += ok ? "the LLM endpoint is ready for a campaign.\n"
              : "the LLM endpoint is not ready; see the messages above.\n";
  else
    out += ok ? "peak can run kernels on this machine.\n"
              : "no backend can run kernels here; see the fixes above.\n";
  return out;
}

json DoctorReport::to_json() const {
  json j{{"ok", ok}, {"llm", llm}, {"checks", json::array()}};
  for (const auto& c : checks)
    j["checks"].push_back({{"what", c.what}, {"ok", c.ok}, {"detail", c.detail}, {"fix", c.fix}});
  return j;
}

DoctorReport run_llm_doctor(const std::string& spec, const DriverOptions& opts) {
  DoctorReport r;
  r.llm = true;
  auto d = make_driver(spec, opts);
  if (!d) {
    r.bad_input = d.error_kind() == ErrorKind::input;
    r.checks.push_back(
        {"LLM driver", false, d.error(), r.bad_input ? "fix the --llm spec" : "see the message"});
    return r;
  }
  LlmDriver& driver = **d;
  r.checks.push_back({"LLM driver", true, driver.describe(), ""});
  for (const auto& c : driver.check()) {
    r.checks.push_back({c.what, c.ok, c.detail, ""});
    if (!c.ok) return r;
  }
  // Recordings and people are not asked anything.
  const LlmKind kind = parse_llm_spec(spec)->kind;  // make_driver parsed it
  if (kind == LlmKind::replay || kind == LlmKind::manual) {
    r.checks.push_back({"completion", true,
                        kind == LlmKind::manual
                            ? "manual mode: a person or an agent answers each prompt with `peak "
                              "respond`; nothing is asked now"
                            : "replayed replies: no model is asked",
                        ""});
    r.ok = true;
    return r;
  }
  // One tiny completion: does the model answer, how fast, and does it keep the reply format?
  LlmRequest req;
  req.system =
      "You are a GPU performance engineer. Reply with exactly one fenced code block holding the "
      "code asked for, and nothing else that is code.";
  req.user = "Write the C statement that sets the int variable x to 1.";
  req.key = "doctor";
  req.step_label = "peak doctor";
  req.max_tokens = 256;
  req.timeout_s = 120;
  LlmReply reply = driver.complete(req);
  if (!reply.ok()) {
    r.checks.push_back({"completion", false, reply.error, ""});
    return r;
  }
  std::string usage = reply.prompt_tokens + reply.completion_tokens > 0
                          ? fmt::format(", {} prompt + {} completion tokens", reply.prompt_tokens,
                                        reply.completion_tokens)
                          : "";
  r.checks.push_back(
      {"completion", true,
       fmt::format("{} answered in {}{}", reply.producer.empty() ? reply.driver : reply.producer,
                   format_seconds(reply.latency_s), usage),
       ""});
  SpliceOutcome sp = splice_reply(reply.text, SourceRegions{}, Region::device);
  r.checks.push_back(
      {"reply format", sp.disposition == Disposition::passed,
       sp.disposition == Disposition::passed
           ? "exactly one fenced code block, as peak's prompts ask"
           : fmt::format("the reply does not keep the format ({}): {}", to_string(sp.disposition),
                         sp.message),
       "a model that does not keep the format fails its attempts with no_code; try another "
       "model"});
  r.ok = sp.disposition == Disposition::passed;
  return r;
}

DoctorReport run_doctor(const std::string& device) {
  DoctorReport r;
  r.checks.push_back(
      {"peak", true,
       fmt::format("{} ({}), data in {}", PEAK_VERSION, PEAK_CXX_COMPILER, data_dir().string()),
       ""});
  {
    const SandboxSupport& s = sandbox_support();
    bool full = s.level == SandboxSupport::Level::full && sandbox_enabled();
    r.checks.push_back({"sandbox", full, sandbox_status(),
                        !sandbox_enabled() ? "drop --no-sandbox / PEAK_NO_SANDBOX"
                        : full             ? ""
                               : "install bubblewrap and allow user namespaces (docs/sandbox.md)"});
  }
  for (const std::string name : {"hlsl", "cuda", "hip"}) {
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
    bool nvidia = name == "cuda" || name == "hip";  // HIP runs on NVIDIA (peak-runner-cuda)
    // HIP: hipcc builds for AMD on any machine; without it there is no AMD build.
    bool tc_ok = !tc.empty() && !(name == "hip" && starts_with(tc, "hipcc not found"));
    r.checks.push_back({name + " toolchain", tc_ok, tc.empty() ? "not found" : tc,
                        name == "cuda"  ? "install the CUDA toolkit (nvcc) and rebuild peak"
                        : name == "hip" ? "run scripts/setup-debian.sh (Debian's hipcc, for the "
                                          "AMD builds); the CUDA toolkit runs HIP on NVIDIA"
                                        : "run scripts/setup-debian.sh (shaderc, Vulkan headers)"});
    r.checks.push_back({name + " runner", have_runner, have_runner ? runner.string() : "not built",
                        nvidia ? "build peak where the CUDA toolkit is installed (peak-runner-cuda)"
                               : "rebuild peak (peak-runner)"});
    if (!have_runner) continue;
    auto facts = (*b)->probe(device, false);
    if (facts) {
      r.ok = true;
      std::string detail =
          fmt::format("{} — {} {}", facts->name, facts->driver, facts->api_version);
      if (!facts->arch.empty()) detail += ", " + facts->arch;
      if (facts->compute_units) detail += fmt::format(", {} compute units", facts->compute_units);
      if (auto p = documented_peaks(facts->name)) {
        detail +=
            fmt::format(", documented FP32 {:.1f} / FP16 {:.1f}", p->fp32_tflops, p->fp16_tflops);
        if (p->fp8_tflops > 0) detail += fmt::format(" / FP8 {:.1f}", p->fp8_tflops);
        detail += " TFLOP/s";
      }
      if (facts->is_cpu) detail += " (a CPU device: fine for tests and small demos)";
      r.checks.push_back({name + " device", true, detail, ""});
      if (name == "cuda") r.checks.push_back(cuda_baselines_check(*facts));
    } else {
      r.checks.push_back(
          {name + " device", false,
           split_lines(facts.error()).empty() ? "" : split_lines(facts.error()).front(),
           nvidia ? (name == "hip" ? "needs an NVIDIA GPU and driver (HIP kernels run on NVIDIA "
                                     "through peak_hip_to_cuda.h; no AMD device is run)"
                                   : "needs an NVIDIA GPU and driver")
                  : "apt-get install mesa-vulkan-drivers libvulkan1 (lavapipe) or a GPU driver"});
    }
  }
  return r;
}

}  // namespace peak
