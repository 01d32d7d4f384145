#include "engine/workspace.h"

#include "engine/api.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "engine/evaluate_internal.h"
#include "engine/paths.h"
#include "expr/expr.h"
#include "peak/version.h"
#include "tune/record.h"
#include "tune/strategy.h"
#include "util/device_lock.h"
#include "util/fs.h"
#include "util/sandbox.h"
#include "util/sha256.h"
#include "validate/path_shapes.h"
#include "validate/task_timeout.h"

namespace peak {

EvalOptions default_eval_options(bool cpu_device) {
  EvalOptions o;
  o.small = cpu_device;
  o.budget_fraction = 0.15;
  if (cpu_device) {
    o.budget = 24;
    o.top_k = 4;
    o.seeds = 1;
    o.policy = TimingPolicy{2, 5, 20, 4.0, 0.03, false};
    o.screening = TimingPolicy{1, 3, 5, 1.5, 0.05, false};
    o.task_timeout_s = 120;
  } else {
    o.policy = TimingPolicy{5, 20, 200, 6.0, 0.01, true};
    o.screening = TimingPolicy{2, 5, 20, 1.0, 0.03, true};
  }
  return o;
}

EvalOptions eval_options_for(const EvalChoices& c, bool cpu_device) {
  EvalOptions e = default_eval_options(cpu_device);
  e.device = c.device;
  if (c.small) e.small = *c.small;
  if (c.budget > 0) {
    e.budget = c.budget;
    e.budget_fraction = 0;  // budget N: N configurations at most
  }
  e.strategy = c.strategy;
  e.reuse_measurements = c.reuse_measurements;
  Budget b{e.budget, e.budget_fraction, e.budget_seconds};
  if (auto parsed = Budget::parse(c.strategy_budget); !c.strategy_budget.empty() && parsed)
    b = *parsed;
  else if (c.budget == 0)
    b = default_budget(c.strategy, b);
  e.budget = b.evaluations;
  e.budget_fraction = b.fraction;
  e.budget_seconds = b.seconds;
  if (c.jobs > 0) e.jobs = c.jobs;
  e.baseline = c.baseline;
  e.tuning_overrides = c.tuning;
  e.compile_only = c.compile_only;
  e.sanitize = c.sanitize;
  e.validation_seed = c.validation_seed;
  e.cancelled = c.cancelled;
  // The kernel's own tuning values on the device's default shapes: comparable with every other
  // evaluation of the same kind (the budget only changes how much of the space is searched).
  e.standard = c.tuning.empty() && e.small == cpu_device && !c.compile_only;
  return e;
}

json eval_options_json(const EvalOptions& o) {
  json overrides = json::object();
  for (const auto& [k, v] : o.tuning_overrides) overrides[k] = v;
  json j{{"device", o.device},     {"small", o.small},
         {"budget", o.budget},     {"top_k", o.top_k},
         {"seeds", o.seeds},       {"baseline", o.baseline},
         {"tuning", overrides},    {"compile_only", o.compile_only},
         {"sanitize", o.sanitize}, {"task_timeout_s", o.task_timeout_s},
         {"standard", o.standard}};
  if (!o.devices.empty()) j["devices"] = o.devices;
  if (o.validation_seed != 0) j["validation_seed"] = o.validation_seed;
  if (!o.shapes.empty()) {
    json shapes = json::array();
    for (const auto& sh : o.shapes) shapes.push_back(sh.text());
    j["shapes"] = shapes;
  }
  return j;
}

// ---------------------------------------------------------------------------------------------
// Opening and creating

// Names in tuning_valid that are neither tuning parameters nor device facts. Each name is
// evaluated alone by the tuner's own evaluator (which knows the device facts), so that this
// check and the tuner never disagree.
Status check_context_names(const KernelContext& ctx, const std::string& where) {
  if (ctx.tuning_valid.empty()) return Status::ok();
  auto e = expr::Expression::parse(ctx.tuning_valid);
  if (!e)
    return Status::error(fmt::format("{}: tuning_valid: {}", where, e.error()), ErrorKind::input);
  std::vector<std::string> params, unknown;
  for (const auto& p : ctx.tuning) params.push_back(p.name);
  for (const auto& id : e->identifiers()) {
    if (std::find(params.begin(), params.end(), id) != params.end()) continue;
    KernelContext probe = ctx;
    for (auto& p : probe.tuning) p.values = {p.default_value};
    probe.tuning_valid = id;
    if (!space_for(probe, DeviceFacts{})) unknown.push_back(id);
  }
  if (unknown.empty()) return Status::ok();
  return Status::error(
      fmt::format("{}: tuning_valid = \"{}\" uses unknown name{} {}: it may use the tuning "
                  "parameters ({}) and the device facts (docs/kernel-context.md)",
                  where, ctx.tuning_valid, unknown.size() > 1 ? "s" : "",
                  "'" + join(unknown, "', '") + "'", params.empty() ? "none" : join(params, ", ")),
      ErrorKind::input);
}

std::set<std::string> tuning_names(const KernelContext& ctx) {
  std::set<std::string> names;
  for (const auto& p : ctx.tuning) names.insert(p.name);
  return names;
}

Status check_tuning_overrides(const std::map<std::string, std::vector<int64_t>>& overrides,
                              const std::set<std::string>& params, const std::string& what) {
  std::vector<std::string> unknown;
  for (const auto& [name, values] : overrides)
    if (!params.count(name)) unknown.push_back(name);
  if (unknown.empty()) return Status::ok();
  return Status::error(
      fmt::format("--tune names {}, which {} no tuning parameter{} of {} (its parameters: {}); "
                  "nothing was run",
                  join(unknown, ", "), unknown.size() > 1 ? "are" : "is",
                  unknown.size() > 1 ? "s" : "", what,
                  params.empty()
                      ? "none"
                      : join(std::vector<std::string>(params.begin(), params.end()), ", ")),
      ErrorKind::input);
}

std::string options_text(const std::vector<std::string>& options) {
  std::string out;
  for (const auto& o : options) {
    const bool plain = !o.empty() && std::all_of(o.begin(), o.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) ||
             (c != '\0' && std::strchr("-_.,/:=@%+", c) != nullptr);
    });
    out += " " + (plain ? o : shell_quote(o));
  }
  return out;
}

