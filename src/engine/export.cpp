// `peak export` (Workspace::export_checkpoint): a checkpoint's kernel, its launch plan and its
// dispatch table as a standalone library (docs/export.md).
#include <algorithm>
#include <regex>

#include <fmt/format.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/hip/hip_backend.h"
#include "backend/hlsl/hlsl_backend.h"
#include "backend/kernel_params.h"
#include "engine/workspace.h"
#include "export/export.h"
#include "family/family.h"
#include "report/dispatch.h"
#include "results/summary.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace peak {

namespace fs = std::filesystem;
using exporter::ExportSpec;
using exporter::ExportVariant;

namespace {

// The summary of evaluation `eval` of checkpoint `id` (empty when it cannot be read).
EvalSummary evaluation_summary(const Store& store, int64_t id, int64_t eval) {
  auto evs = store.evaluations(id);
  if (!evs) return {};
  for (const auto& e : *evs)
    if (e.id == eval)
      if (auto text = store.get_blob(e.summary_blob)) return parse_summary(*text);
  return {};
}

// What a variant was chosen on, for the README and export.json.
json measured_of(const DispatchVariant& v, const std::string& baseline) {
  if (v.disposition != "passed" && v.gflops <= 0) return json::object();
  json m = {{"shapes", v.shapes}, {"evaluated", v.evaluated}, {"space", v.space}};
  std::string at = v.shapes.empty() ? std::string("its first shape") : v.shapes.front();
  if (v.bytes_headline) {
    m["gbs"] = v.gbs;
    m["text"] = fmt::format("{:.1f} GB/s at {}", v.gbs, at);
  } else {
    m["gflops"] = v.gflops;
    m["text"] = fmt::format("{:.1f} GFLOP/s at {}", v.gflops, at);
    if (v.baseline_gflops > 0) {
      m["baseline_gflops"] = v.baseline_gflops;
      m["text"] = fmt::format("{} ({:.1f} % of {})", m["text"].get<std::string>(),
                              100.0 * v.gflops / v.baseline_gflops,
                              baseline.empty() ? "the vendor library" : baseline);
    }
  }
  return m;
}

// The variants of the export: one per distinct configuration of the table (the fallback last
// when a class runs it), or the checkpoint's best alone.
void choose_variants(ExportSpec& spec, const std::optional<DispatchTable>& table,
                     const Config& best, const std::string& best_text,
                     const std::string& baseline) {
  auto index_of = [&](const Config& c) {
    for (size_t i = 0; i < spec.variants.size(); ++i)
      if (spec.variants[i].config == c) return static_cast<int>(i);
    ExportVariant v;
    v.config = c;
    v.config_text = config_text(c);
    spec.variants.push_back(v);
    return static_cast<int>(spec.variants.size() - 1);
  };
  if (!table) {
    const int i = index_of(best);
    spec.variants[static_cast<size_t>(i)].classes = {"every shape"};
    spec.variants[static_cast<size_t>(i)].measured = {{"text", best_text}};
    spec.rule_variant.assign(spec.rules.size(), i);
    spec.fallback_variant = i;
    return;
  }
  for (const ClassRule& r : spec.rules) {
    const std::string cls(to_string(r.cls));
    const int i = index_of(dispatch_config(*table, cls));
    spec.rule_variant.push_back(i);
    ExportVariant& v = spec.variants[static_cast<size_t>(i)];
    v.classes.push_back(cls);
    if (const DispatchVariant* dv = dispatch_variant(*table, cls); dv && v.measured.empty())
      v.measured = measured_of(*dv, baseline);
  }
  spec.fallback_variant = index_of(table->fallback);
  ExportVariant& fb = spec.variants[static_cast<size_t>(spec.fallback_variant)];
  fb.classes.push_back("fallback");
  if (fb.measured.empty()) fb.measured = {{"text", "the checkpoint's best configuration"}};
}

// Builds every variant (the backend's build cache is shared with evaluations) and records the
// symbols of the kernels the plan launches.
Status build_variants(ExportSpec& spec, Backend& be, const KernelContext& ctx,
                      const std::string& source, const DeviceFacts& facts, const fs::path& cache,
                      Progress& progress) {
  const std::vector<std::string> kernels = spec.plan->kernels();
  for (size_t i = 0; i < spec.variants.size(); ++i) {
    ExportVariant& v = spec.variants[i];
    progress.status(fmt::format("building configuration {} of {} ({})", i + 1, spec.variants.size(),
                                v.config_text),
                    true);
    BuildResult b = be.build(BuildRequest{&ctx, source, v.config, facts, cache});
    progress.clear();
    if (b.disposition != Disposition::passed)
      return make_error(fmt::format("configuration {} ({}) does not build ({}):\n{}", i,
                                    v.config_text, to_string(b.disposition), b.log),
                        ErrorKind::failed);
    v.artifact = b.artifact.string();
    const json k =
        b.resources.is_object() ? b.resources.value("kernels", json::object()) : json::object();
    for (const std::string& name : kernels) {
      exporter::KernelSymbol s;
      s.symbol = name;
      if (k.contains(name)) s.symbol = k[name].value("mangled", name);
      // HLSL builds one SPIR-V module per entry point.
      v.kernel_artifacts.push_back(k.contains(name) ? k[name].value("module", "") : "");
      if (auto sizes = mangled_param_sizes(s.symbol)) s.param_bytes = *sizes;
      v.kernels.push_back(s);
    }
  }
  return Status::ok();
}

// CUDA: each variant's compile unit and peak's pinned nvcc flags (less the resource report).
void cuda_device_code(ExportSpec& spec, const SourceRegions& regions, const KernelContext& ctx) {
  for (ExportVariant& v : spec.variants) v.unit = cuda::compile_unit(regions, ctx.source_file);
  for (const std::string& f : cuda::pinned_flags(spec.arch))
    if (f != "-Xptxas" && f != "-v") spec.nvcc_flags.push_back(f);
}

// HIP: for AMD, hipcc per target as peak builds it (its resource report left out); for NVIDIA,
// nvcc through the mapping header, as peak runs HIP on NVIDIA.
void hip_device_code(ExportSpec& spec, const SourceRegions& regions, const KernelContext& ctx) {
  spec.amd_targets = hip::amd_targets();
  for (const std::string& f : hip::hipcc_flags("@TARGET@"))
    if (f != "-Rpass-analysis=kernel-resource-usage") spec.hipcc_flags.push_back(f);
  const NvccDialect d = hip::nvcc_dialect();
  spec.include_files = d.include_files;
  for (ExportVariant& v : spec.variants) {
    v.unit = hip::compile_unit(regions, ctx.source_file);
    v.nvcc_unit = cuda::compile_unit(regions, ctx.source_file, d.prelude);
  }
  for (const std::string& f : cuda::pinned_flags(spec.arch))
    if (f != "-Xptxas" && f != "-v") spec.nvcc_flags.push_back(f);
}

Result<std::vector<uint8_t>> spirv_module(const std::string& path) {
  auto bytes = read_file(path);
  if (!bytes)
    return make_error(fmt::format("cannot read the SPIR-V module {}: {}", path, bytes.error()),
                      ErrorKind::environment);
  return std::vector<uint8_t>(bytes->begin(), bytes->end());
}

// HLSL: the SPIR-V modules peak's build made (its runner ran them), one per entry point, and the
// unit they were compiled from, kept for reference.
Status hlsl_device_code(ExportSpec& spec, const SourceRegions& regions) {
  for (ExportVariant& v : spec.variants) {
    v.unit = hlsl::compile_unit(regions);
    auto b = spirv_module(v.artifact);
    if (!b) return b.status();
    v.binary = std::move(*b);
    v.kernel_binaries.clear();
    for (const std::string& path : v.kernel_artifacts) {
      auto m = path.empty() || path == v.artifact ? Result<std::vector<uint8_t>>(v.binary)
                                                  : spirv_module(path);
      if (!m) return m.status();
      v.kernel_binaries.push_back(std::move(*m));
    }
  }
  return Status::ok();
}

// What each backend's export compiles (or carries) of every variant.
Status add_device_code(ExportSpec& spec, const SourceRegions& regions, const KernelContext& ctx) {
  if (spec.backend == "cuda") cuda_device_code(spec, regions, ctx);
  if (spec.backend == "hip") hip_device_code(spec, regions, ctx);
  if (spec.backend == "hlsl") return hlsl_device_code(spec, regions);
  return Status::ok();
}

// The folder the export goes to: new, or empty, or (with `force`) one that an export wrote.
Status check_destination(const fs::path& dir, bool force) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return Status::ok();
  if (!fs::is_directory(dir, ec))
    return make_error(fmt::format("{} exists and is not a folder", dir.string()), ErrorKind::input);
  if (fs::is_empty(dir, ec)) return Status::ok();
  if (!fs::exists(dir / "export.json", ec))
    return make_error(fmt::format("{} is not empty and holds no export (no export.json): choose "
                                  "a new folder; peak export never replaces files it did not "
                                  "write",
                                  dir.string()),
                      ErrorKind::input);
  if (!force)
    return make_error(fmt::format("{} holds an export already: pass --force to replace its "
                                  "files, or choose a new folder",
                                  dir.string()),
                      ErrorKind::input);
  return Status::ok();
}

