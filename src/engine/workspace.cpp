#include "engine/workspace.h"

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
#include "engine/library.h"
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
  c.top_configs_json = top_json(summary_or_empty(summary)).dump();
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

Result<std::vector<Transformation>> Workspace::library(std::vector<std::string>* problems) const {
  return load_library_for(root_, problems);
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

// Thread-safe once the backend exists (devices() makes it first): the cache is locked, and the
// backend's probe and the progress line are thread-safe.
Result<DeviceFacts> Workspace::device(const std::string& selector) {
  {
    std::lock_guard<std::mutex> lock(devices_mu_);
    if (auto it = devices_.find(selector); it != devices_.end()) return it->second;
  }
  auto b = backend();
  if (!b) return b.status();
  progress_.status(fmt::format("probing {} devices ...", (*b)->name()), true);
  auto d = (*b)->probe(selector, true);
  progress_.clear();
  if (!d) return make_error(d.error(), ErrorKind::environment);
  std::lock_guard<std::mutex> lock(devices_mu_);
  devices_[selector] = *d;
  return *d;
}

Result<DeviceSelection> Workspace::devices(const std::string& spec) {
  if (auto it = selections_.find(spec); it != selections_.end()) return it->second;
  // select_devices probes a list of indices at once, through device().
  if (auto b = backend(); !b) return b.status();
  auto sel = select_devices(spec, [this](const std::string& s) { return device(s); });
  if (!sel) return sel;
  progress_.print("devices: " + sel->text());
  selections_[spec] = *sel;
  return *sel;
}

}  // namespace peak