namespace {

// Marks the lock file's path.
fs::path lock_path(const fs::path& root) { return root / ".peak" / "lock"; }

// A workspace's registry for the interrupt handler: the live Workspaces of this process.
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::set<Workspace*>& registry() {
  static std::set<Workspace*> r;
  return r;
}

// Whether `peak_dir` is a workspace's store: it holds peak.db or FORMAT (a damaged store is
// found too, and Store::open says what is wrong with it). A folder that cannot be read is an
// error, not a reason to look further up.
Result<bool> find_store(const fs::path& peak_dir) {
  for (const char* name : {"peak.db", "FORMAT"}) {
    std::error_code ec;
    auto st = fs::symlink_status(peak_dir / name, ec);
    if (fs::exists(st)) return true;
    if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
      return make_error(fmt::format("cannot read the peak store {}: {}; make it readable (chmod "
                                    "u+rwx {}) and run the command again",
                                    peak_dir.string(), ec.message(), peak_dir.string()),
                        ErrorKind::environment);
  }
  return false;
}

std::vector<std::string> keys_of(const std::map<std::string, std::string>& m) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : m) keys.push_back(k);
  return keys;
}

// The files in `dest` that `peak init` would replace with the context's (their contents; those
// equal to the context's are left out). Anything in `dest` is refused unless `force`.
Result<std::map<std::string, std::string>> files_init_replaces(
    const fs::path& dest, const std::map<std::string, std::string>& incoming, bool force) {
  std::error_code ec;
  std::map<std::string, std::string> replaced;
  if (!fs::exists(dest, ec)) return replaced;
  if (!fs::is_directory(dest, ec))
    return make_error(
        fmt::format("{} is not a folder; choose a new or empty folder for the workspace",
                    dest.string()),
        ErrorKind::input);
  std::vector<std::string> entries;
  for (const auto& de : fs::directory_iterator(dest, ec)) entries.push_back(de.path().filename());
  if (ec)
    return make_error(fmt::format("cannot read {}: {}", dest.string(), ec.message()),
                      ErrorKind::environment);
  std::sort(entries.begin(), entries.end());
  if (entries.empty()) return replaced;
  for (const auto& [name, content] : incoming) {
    if (!fs::exists(dest / name, ec)) continue;
    auto text = read_file(dest / name);
    if (!text)
      return make_error(fmt::format("{}; peak init would replace it", text.error()),
                        ErrorKind::input);
    if (*text != content) replaced[name] = *text;
  }
  if (force) return replaced;
  if (entries.size() > 5) {
    entries.resize(5);
    entries.push_back("...");
  }
  std::string what = replaced.empty()
                         ? ""
                         : fmt::format(", and peak init would replace {} with the context's",
                                       join(keys_of(replaced), " and "));
  return make_error(
      fmt::format("{} is not empty (it holds {}{}). Choose a new or empty folder, or run again "
                  "with --force: files of the same names as the context's are then replaced, "
                  "and the ones that differ are kept as a stash (`peak status`, `peak stash "
                  "list`; `peak stash pop` brings them back)",
                  dest.string(), join(entries, ", "), what),
      ErrorKind::input);
}

}  // namespace

Result<std::unique_ptr<Workspace>> Workspace::init(const fs::path& context_dir,
                                                   const fs::path& dest, bool force) {
  auto ctx = load_context(context_dir);
  if (!ctx) return make_error(ctx.error(), ErrorKind::input);
  auto source = read_file(ctx->dir / ctx->source_file);
  if (!source) return make_error(source.error(), ErrorKind::input);
  auto regions = split_regions(*source, ctx->source_file);
  if (!regions) return make_error(regions.error(), ErrorKind::input);
  if (auto s = check_context_names(*ctx, (ctx->dir / "kernel.toml").string()); !s) return s;
  std::error_code ec;
  if (fs::exists(dest / ".peak", ec))
    return make_error(fmt::format("{} already holds a peak workspace; open it with `cd {}` or "
                                  "choose another folder",
                                  dest.string(), dest.string()),
                      ErrorKind::input);
  auto replaced = files_init_replaces(
      dest, {{"kernel.toml", to_toml(*ctx)}, {ctx->source_file, *source}}, force);
  if (!replaced) return replaced.status();
  fs::create_directories(dest, ec);
  if (ec)
    return make_error(fmt::format("cannot create {}: {}", dest.string(), ec.message()),
                      ErrorKind::environment);
  auto store = Store::open(dest / ".peak", true);
  if (!store) return store.status();
  std::unique_ptr<Workspace> ws(new Workspace());
  ws->root_ = fs::absolute(dest).lexically_normal();
  if (ws->root_.filename().empty()) ws->root_ = ws->root_.parent_path();
  ws->store_ = std::move(*store);
  ws->open_.command = "peak init";
  {
    std::lock_guard lock(registry_mutex());
    registry().insert(ws.get());
  }
  if (auto s = ws->lock(); !s) return s;
  ws->progress_.mirror_to(ws->root_ / ".peak" / "status.json");
  ctx->dir = ws->root_;
  if (auto s = ws->write_working_files(*ctx, *source); !s) return s;
  auto id = ws->make_checkpoint(std::nullopt, "", "seed", *ctx, *source, json::object());
  if (!id) return id.status();
  RefUpdate u;
  u.head = "main";
  u.branches = {{"main", *id}};
  if (auto s = ws->store_->update_refs(u); !s) return s;
  if (auto s = ws->store_->tag("seed", *id); !s) return s;
  if (!replaced->empty()) {
    // The user's files that the context's replaced: a stash on the seed (`peak status` lists it).
    StashRecord r;
    r.base_checkpoint = *id;
    r.branch = "main";
    r.message = fmt::format("{} as {} before peak init", join(keys_of(*replaced), " and "),
                            replaced->size() > 1 ? "they were" : "it was");
    for (const auto& [path, text] : *replaced) {
      auto blob = ws->store_->put_blob(text);
      if (!blob) return blob.status();
      r.files[path] = *blob;
    }
    auto stash = ws->store_->add_stash(r);
    if (!stash) return stash.status();
    ws->init_stash_ = *stash;
  }
  return ws;
}