// The options that need nothing but themselves, checked before anything is read.
Status check_export_options(const ExportOptions& opts) {
  if (opts.out.empty())
    return make_error("peak export needs a destination folder: -o DIR", ErrorKind::input);
  if (!opts.name.empty() && exporter::c_identifier(opts.name) != opts.name)
    return make_error(fmt::format("--name {}: not a C identifier", opts.name), ErrorKind::input);
  if (!opts.arch.empty() && !std::regex_match(opts.arch, std::regex("^sm_[0-9]{2,3}[a-z]?$")))
    return make_error(
        fmt::format("--arch {}: not a CUDA architecture (sm_90a, sm_80, ...)", opts.arch),
        ErrorKind::input);
  return check_destination(opts.out, opts.force);
}

// A backend peak exports, with its compiler at hand (every configuration is built first).
Status check_export_backend(const Backend& be) {
  if (!exporter::exports_backend(be.name()))
    return make_error(fmt::format("peak export does not write {} libraries yet (it writes {}; "
                                  "docs/export.md)",
                                  be.name(), join(exporter::export_backends(), ", ")),
                      ErrorKind::input);
  if (be.name() != "hlsl" && cuda::find_nvcc().empty())
    return make_error(
        "nvcc was not found: peak export builds every configuration first; set PEAK_NVCC to its "
        "path or CUDA_HOME to the toolkit folder",
        ErrorKind::environment);
  return Status::ok();
}