Result<std::unique_ptr<Workspace>> Workspace::open(const fs::path& dir, const OpenOptions& opts) {
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  for (;;) {
    auto found = find_store(p / ".peak");
    if (!found) return found.status();
    if (*found) break;
    if (!p.has_parent_path() || p.parent_path() == p)
      return make_error(fmt::format("{} is not inside a peak workspace; create one with `peak "
                                    "init EXAMPLE [DIR]` (examples: {})",
                                    dir.string(), data_path("examples").string()),
                        ErrorKind::input);
    p = p.parent_path();
  }
  auto store = Store::open(p / ".peak", false);
  if (!store) return store.status();
  std::unique_ptr<Workspace> ws(new Workspace());
  ws->root_ = p;
  ws->store_ = std::move(*store);
  ws->open_ = opts;
  {
    std::lock_guard lock(registry_mutex());
    registry().insert(ws.get());
  }
  // A checkout that a killed process left half done is completed (or its temporaries removed)
  // now, when nobody else holds the workspace: readers see consistent files and HEAD.
  if (!ws->store_->read_only()) {
    bool leftover = false;
    if (auto pending = ws->store_->meta("switch.pending"); pending && *pending) leftover = true;
    for (const auto& de : fs::directory_iterator(p, ec))
      if (starts_with(de.path().filename().string(), ".peak-new.")) leftover = true;
    if (leftover && !WorkspaceLock::holder(lock_path(p)) && ws->lock()) ws->lock_.reset();
  }
  ws->progress_.mirror_to(p / ".peak" / "status.json");
  return ws;
}

Workspace::~Workspace() {
  std::lock_guard lock(registry_mutex());
  registry().erase(this);
}

void Workspace::register_workflow(int64_t id, bool active) {
  std::lock_guard lock(registry_mutex());
  if (active)
    active_workflows_.insert(id);
  else
    active_workflows_.erase(id);
}

void interrupt_workspaces() {
  std::lock_guard lock(registry_mutex());
  for (Workspace* ws : registry())
    for (int64_t id : ws->active_workflows_) {
      auto w = ws->store_->workflow(id);
      if (w && (w->status == "running" || w->status == "waiting"))
        (void)ws->store_->update_workflow(id, "interrupted", w->state_json);
    }
}

Status Workspace::lock() {
  if (lock_) return Status::ok();
  if (store_->read_only())
    return Status::error(fmt::format("the workspace {} is read-only: this command changes it and "
                                     "needs write access to {}",
                                     root_.string(), (root_ / ".peak").string()),
                         ErrorKind::environment);
  auto l = WorkspaceLock::acquire(lock_path(root_), open_.command.empty() ? "peak" : open_.command,
                                  open_.wait, [&](const std::string& m) { progress_.print(m); });
  if (!l) return l.status();
  lock_ = std::move(*l);
  if (auto s = recover_switch(); !s) return s;
  // Nobody else holds the lock: a workflow still marked running lost its process.
  auto ws = store_->workflows();
  if (ws)
    for (const auto& w : *ws)
      if (w.status == "running" && !active_workflows_.count(w.id))
        (void)store_->update_workflow(w.id, "interrupted", w.state_json);
  return Status::ok();
}

Status Workspace::write_working_files(const KernelContext& ctx, const std::string& source) {
  if (auto s = write_file_atomic(root_ / "kernel.toml", to_toml(ctx)); !s)
    return Status::error(s.message(), ErrorKind::environment);
  if (auto s = write_file_atomic(root_ / ctx.source_file, source); !s)
    return Status::error(s.message(), ErrorKind::environment);
  return Status::ok();
}

Result<int64_t> Workspace::make_checkpoint(std::optional<int64_t> parent,
                                           const std::string& transformation,
                                           const std::string& message, const KernelContext& ctx,
                                           const std::string& source, const json& summary,
                                           const std::string* context_text) {
  CheckpointRecord c;
  c.parent = parent;
  auto head = store_->head();
  c.branch = head && !starts_with(*head, "#") ? *head : "";
  c.transformation = transformation;
  c.message = message;
  auto cb = store_->put_blob(context_text ? *context_text : to_toml(ctx));
  if (!cb) return cb.status();
  auto sb = store_->put_blob(source);
  if (!sb) return sb.status();
  c.context_blob = *cb;
  c.source_blob = *sb;
  c.summary_json = summary.dump();
  c.top_configs_json = summary.contains("top") ? summary["top"].dump() : "[]";
  return store_->add_checkpoint(c);
}

Result<CheckpointRecord> Workspace::head() const {
  auto id = store_->head_checkpoint();
  if (!id) return id.status();
  if (!*id)
    return make_error(
        "HEAD points at no checkpoint; `peak log` lists them, `peak checkout N` picks one",
        ErrorKind::input);
  return store_->checkpoint(**id);
}

Result<std::pair<KernelContext, std::string>> Workspace::checkpoint_files(int64_t id) const {
  auto c = store_->checkpoint(id);
  if (!c) return c.status();
  auto toml = store_->get_blob(c->context_blob);
  if (!toml) return make_error(toml.error(), ErrorKind::environment);
  auto src = store_->get_blob(c->source_blob);
  if (!src) return make_error(src.error(), ErrorKind::environment);
  auto ctx = parse_context(*toml, fmt::format("checkpoint {}: kernel.toml", id), root_);
  if (!ctx) return make_error(ctx.error(), ErrorKind::input);
  return std::make_pair(std::move(*ctx), std::move(*src));
}

Result<int64_t> Workspace::resolve(const std::string& ref_in) const {
  std::string ref = trim(ref_in);
  if (ref.empty())
    return make_error(
        "an empty reference names nothing: give a checkpoint number, HEAD, "
        "HEAD~N, a branch or a tag (`peak log` lists them)",
        ErrorKind::input);
  if (ref == "HEAD") {
    auto h = head();
    if (!h) return h.status();
    return h->id;
  }
  if (starts_with(ref, "HEAD~")) {
    std::string digits = ref.substr(5);
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), ::isdigit) ||
        digits.size() > 9)
      return make_error(fmt::format("'{}' is not a reference: write HEAD~N with a number N", ref),
                        ErrorKind::input);
    auto h = head();
    if (!h) return h.status();
    int n = std::stoi(digits);
    CheckpointRecord c = *h;
    for (int i = 0; i < n; ++i) {
      if (!c.parent)
        return make_error(fmt::format("{} goes past the seed checkpoint", ref), ErrorKind::input);
      auto p = store_->checkpoint(*c.parent);
      if (!p) return p.status();
      c = *p;
    }
    return c.id;
  }
  std::string num = starts_with(ref, "#") ? ref.substr(1) : ref;
  if (!num.empty() && num.size() < 18 && std::all_of(num.begin(), num.end(), ::isdigit)) {
    int64_t id = std::stoll(num);
    auto c = store_->checkpoint(id);
    if (!c)
      return make_error(fmt::format("no checkpoint {}; `peak log` lists them", id),
                        ErrorKind::input);
    return id;
  }
  auto r = store_->ref(ref);
  if (r && *r) return **r;
  auto t = store_->find_tag(ref);
  if (t && *t) return **t;
  return make_error(
      fmt::format("'{}' names no checkpoint, branch or tag; `peak log` lists checkpoints and "
                  "branches",
                  ref),
      ErrorKind::input);
}

Result<std::vector<Transformation>> load_peak_library(std::vector<std::string>* problems) {
  return api::load_library_for({}, problems);
}

Result<std::vector<Transformation>> Workspace::library(std::vector<std::string>* problems) const {
  return api::load_library_for(root_, problems);
}

Result<Backend*> Workspace::backend() {
  if (backend_) return backend_.get();
  auto h = head();
  if (!h) return h.status();
  auto files = checkpoint_files(h->id);
  if (!files) return files.status();
  auto b = make_backend(files->first.backend);
  if (!b) return make_error(b.error(), ErrorKind::environment);
  backend_ = std::move(*b);
  backend_name_ = files->first.backend;
  return backend_.get();
}

Result<DeviceFacts> Workspace::device(const std::string& selector) {
  if (auto it = devices_.find(selector); it != devices_.end()) return it->second;
  auto b = backend();
  if (!b) return b.status();
  progress_.status(fmt::format("probing {} devices ...", (*b)->name()), true);
  auto d = (*b)->probe(selector, true);
  progress_.clear();
  if (!d) return make_error(d.error(), ErrorKind::environment);
  devices_[selector] = *d;
  return *d;
}

Result<DeviceSelection> Workspace::devices(const std::string& spec) {
  if (auto it = selections_.find(spec); it != selections_.end()) return it->second;
  auto sel = select_devices(spec, [this](const std::string& s) { return device(s); });
  if (!sel) return sel;
  progress_.print("devices: " + sel->text());
  selections_[spec] = *sel;
  return *sel;
}

namespace {
Status check_device_choices(const EvalChoices& c) {
  if (!c.device.empty() && !c.devices.empty())
    return Status::error(
        "--device and --devices exclude each other: --device picks one device, --devices "
        "several of one model (all, 0,1 or a name substring)",
        ErrorKind::input);
  return Status::ok();
}
}  // namespace

Result<std::string> Workspace::device_selector(const EvalChoices& choices) {
  if (Status st = check_device_choices(choices); !st) return Error{st.message(), st.kind()};
  if (choices.devices.empty() || choices.compile_only) return choices.device;
  auto sel = devices(choices.devices);
  if (!sel) return Error{sel.error(), sel.error_kind()};
  return sel->devices.front().selector;
}

Result<EvalOptions> Workspace::eval_options(const EvalChoices& choices) {
  if (Status st = check_device_choices(choices); !st) return Error{st.message(), st.kind()};
  if (!choices.devices.empty() && !choices.compile_only) {
    // The first device decides the defaults (all are of one model) and makes the final timing.
    auto sel = devices(choices.devices);
    if (!sel) return Error{sel.error(), sel.error_kind()};
    EvalChoices first = choices;
    first.device = sel->devices.front().selector;
    EvalOptions e = eval_options_for(first, sel->devices.front().facts.is_cpu);
    if (sel->devices.size() > 1)
      for (const auto& d : sel->devices) e.devices.push_back(d.selector);
    return e;
  }
  if (choices.compile_only) {
    // Nothing runs: the device need not be here (its facts may come from --prompt-device).
    if (auto it = devices_.find(choices.device); it != devices_.end())
      return eval_options_for(choices, it->second.is_cpu);
    return eval_options_for(choices, false);
  }
  auto dev = device(choices.device);
  if (!dev) return dev.status();
  return eval_options_for(choices, dev->is_cpu);
}

// ---------------------------------------------------------------------------------------------
// Evaluation