// The checkpoint's best configuration (its kernel's defaults when never tuned), and what it was
// measured at.
Config best_of(const EvalSummary& result, const KernelContext& ctx, std::string& text) {
  Config best;
  if (result.best && result.best->config) best = config_from_json(*result.best->config);
  text = "the checkpoint's best configuration";
  if (best.empty()) {
    text = "the kernel's default values (never tuned)";
    for (const auto& p : ctx.tuning) best[p.name] = p.default_value;
  } else if (const SummaryBench* b = result.first_bench(); b && b->gflops) {
    text = fmt::format("{:.1f} GFLOP/s at {}", *b->gflops, b->shape.value_or("its first shape"));
  }
  return best;
}

// Where the configurations come from: the checkpoint, its table, the device they were measured
// on, its driver and toolkit.
json provenance_of(const CheckpointRecord& cp, const std::string& source, const EvalSummary& from,
                   const std::optional<DispatchTable>& table) {
  json p;
  p["checkpoint"] = cp.id;
  p["message"] = cp.message;
  p["transformation"] = cp.transformation;
  p["created_at"] = cp.created_at;
  p["source_sha256"] = sha256_hex(source);
  p["dispatch_evaluation"] = table ? json(table->evaluation) : json(nullptr);
  p["device"] = from.device && from.device->name ? *from.device->name : "unknown";
  p["driver"] = from.device && from.device->driver ? *from.device->driver : "unknown";
  std::string toolkit;
  if (from.toolchain)
    for (const auto& [k, v] : *from.toolchain) toolkit += (toolkit.empty() ? "" : ", ") + v;
  p["toolkit"] = toolkit.empty() ? "unknown" : toolkit;
  p["peak_version"] = from.peak_version.value_or("unknown");
  return p;
}