// Shared with the suite benchmark (engine/evaluate_internal.h).
namespace detail {

PeakInfo peak_for(const KernelContext& ctx, const DeviceFacts& dev) {
  PeakInfo p;
  bool half = std::any_of(ctx.arrays.begin(), ctx.arrays.end(), [](const ArraySpec& a) {
    return !a.output && (a.dtype == DType::f16 || a.dtype == DType::bf16);
  });
  if (auto doc = documented_peaks(dev.name)) {
    p.tflops = half ? doc->fp16_tflops : doc->fp32_tflops;
    p.source = fmt::format("documented {} peak of {} ({})", half ? "FP16" : "FP32", doc->device,
                           doc->source);
    // An fp32 kernel may legitimately not exceed the FP32 rate; the limit is the documented peak.
    p.limit = p.tflops;
    if (p.tflops > 0) return p;
  }
  if (dev.measured_fp32_tflops > 0) {
    p.tflops = dev.measured_fp32_tflops;
    p.source = "measured FP32 FMA throughput (no documented peak for this device)";
    // The microbenchmark may fall short of the true peak; on a CPU device (lavapipe) it is
    // measured once, and a machine busy with other work at that moment can give a fraction of
    // what the cores deliver a minute later, so the limit there is wider.
    p.limit = dev.measured_fp32_tflops * (dev.is_cpu ? 4.0 : 1.5);
  }
  return p;
}

// The device's lock (one timer per device) and its label for the waiting line.
std::shared_ptr<DeviceLock> device_lock_for(const DeviceFacts& dev) {
  auto pci = dev.extra.find("pci_bus_id");
  std::string bus = pci == dev.extra.end() ? "" : pci->second;
  std::string label = dev.is_cpu    ? fmt::format("the CPU ({})", dev.name)
                      : bus.empty() ? dev.name
                                    : fmt::format("{} ({})", dev.name, bus);
  return DeviceLock::for_device(device_lock_key(bus, dev.is_cpu, dev.name), label);
}

json lock_json(const DeviceLock& lock, const DeviceLockStats& s) {
  return {{"key", lock.key()}, {"file", lock.path().string()}, {"acquisitions", s.acquisitions},
          {"waits", s.waits},  {"waited_s", s.waited_s},       {"waited_for", s.waited_for}};
}

json measurement_json(const Measurement& m) {
  json j;
  j["shape"] = m.shape.text();
  j["config"] = config_json(m.config);
  j["disposition"] = std::string(to_string(m.disposition));
  if (!m.message.empty()) j["message"] = m.message;
  j["median_ms"] = m.stats.median;
  j["p25_ms"] = m.stats.p25;
  j["p75_ms"] = m.stats.p75;
  j["min_ms"] = m.stats.min;
  j["spread"] = m.stats.rel_spread;
  j["n"] = m.stats.n;
  j["gflops"] = m.gflops;
  j["pct_of_peak"] = m.pct_of_peak;
  j["samples_ms"] = m.samples_ms;
  j["host_ms"] = m.host_ms;
  if (!m.baseline.empty()) {
    j["baseline"] = m.baseline;
    j["baseline_median_ms"] = m.baseline_stats.median;
    j["baseline_spread"] = m.baseline_stats.rel_spread;
    j["baseline_gflops"] = m.baseline_gflops;
    j["pct_of_baseline"] = m.pct_of_baseline;
    j["baseline_samples_ms"] = m.baseline_samples_ms;
  }
  j["clock_mhz_before"] = m.clock_mhz_before;
  j["clock_mhz_after"] = m.clock_mhz_after;
  j["throttled"] = m.throttled;
  j["timed_launches_checked"] = m.timed_launches_checked;
  j["full_comparisons"] = m.full_comparisons;
  j["input_ms"] = m.input_ms;
  j["check_s"] = m.check_seconds;
  if (m.module_bytes >= 0) j["module_bytes"] = m.module_bytes;
  if (m.memory_growth_bytes >= 0) j["memory_growth_bytes"] = m.memory_growth_bytes;
  if (m.outlived) j["outlived"] = true;
  return j;
}

Result<ReferenceSource> reference_source(Workspace& ws, const KernelContext& ctx, Backend& be,
                                         const DeviceFacts& dev, const fs::path& cache) {
  ReferenceSource ref;
  ref.cache_dir = cache;
  if (ctx.reference != ReferenceKind::seed) return ref;
  // The seed kernel (root checkpoint) with its default configuration is the reference.
  auto seed_id = ws.store().find_tag("seed");
  if (!seed_id || !*seed_id) return make_error("no seed checkpoint to use as reference");
  auto seed_files = ws.checkpoint_files(**seed_id);
  if (!seed_files) return Error{seed_files.error()};
  auto seed_regions = split_regions(seed_files->second, seed_files->first.source_file);
  if (!seed_regions) return Error{seed_regions.error()};
  Config dc;
  for (const auto& p : seed_files->first.tuning) dc[p.name] = p.default_value;
  auto sb = be.build(BuildRequest{&seed_files->first, seed_files->second, dc, dev, cache});
  if (sb.disposition != Disposition::passed)
    return make_error("the seed kernel (the reference) does not build:\n" + sb.log);
  ref.seed_build = sb;
  ref.seed_config = dc;
  ref.seed_source = *seed_regions;
  return ref;
}

MeasureOptions final_timing_options(const EvalOptions& opts, const TaskBudget& budget,
                                    const PeakInfo& peak) {
  MeasureOptions mo;
  mo.policy = opts.policy;
  mo.with_baseline = opts.baseline;
  mo.task_timeout_s = budget.timeout_s;
  mo.reference_task_s = budget.reference_s;
  mo.timeout_basis = budget.basis;
  mo.peak_tflops = peak.limit;
  return mo;
}

// The shapes a run would validate and time (bench or small shapes first: the first is the
// tuning shape), each once: what a compile-only evaluation checks the launch plans for.
std::vector<Shape> compile_only_shapes(const KernelContext& ctx, const EvalOptions& opts) {
  std::vector<Shape> out;
  const std::vector<Shape>& bench = !opts.shapes.empty()                      ? opts.shapes
                                    : opts.small && !ctx.small_shapes.empty() ? ctx.small_shapes
                                                                              : ctx.bench_shapes;
  for (const auto* list : {&bench, &ctx.validation_shapes, &ctx.hidden_shapes})
    for (const Shape& s : *list)
      if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  return out;
}

// What a compile-only evaluation cannot check without the device (docs/cli.md).
std::vector<std::string> checks_without_device(const Backend& be) {
  std::vector<std::string> out = {
      "correctness (outputs against the reference on the listed, hidden and sampled shapes)",
      "timing", "allocation of the arrays and scratch buffers on the device"};
  if (be.name() == "hlsl") {
    out.push_back("pipeline creation by the Vulkan driver");
  } else {
    out.push_back("module load and the driver's launch checks");
    out.push_back(
        "the kernel parameters of extern \"C\" kernels (the others are checked from their "
        "mangled names)");
    if (be.name() == "cuda") out.push_back("tensor map encoding (cuTensorMapEncodeTiled)");
  }
  return out;
}

}  // namespace detail
using detail::checks_without_device;
using detail::compile_only_shapes;
using detail::device_lock_for;
using detail::final_timing_options;
using detail::lock_json;
using detail::measurement_json;
using detail::peak_for;
using detail::PeakInfo;
using detail::reference_source;