// Writes the rendered files into `dir`. An earlier export's device units that this one does not
// write again (it had more configurations) would mislead: they go, and only they.
Status write_export(const fs::path& dir, const std::vector<exporter::ExportFile>& rendered,
                    std::vector<std::string>& written) {
  std::error_code ec;
  if (fs::is_directory(dir / "kernels", ec))
    for (const auto& e : fs::directory_iterator(dir / "kernels", ec)) {
      const std::string n = e.path().filename().string();
      const std::string ext = e.path().extension().string();
      const bool ours = starts_with(n, "config_") &&
                        (ext == ".cu" || ext == ".hip" || ext == ".spv" || ext == ".hlsl");
      const bool kept = std::any_of(rendered.begin(), rendered.end(),
                                    [&](const auto& f) { return f.path == "kernels/" + n; });
      if (ours && !kept) fs::remove(e.path(), ec);
    }
  for (const exporter::ExportFile& f : rendered) {
    const fs::path path = dir / f.path;
    fs::create_directories(path.parent_path(), ec);
    if (auto s = write_file_atomic(path, f.text); !s)
      return make_error(s.message(), ErrorKind::environment);
    written.push_back(f.path);
  }
  return Status::ok();
}

}  // namespace

Result<ExportResult> Workspace::export_checkpoint(const std::string& ref,
                                                  const ExportOptions& opts) {
  if (auto s = check_export_options(opts); !s) return s;
  auto id = resolve(ref.empty() ? "HEAD" : ref);
  if (!id) return id.status();
  auto cp = store_->checkpoint(*id);
  if (!cp) return cp.status();
  auto files = checkpoint_files(*id);
  if (!files) return files.status();
  KernelContext ctx = files->first;
  const std::string& source = files->second;
  if (ctx.classes.empty())
    if (auto working = load_context(root_);
        working && !working->classes.empty() && working->scalars.size() == ctx.scalars.size())
      ctx.classes = working->classes;
  auto regions = split_regions(source, ctx.source_file);
  if (!regions) return make_error(regions.error(), ErrorKind::input);
  auto plan = parse_plan(*regions, ctx.source_file);
  if (!plan) return make_error(plan.error(), ErrorKind::input);
  auto be = backend();
  if (!be) return be.status();
  if (auto s = check_export_backend(**be); !s) return s;

  ExportSpec spec;
  spec.backend = (*be)->name();
  spec.name = opts.name.empty() ? exporter::c_identifier(ctx.name) : opts.name;
  spec.ctx = &ctx;
  spec.regions = &*regions;
  spec.plan = &*plan;
  spec.dialect = (*be)->plan_dialect();
  spec.rules = class_rules(ctx);

  // The configurations: the newest dispatch table's, or the best alone.
  const EvalSummary result = result_summary(*cp);
  std::optional<DispatchTable> table;
  if (!opts.single) table = latest_dispatch(*store_, *id);
  std::string best_text;
  const Config best = best_of(result, ctx, best_text);
  const EvalSummary from = table ? evaluation_summary(*store_, *id, table->evaluation) : result;
  const std::string baseline =
      from.first_bench() ? from.first_bench()->baseline.value_or("") : std::string();
  choose_variants(spec, table, best, best_text, baseline);

  // What the device code is built for: the device the configurations were measured on.
  DeviceFacts facts;
  facts.backend = spec.backend;
  if (from.device) {
    facts.name = from.device->name.value_or("");
    facts.arch = from.device->arch.value_or("");
  }
  if (!opts.arch.empty()) facts.arch = opts.arch;
  if (facts.arch.empty() && spec.backend != "hlsl") facts.arch = "sm_90a";
  spec.arch = facts.arch;
  if (auto s = build_variants(spec, **be, ctx, source, facts, root_ / ".peak" / "cache", progress_);
      !s)
    return s;
  if (auto s = add_device_code(spec, *regions, ctx); !s) return s;
  spec.provenance = provenance_of(*cp, source, from, table);

  auto rendered = exporter::render_export(spec);
  if (!rendered) return make_error(rendered.error(), ErrorKind::input);
  ExportResult r;
  r.dir = opts.out;
  r.entry = "peak_" + spec.name;
  r.checkpoint = *id;
  r.configurations = spec.variants.size();
  if (table) r.dispatch_evaluation = table->evaluation;
  r.device = spec.provenance["device"].get<std::string>();
  if (auto s = write_export(opts.out, *rendered, r.files); !s) return s;
  return r;
}

}  // namespace peak