Evaluation Workspace::evaluate(const KernelContext& ctx, const std::string& source,
                               const EvalOptions& opts, std::optional<int64_t> attempt_id,
                               std::optional<int64_t> checkpoint_id) {
  Evaluation ev;
  auto fail = [&](Disposition d, std::string msg) {
    ev.disposition = d;
    ev.message = std::move(msg);
    ev.summary["disposition"] = std::string(to_string(d));
    ev.summary["message"] = ev.message;
    return ev;
  };
  ev.summary["format"] = kSummaryFormatVersion;
  ev.summary["peak_version"] = PEAK_VERSION;
  auto regions = split_regions(source, ctx.source_file);
  if (!regions) return fail(Disposition::region_violation, regions.error());
  auto b = backend();
  if (!b) return fail(Disposition::not_run, b.error());
  Backend& be = **b;
  auto dev = device(opts.device);
  if (!dev) return fail(Disposition::not_run, dev.error());
  PeakInfo peak = peak_for(ctx, *dev);
  ev.summary["device"] = {{"name", dev->name},
                          {"backend", be.name()},
                          {"driver", dev->driver},
                          {"api", dev->api_version},
                          {"arch", dev->arch},
                          {"is_cpu", dev->is_cpu},
                          {"measured_fp32_tflops", dev->measured_fp32_tflops}};
  ev.summary["peak"] = {{"tflops", peak.tflops}, {"source", peak.source}};
  if (auto doc = documented_peaks(dev->name))
    ev.summary["peak"]["documented_fp32_tflops"] = doc->fp32_tflops;
  json tc = json::object();
  for (const auto& [k, v] : be.toolchain()) tc[k] = v;
  ev.summary["toolchain"] = tc;
  ev.summary["sandbox"] = sandbox_status();

  fs::path cache = root_ / ".peak" / "cache";
  // The tuning search: its options, a status line, and the store recorder.
  TuneOptions to;
  to.strategy = opts.strategy.empty() ? std::string(kDefaultStrategy) : opts.strategy;
  to.budget = Budget{opts.budget, opts.budget_fraction, opts.budget_seconds};
  to.start = opts.must_include;
  to.overrides = opts.tuning_overrides;
  to.top_k = opts.top_k;
  to.jobs = opts.jobs;
  to.cache_dir = cache;
  // Several devices of one host (--devices): the search spreads over them; `dev`, the first,
  // makes the final timing. Nothing runs with --compile-only: it compiles for the first.
  const std::vector<std::string> lane_selectors = opts.devices.size() > 1 && !opts.compile_only
                                                      ? opts.devices
                                                      : std::vector<std::string>{opts.device};
  const bool several = lane_selectors.size() > 1;
  StatusObserver status([&](const std::string& line) { progress_.status(line); },
                        lane_selectors.size());
  RecordTarget target;
  target.attempt_id = attempt_id;
  target.checkpoint_id = checkpoint_id;
  target.source_hash = sha256_hex(source);
  target.kernel = ctx.name;
  target.device = *dev;
  target.jobs = opts.jobs > 0 ? opts.jobs
                              : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (const auto& [k, v] : be.toolchain())
    if (k != "runner")  // a path on this machine
      target.toolchain += (target.toolchain.empty() ? "" : ", ") + k + " " + v;
  target.options = {{"budget", to.budget.text()}, {"seed", to.seed}, {"batch", to.batch}};
  // A class's search (`peak tune --classes`) is no search of the checkpoint's bench shapes: it
  // tunes on its class's shapes, ranked by their summed times; `peak export-space` without --run
  // passes over its run (tune/record.h, latest_tuning_run) and its measurement rows are tagged.
  const bool per_class = !opts.shapes.empty();
  if (per_class) target.options["per_class"] = true;
  if (opts.compile_only) {
    // Every configuration the strategy picks is compiled (in parallel), nothing is run; the
    // launch plans of the shapes a run would use are checked against each build and the device
    // facts as a run checks them before it runs anything.
    to.compile_only = true;
    to.cancelled = opts.cancelled;
    to.plan_shapes = compile_only_shapes(ctx, opts);
    if (!to.plan_shapes.empty()) to.tune_shapes = {to.plan_shapes.front()};
    Validator unused(be, *dev, RunnerOptions{}, ReferenceSource{});
    StoreRecorder recorder(*store_, target);
    auto tr = tune(be, *dev, RunnerOptions{}, unused, ctx, *regions, to, {&status, &recorder});
    progress_.clear();
    if (opts.cancelled && opts.cancelled()) return fail(Disposition::not_run, kCancelledMessage);
    if (tr.disposition != Disposition::passed) return fail(tr.disposition, tr.message);
    const std::vector<std::string> unchecked = checks_without_device(be);
    ev.disposition = Disposition::passed;
    ev.message = fmt::format(
        "{}; launch plans checked on {} shapes; not checked without a device: "
        "{}",
        tr.message, to.plan_shapes.size(), join(unchecked, "; "));
    ev.summary["disposition"] = "passed";
    ev.summary["compile_only"] = true;
    ev.summary["compile_only_unchecked"] = unchecked;
    ev.summary["message"] = ev.message;
    return ev;
  }
  // One runner, lock and validator per device. The lock of each device used is held while its
  // runners run (one timer per device, docs/sandbox.md).
  std::vector<DeviceFacts> lane_facts;
  std::vector<json> lane_json;  // the device as each measurement records it
  for (const auto& sel : lane_selectors) {
    auto f = sel == opts.device ? dev : device(sel);
    if (!f) return fail(Disposition::not_run, f.error());
    if (f->name != dev->name)
      return fail(Disposition::not_run,
                  fmt::format("devices {} ({}) and {} ({}) are of different models: their times "
                              "do not rank against each other; pick devices of one model",
                              lane_selectors.front(), dev->name, sel, f->name));
    lane_facts.push_back(*f);
    json dj = ev.summary["device"];
    if (several) {
      dj["selector"] = sel;
      if (auto pci = f->extra.find("pci_bus_id"); pci != f->extra.end())
        dj["pci_bus_id"] = pci->second;
    }
    lane_json.push_back(dj);
  }
  std::vector<RunnerOptions> lane_runners(lane_selectors.size());
  struct NoticeScope {  // the lock outlives this workspace: it must not call back into it
    std::vector<std::shared_ptr<DeviceLock>> locks;
    ~NoticeScope() {
      for (auto& l : locks) l->set_wait_notice({});
    }
  } notice_scope;
  std::vector<DeviceLockStats> locks_before;
  auto runners_started = std::make_shared<std::atomic<int>>(0);
  for (size_t i = 0; i < lane_selectors.size(); ++i) {
    RunnerOptions& r = lane_runners[i];
    r.executable = be.runner();
    r.runners_started = runners_started;
    r.task_timeout_s = opts.task_timeout_s;
    r.device = several ? runner_selector(lane_facts[i], lane_selectors[i]) : opts.device;
    r.device_lock = device_lock_for(lane_facts[i]);
    r.device_lock->set_wait_notice([this](const std::string& m) { progress_.status(m, true); });
    notice_scope.locks.push_back(r.device_lock);
    locks_before.push_back(r.device_lock->stats());
  }
  const RunnerOptions& ro = lane_runners.front();
  auto record_lock = [&] {
    ev.summary["runner_starts"] = runners_started->load();
    ev.summary["device_lock"] =
        lock_json(*ro.device_lock, ro.device_lock->stats().since(locks_before.front()));
    if (!several) return;
    json all = json::array();
    for (size_t i = 0; i < lane_runners.size(); ++i) {
      json l = lock_json(*lane_runners[i].device_lock,
                         lane_runners[i].device_lock->stats().since(locks_before[i]));
      l["selector"] = lane_selectors[i];
      all.push_back(l);
    }
    ev.summary["device_locks"] = all;
  };
  auto ref_or = reference_source(*this, ctx, be, *dev, cache);
  if (!ref_or) return fail(Disposition::not_run, ref_or.error());
  const ReferenceSource ref = std::move(*ref_or);
  std::vector<std::unique_ptr<Validator>> validators;
  std::vector<DeviceLane> lanes;
  for (size_t i = 0; i < lane_selectors.size(); ++i) {
    validators.push_back(std::make_unique<Validator>(be, lane_facts[i], lane_runners[i], ref));
    lanes.push_back(DeviceLane{&lane_facts[i], &lane_runners[i], validators.back().get()});
  }
  Validator& validator = *validators.front();
  if (several) {
    json all = json::array();
    for (const auto& dj : lane_json) all.push_back(dj);
    ev.summary["devices"] = all;
  }

  // Deadlines from what the reference kernels took per task on this device (the seed, the parent
  // and this kernel's own last evaluation), so that a slow machine is not taken for a hung kernel.
  std::vector<std::pair<std::string, TaskSeconds>> refs;
  auto add_ref = [&](std::optional<int64_t> id, const std::string& who) {
    if (!id) return;
    auto c = store_->checkpoint(*id);
    if (!c) return;
    json s = summary(*c);
    if (s.contains("task_seconds"))
      refs.emplace_back(fmt::format("{} (checkpoint {})", who, *id),
                        TaskSeconds::from_json(s["task_seconds"]));
  };
  if (auto seed = store_->find_tag("seed"); seed && *seed) add_ref(**seed, "seed");
  if (checkpoint_id) {
    add_ref(checkpoint_id, "last evaluation");
    if (auto c = store_->checkpoint(*checkpoint_id); c && c->parent) add_ref(c->parent, "parent");
  } else if (auto h = head()) {
    add_ref(h->id, "parent");  // a candidate (apply, commit) is evaluated on top of HEAD
  }
  const TaskBudget validate_budget =
      task_budget(TaskKind::validate, dev->is_cpu, refs, opts.task_timeout_s);
  const TaskBudget screen_budget =
      task_budget(TaskKind::screen, dev->is_cpu, refs, opts.task_timeout_s * 2,
                  timing_allowance(opts.screening, false));
  const TaskBudget bench_budget =
      task_budget(TaskKind::bench, dev->is_cpu, refs, opts.task_timeout_s * 4,
                  timing_allowance(opts.policy, opts.baseline));
  ev.summary["task_timeouts"] = {{"validate", validate_budget.to_json()},
                                 {"screen", screen_budget.to_json()},
                                 {"bench", bench_budget.to_json()}};
  TaskSeconds measured;

  std::vector<Shape> bench = per_class                                 ? opts.shapes
                             : opts.small && !ctx.small_shapes.empty() ? ctx.small_shapes
                                                                       : ctx.bench_shapes;
  if (bench.empty()) return fail(Disposition::not_run, "kernel.toml lists no bench shapes");
  // The bench shapes rank by the first; a class's shapes rank by their summed times.
  to.tune_shapes = per_class ? bench : std::vector<Shape>{bench.front()};
  to.validation.seeds = opts.seeds;
  // The hidden shapes of this evaluation: from a seed no candidate can know, recorded so that
  // `--validation-seed` draws them again.
  to.validation.shape_seed =
      opts.validation_seed != 0 ? opts.validation_seed : random_validation_seed();
  ev.summary["validation_seed"] = to.validation.shape_seed;
  to.validation.sanitize = opts.sanitize;
  to.validation.task_timeout_s = validate_budget.timeout_s;
  to.validation.reference_task_s = validate_budget.reference_s;
  to.validation.timeout_basis = validate_budget.basis;
  to.screening.policy = opts.screening;
  to.screening.task_timeout_s = screen_budget.timeout_s;
  to.screening.reference_task_s = screen_budget.reference_s;
  to.screening.timeout_basis = screen_budget.basis;
  to.screening.peak_tflops = peak.limit;
  // A class's search ranks by the sum over its shapes: its runs name them all, so that
  // --reuse-measurements never mixes its scores with a search of the first shape alone.
  target.shape = bench.front().text();
  for (size_t i = 1; i < to.tune_shapes.size(); ++i)
    target.shape += "; " + to.tune_shapes[i].text();
  target.work = work_of(ctx, bench.front());
  TuningCache known;
  if (opts.reuse_measurements) {
    auto k = recorded_outcomes(*store_, target.source_hash, target.shape, dev->name);
    if (!k) return fail(Disposition::not_run, k.error());
    known = std::move(*k);
    to.reuse = &known;
  }
  // Reports keep a class's measurement rows apart from the checkpoint's own numbers.
  const std::string what_prefix = per_class ? kClassMeasurementPrefix : "";
  // Every configuration timed on the tuning shape is recorded at once (what = "screening"), so
  // reports see the distribution of the search, and `peak serve` its progress.
  to.on_timed = [&](const ConfigOutcome& o) {  // on the thread of the device that timed it
    for (const auto& m : o.measurements) {
      MeasurementRecord mr;
      mr.attempt_id = attempt_id;
      mr.checkpoint_id = checkpoint_id;
      mr.config_json = config_json(o.config).dump();
      mr.shape = m.shape.text();
      mr.what = what_prefix + "screening";
      mr.samples_json = json(m.samples_ms).dump();
      mr.median_ms = m.stats.median;
      mr.spread = m.stats.rel_spread;
      mr.gflops = m.gflops;
      mr.disposition = std::string(to_string(m.disposition));
      json dj = lane_json.at(o.device);
      dj["clock_mhz_before"] = m.clock_mhz_before;
      dj["clock_mhz_after"] = m.clock_mhz_after;
      mr.device_json = dj.dump();
      (void)store_->add_measurement(mr);
    }
  };
  to.cancelled = opts.cancelled;
  StoreRecorder recorder(*store_, target);
  auto tr = tune(be, lanes, ctx, *regions, to, {&status, &recorder});
  progress_.clear();
  record_lock();
  for (const auto& o : tr.outcomes) {
    for (const auto& c : o.validation.checks)
      if (c.disposition == Disposition::passed)
        measured.validate = std::max(measured.validate, c.seconds);
    for (const auto& m : o.measurements)
      if (m.disposition == Disposition::passed)
        measured.screen = std::max(measured.screen, m.seconds);
  }
  ev.summary["task_seconds"] = measured.to_json();
  if (opts.cancelled && opts.cancelled()) return fail(Disposition::not_run, kCancelledMessage);
  // Record every build and validation.
  for (const auto& o : tr.outcomes) {
    BuildRecord br;
    br.attempt_id = attempt_id;
    br.source_hash = sha256_hex(source);
    br.config_json = config_json(o.config).dump();
    br.command = o.build.command;
    br.exit_code = o.build.disposition == Disposition::passed ? 0 : 1;
    if (!o.build.log.empty()) {
      auto lb = store_->put_blob(o.build.log);
      if (lb) br.log_blob = *lb;
    }
    br.seconds = o.build.seconds;
    br.disposition = std::string(to_string(o.build.disposition));
    br.resources_json = o.build.resources.dump();
    br.toolchain = o.build.toolchain;
    br.cached = o.build.cached;
    (void)store_->add_build(br);
    for (const auto& c : o.validation.checks) {
      ValidationRecord vr;
      vr.attempt_id = attempt_id;
      vr.checkpoint_id = checkpoint_id;
      vr.config_json = br.config_json;
      vr.shape = c.shape.text();
      vr.hidden = c.hidden;
      vr.seed = static_cast<int64_t>(c.seed);
      vr.max_abs_err = std::isfinite(c.max_abs_err) ? c.max_abs_err : -1;
      vr.max_rel_err = c.max_rel_err;
      vr.disposition = std::string(to_string(c.disposition));
      vr.message = c.message;
      (void)store_->add_validation(vr);
    }
  }
  std::map<std::string, int> counts;
  for (const auto& o : tr.outcomes) counts[std::string(to_string(o.disposition))]++;
  size_t pruned = tr.space.invalid;
  for (const auto& o : tr.outcomes) pruned += o.pruned();
  ev.summary["configs"] = {{"space", tr.space.total},
                           {"rejected_by_constraint", tr.space.invalid},
                           {"evaluated", tr.outcomes.size()},
                           {"sampled", tr.space.sampled},
                           {"pruned", pruned},
                           {"strategy", tr.strategy},
                           {"budget", to.budget.text()},
                           {"stop", tr.stop},
                           {"reused", tr.reused},
                           {"dispositions", counts}};
  if (recorder.run_id()) ev.summary["configs"]["tuning_run"] = *recorder.run_id();
  ev.summary["phases"] = {{"compile_s", tr.compile_seconds},
                          {"validate_s", tr.validate_seconds},
                          {"tune_s", tr.time_seconds}};
  if (tr.disposition != Disposition::passed) {
    std::string msg = tr.message;
    return fail(tr.disposition, msg.empty() ? std::string(describe(tr.disposition)) : msg);
  }
  json top = json::array();
  for (size_t i : tr.ranking)
    top.push_back(
        {{"config", config_json(tr.outcomes[i].config)}, {"score_ms", tr.outcomes[i].score_ms}});
  ev.summary["top"] = top;
  const ConfigOutcome& best = tr.outcomes[tr.ranking.front()];
  ev.summary["best"] = {{"config", config_json(best.config)},
                        {"config_text", config_text(best.config)},
                        {"resources", best.build.resources},
                        {"validation", best.validation.message}};
  for (const auto& o : tr.outcomes)
    if (!o.validation.sanitizer.empty())
      ev.summary["sanitizer"] = {{"config", config_text(o.config)},
                                 {"report", o.validation.sanitizer}};
  // Final timing of the best configuration on every bench shape, against the baseline.
  auto t0 = std::chrono::steady_clock::now();
  const MeasureOptions mo = final_timing_options(opts, bench_budget, peak);
  progress_.status(
      fmt::format("  timing {} on {} shape(s){}", config_text(best.config), bench.size(),
                  several ? fmt::format(" on device {} (the first of {})", lane_selectors.front(),
                                        lane_selectors.size())
                          : ""),
      true);
  // A configuration whose outcome was reused (--reuse-measurements) was not built by this
  // process, and its build may be gone (a workspace packed without .peak/cache and unpacked
  // elsewhere): build it again; the compiler cache makes this free when the build is still there.
  BuildResult best_build = best.build;
  if (std::error_code ec; best_build.artifact.empty() || !fs::exists(best_build.artifact, ec)) {
    best_build = be.build(BuildRequest{&ctx, source, best.config, *dev, cache});
    if (best_build.disposition != Disposition::passed)
      return fail(best_build.disposition,
                  fmt::format("the best configuration ({}) does not build again:\n{}",
                              config_text(best.config), best_build.log));
  }
  auto ms = measure(be, *dev, ro, validator, ctx, *regions, best_build, best.config, bench, mo);
  progress_.clear();
  record_lock();
  for (const auto& m : ms)
    if (m.disposition == Disposition::passed) measured.bench = std::max(measured.bench, m.seconds);
  ev.summary["task_seconds"] = measured.to_json();
  ev.summary["phases"]["bench_s"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  json mj = json::array();
  const json& device_json = lane_json.front();  // the final timing's device
  for (auto& m : ms) {
    if (peak.tflops > 0) m.pct_of_peak = 100.0 * m.gflops / (peak.tflops * 1e3);
    mj.push_back(measurement_json(m));
    MeasurementRecord mr;
    mr.attempt_id = attempt_id;
    mr.checkpoint_id = checkpoint_id;
    mr.config_json = config_json(m.config).dump();
    mr.shape = m.shape.text();
    mr.what = what_prefix + "candidate";
    mr.samples_json = json(m.samples_ms).dump();
    mr.median_ms = m.stats.median;
    mr.spread = m.stats.rel_spread;
    mr.gflops = m.gflops;
    mr.disposition = std::string(to_string(m.disposition));
    json dj = device_json;
    dj["clock_mhz_before"] = m.clock_mhz_before;
    dj["clock_mhz_after"] = m.clock_mhz_after;
    mr.device_json = dj.dump();
    (void)store_->add_measurement(mr);
    if (!m.baseline_samples_ms.empty()) {
      mr.what = what_prefix + "baseline:" + m.baseline;
      mr.samples_json = json(m.baseline_samples_ms).dump();
      mr.median_ms = m.baseline_stats.median;
      mr.spread = m.baseline_stats.rel_spread;
      mr.gflops = m.baseline_gflops;
      (void)store_->add_measurement(mr);
    }
  }
  ev.summary["bench"] = mj;
  ev.disposition = Disposition::passed;
  for (const auto& m : ms)
    if (m.disposition != Disposition::passed) {
      return fail(m.disposition, fmt::format("timing at {}: {}", m.shape.text(), m.message));
    }
  ev.summary["disposition"] = "passed";
  ev.message = fmt::format(
      "best {}: {}", config_text(best.config),
      ms.empty() ? ""
                 : fmt::format("{:.1f} GFLOP/s at {}", ms.front().gflops, ms.front().shape.text()));
  ev.summary["message"] = ev.message;
  return ev;
}

}  // namespace peak
