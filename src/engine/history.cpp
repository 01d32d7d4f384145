// The history commands: the working files against HEAD, checkout, branches, tags, diffs and
// stashes (docs/cli.md, docs/store.md "Checkout").
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "engine/workspace.h"
#include "util/diff.h"
#include "util/fault.h"
#include "util/fs.h"

namespace peak {

namespace {

// The journal of a switch_files in progress (a setting of the store).
constexpr const char* kSwitchJournal = "switch.pending";
// Temporaries of a switch: ".peak-new.<file>" beside the file they replace.
constexpr const char* kTempPrefix = ".peak-new.";

fs::path temp_for(const fs::path& root, const std::string& rel) {
  fs::path p = root / rel;
  return p.parent_path() / (kTempPrefix + p.filename().string());
}

Status environment(std::string message) {
  return Status::error(std::move(message), ErrorKind::environment);
}

// Writes `content` to `path` and flushes it to disk.
Status write_synced(const fs::path& path, const std::string& content) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    int e = errno;
    return environment(
        fmt::format("cannot write {}: {}; make the folder writable (chmod u+w {}) "
                    "and run the command again",
                    path.string(), std::strerror(e), path.parent_path().string()));
  }
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      return environment(fmt::format("cannot write {}: {}", path.string(), std::strerror(e)));
    }
    off += static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  return Status::ok();
}

void sync_folder(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

// A valid name for a new branch or tag: not empty, not HEAD or HEAD~N, not a checkpoint
// number, no white space or '~', not starting with '#' or '-'.
Status check_ref_name(const std::string& kind, const std::string& name) {
  auto bad = [&](const std::string& why) {
    return Status::error(fmt::format("'{}' cannot name a {}: {}", name, kind, why),
                         ErrorKind::input);
  };
  if (name.empty())
    return Status::error(fmt::format("a {} name cannot be empty", kind), ErrorKind::input);
  if (name == "HEAD" || starts_with(name, "HEAD~")) return bad("HEAD names the current checkpoint");
  if (std::all_of(name.begin(), name.end(), ::isdigit)) return bad("numbers name checkpoints");
  if (name[0] == '#') return bad("'#N' names checkpoint N");
  if (name[0] == '-') return bad("it would read as an option");
  for (unsigned char c : name)
    if (c <= ' ' || c == 0x7f || c == '~' || c == ':')
      return bad("use letters, digits, '-', '_', '.' or '/' (no spaces, '~' or ':')");
  return Status::ok();
}

std::string describe_head(const std::string& head, std::optional<int64_t> id) {
  if (starts_with(head, "#")) return fmt::format("checkpoint {} (detached HEAD)", head.substr(1));
  return id ? fmt::format("branch {} (checkpoint {})", head, *id) : "branch " + head;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The working files

Result<std::map<std::string, std::string>> Workspace::files_of(int64_t id) const {
  auto c = store_->checkpoint(id);
  if (!c) return c.status();
  auto toml = store_->get_blob(c->context_blob);
  if (!toml) return make_error(toml.error(), ErrorKind::environment);
  auto files = checkpoint_files(id);
  if (!files) return files.status();
  return std::map<std::string, std::string>{{"kernel.toml", *toml},
                                            {files->first.source_file, files->second}};
}

Result<WorkingState> Workspace::working_state() const {
  WorkingState w;
  auto h = head();
  if (!h) return h.status();
  auto target = files_of(h->id);
  if (!target) return target.status();
  std::string source_name;
  for (const auto& [path, text] : *target)
    if (path != "kernel.toml") source_name = path;
  // The working kernel.toml may name another source file: that file belongs to the edit too.
  std::vector<std::string> paths = {"kernel.toml", source_name};
  if (auto toml = read_file(root_ / "kernel.toml")) {
    auto ctx = parse_context(*toml, "kernel.toml", root_);
    if (ctx && ctx->source_file != source_name) paths.push_back(ctx->source_file);
  }
  std::error_code ec;
  for (const auto& path : paths) {
    bool exists = fs::exists(root_ / path, ec);
    auto text = exists ? read_file(root_ / path) : Result<std::string>(Error{""});
    auto it = target->find(path);
    if (it == target->end()) {  // a file HEAD does not have
      if (text) {
        w.files[path] = *text;
        w.changes.push_back(fmt::format("{} (a new source file named by kernel.toml)", path));
        w.diff += unified_diff("", *text, "/dev/null", path);
      }
      continue;
    }
    if (!text) {
      w.changes.push_back(fmt::format("{} is missing", path));
      w.diff += unified_diff(it->second, "", "HEAD/" + path, "/dev/null");
      continue;
    }
    w.files[path] = *text;
    if (*text == it->second) continue;
    w.diff += unified_diff(it->second, *text, "HEAD/" + path, path);
    if (path == "kernel.toml") {
      w.changes.push_back("kernel.toml");
      continue;
    }
    auto mine = split_regions(*text, path);
    auto theirs = split_regions(it->second, path);
    if (!mine || !theirs) {
      w.changes.push_back(fmt::format("{} (its region markers are broken)", path));
      continue;
    }
    for (Region r : kAllRegions)
      if (mine->get(r) != theirs->get(r))
        w.changes.push_back(fmt::format("the {} region of {}", to_string(r), path));
    if (mine->before != theirs->before ||
        mine->between_macros_device != theirs->between_macros_device ||
        mine->between_device_host != theirs->between_device_host || mine->after != theirs->after)
      w.changes.push_back(fmt::format("the text outside the regions of {}", path));
  }
  w.clean = w.changes.empty();
  return w;
}

std::vector<WorkflowRecord> Workspace::workflows() const {
  std::vector<WorkflowRecord> out;
  auto all = store_->workflows();
  if (!all) return out;
  auto holder = WorkspaceLock::holder(root_ / ".peak" / "lock");
  for (auto w : *all) {
    if (w.status == "running" && !active_workflows_.count(w.id)) {
      ProcessIdentity owner{w.owner_pid, w.owner_host, w.owner_start};
      // Its process is gone, or nobody holds the workspace (a running workflow's process does).
      if (!holder || liveness(owner) == Liveness::dead) w.status = "interrupted";
    }
    out.push_back(std::move(w));
  }
  return out;
}

WorkspaceStatus Workspace::status() const {
  WorkspaceStatus st;
  st.head = store_->head() ? *store_->head() : "";
  if (auto id = store_->head_checkpoint(); id && *id) st.checkpoint = **id;
  if (auto w = working_state()) st.working = *w;
  // The newest workflow of each command (the same sequence, or the same transformation on the
  // same checkpoint) tells where that command stands; older ones were superseded.
  std::set<std::string> seen;
  auto all = workflows();
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    json args = json::parse(it->args_json.empty() ? "{}" : it->args_json, nullptr, false);
    if (!args.is_object()) args = json::object();
    std::string key = it->kind + "\n" + args.value("sequence", "") + "\n" +
                      args.value("transformation", "") + "\n" +
                      std::to_string(args.value("parent", int64_t{0}));
    if (!seen.insert(key).second) continue;
    if (it->status == "running" || it->status == "waiting" || it->status == "interrupted")
      st.workflows.insert(st.workflows.begin(), *it);
  }
  for (auto& p : list_manual(root_))
    if (!p.answered) st.prompts.push_back(std::move(p));
  if (auto s = store_->stashes()) st.stashes = *s;
  st.busy = WorkspaceLock::holder(root_ / ".peak" / "lock");
  return st;
}

// ---------------------------------------------------------------------------------------------
// Replacing the working files atomically

Status Workspace::switch_files(const std::map<std::string, std::string>& files, RefUpdate refs) {
  if (auto s = lock(); !s) return s;
  // Read-only files are refused up front: nothing is written.
  std::error_code ec;
  for (const auto& [path, text] : files) {
    fs::path p = root_ / path;
    if (fs::exists(p, ec) && ::access(p.c_str(), W_OK) != 0)
      return environment(
          fmt::format("{} is read-only; make it writable (chmod u+w {}) and run "
                      "the command again",
                      p.string(), p.string()));
  }
  // 1. Temporaries beside the files (the same file system: renames are atomic).
  std::vector<fs::path> temps;
  auto remove_temps = [&] {
    for (const auto& t : temps) fs::remove(t, ec);
  };
  for (const auto& [path, text] : files) {
    fs::path t = temp_for(root_, path);
    fs::create_directories(t.parent_path(), ec);
    temps.push_back(t);
    if (auto s = write_synced(t, text); !s) {
      remove_temps();
      return s;
    }
  }
  fault_point("switch.temps-written");
  // 2. The journal: what the switch does, so that a killed process's switch is completed.
  json journal = {{"files", json::object()}, {"branches", json::object()}};
  for (const auto& [path, text] : files) {
    auto blob = store_->put_blob(text);
    if (!blob) {
      remove_temps();
      return blob.status();
    }
    journal["files"][path] = *blob;
  }
  if (refs.head) journal["head"] = *refs.head;
  for (const auto& [name, id] : refs.branches) journal["branches"][name] = id;
  if (auto s = store_->set_meta(kSwitchJournal, journal.dump()); !s) {
    remove_temps();
    return s;
  }
  fault_point("switch.journaled");
  // 3. The renames. On a failure the files renamed so far get their old content back.
  std::map<std::string, std::optional<std::string>> before;
  size_t i = 0;
  for (const auto& [path, text] : files) {
    fs::path p = root_ / path;
    auto old = fs::exists(p, ec) ? read_file(p) : Result<std::string>(Error{""});
    fs::rename(temps[i], p, ec);
    if (ec) {
      std::string why = ec.message();
      for (const auto& [done, content] : before) {
        if (content)
          (void)write_file_atomic(root_ / done, *content);
        else
          fs::remove(root_ / done, ec);
      }
      remove_temps();
      RefUpdate undo;
      undo.meta[kSwitchJournal] = std::nullopt;
      (void)store_->update_refs(undo);
      return environment(
          fmt::format("cannot replace {}: {}; nothing was changed. Make the folder "
                      "writable (chmod u+w {}) and run the command again",
                      p.string(), why, p.parent_path().string()));
    }
    before[path] = old ? std::optional<std::string>(*old) : std::nullopt;
    ++i;
    if (i < files.size()) fault_point("switch.renamed-one");
  }
  sync_folder(root_);
  fault_point("switch.files-written");
  // 4. HEAD, branches and the journal in one transaction.
  refs.meta[kSwitchJournal] = std::nullopt;
  return store_->update_refs(refs);
}

Status Workspace::recover_switch() {
  auto pending = store_->meta(kSwitchJournal);
  if (!pending) return pending.status();
  std::error_code ec;
  if (!*pending) {
    // Temporaries of a switch killed before its journal was written: never used.
    for (const auto& de : fs::directory_iterator(root_, ec))
      if (starts_with(de.path().filename().string(), kTempPrefix)) fs::remove(de.path(), ec);
    return Status::ok();
  }
  json j = json::parse(**pending, nullptr, false);
  if (!j.is_object() || !j.contains("files"))
    return environment(
        fmt::format("the store holds an unreadable checkout journal ({}); remove "
                    "it with: sqlite3 {} \"DELETE FROM meta WHERE key = '{}'\"",
                    kSwitchJournal, (root_ / ".peak" / "peak.db").string(), kSwitchJournal));
  // Roll forward: every file gets the content the switch was writing.
  for (const auto& [path, blob] : j["files"].items()) {
    auto text = store_->get_blob(blob.get<std::string>());
    if (!text) return text.status();
    auto now = read_file(root_ / path);
    if (!now || *now != *text)
      if (auto s = write_file_atomic(root_ / path, *text); !s) return environment(s.message());
    fs::remove(temp_for(root_, path), ec);
  }
  RefUpdate u;
  if (j.contains("head")) u.head = j["head"].get<std::string>();
  for (const auto& [name, id] : j["branches"].items())
    u.branches.emplace_back(name, id.get<int64_t>());
  u.meta[kSwitchJournal] = std::nullopt;
  if (auto s = store_->update_refs(u); !s) return s;
  progress_.print("completed a checkout that an interrupted peak had begun");
  return Status::ok();
}

Status Workspace::protect_changes(const std::map<std::string, std::string>& target, bool force,
                                  const std::string& why, std::optional<int64_t>& stash) {
  auto w = working_state();
  if (!w) return w.status();
  if (w->clean) return Status::ok();
  // Nothing is lost when every working file is missing (a store copied into an empty folder):
  // there is no content to keep, and a stash cannot record one.
  if (w->files.empty()) return Status::ok();
  // Nothing is lost when the target holds exactly the working files.
  bool same = true;
  for (const auto& [path, text] : w->files) {
    auto it = target.find(path);
    if (it == target.end() || it->second != text) same = false;
  }
  if (same && w->files.size() == target.size()) return Status::ok();
  if (!force)
    return Status::error(
        fmt::format("{} would replace local changes to {}. Keep them with `peak commit -m "
                    "MESSAGE`, set them aside with `peak stash`, or run again with --force (they "
                    "are stashed first: `peak stash list`, `peak stash pop`). `peak diff` shows "
                    "them",
                    why, join(w->changes, ", ")),
        ErrorKind::input);
  auto id = stash_push("auto-stash before " + why);
  if (!id) return id.status();
  stash = *id;
  return Status::ok();
}

Result<SwitchResult> Workspace::switch_to(const std::string& head_value, int64_t id,
                                          std::vector<std::pair<std::string, int64_t>> branches,
                                          const SwitchOptions& opts, const std::string& why) {
  if (auto s = lock(); !s) return s;
  auto target = files_of(id);
  if (!target) return target.status();
  SwitchResult r;
  RefUpdate u;
  u.head = head_value;
  u.branches = std::move(branches);
  // A switch to a checkpoint with HEAD's very files carries local changes along (as git does),
  // unless HEAD itself is checked out to get its files back or `force` asks for the target's
  // files (local changes are stashed first, as always).
  auto h = head();
  auto current = h ? files_of(h->id) : Result<std::map<std::string, std::string>>(Error{""});
  if (!opts.force && why != "checkout HEAD" && current && *current == *target) {
    if (auto s = store_->update_refs(u); !s) return s;
  } else {
    if (auto s = protect_changes(*target, opts.force, why, r.stash); !s) return s;
    if (auto s = switch_files(*target, u); !s) return s;
  }
  r.head = head_value;
  r.checkpoint = id;
  r.message = "HEAD is now at " + describe_head(head_value, id);
  if (r.stash)
    r.message += fmt::format(
        "; your local changes are stash {} (`peak stash pop` brings them back)", *r.stash);
  return r;
}

Status Workspace::move_head(int64_t id) {
  auto files = files_of(id);
  if (!files) return files.status();
  auto head_value = store_->head();
  if (!head_value) return head_value.status();
  RefUpdate u;
  if (starts_with(*head_value, "#")) {
    u.head = fmt::format("#{}", id);
  } else {
    u.head = *head_value;
    u.branches = {{*head_value, id}};
  }
  return switch_files(*files, u);
}

// ---------------------------------------------------------------------------------------------
// Checkout, branches, tags, diff

Result<SwitchResult> Workspace::checkout(const std::string& ref_in, const SwitchOptions& opts) {
  std::string ref = trim(ref_in);
  if (ref.empty())
    return make_error("peak checkout needs a checkpoint, branch or tag (`peak log` lists them)",
                      ErrorKind::input);
  auto head_value = store_->head();
  if (!head_value) return head_value.status();
  if (ref == "HEAD") {
    // The files of HEAD again (with --force: local changes are stashed); HEAD does not move.
    auto h = head();
    if (!h) return h.status();
    return switch_to(*head_value, h->id, {}, opts, "checkout HEAD");
  }
  if (auto r = store_->ref(ref); r && *r) return switch_to(ref, **r, {}, opts, "checkout " + ref);
  auto id = resolve(ref);
  if (!id) return id.status();
  if (!opts.detach)
    return make_error(
        fmt::format("{} names checkpoint {}, not a branch. `peak checkout --detach {}` looks at "
                    "it with a detached HEAD (new checkpoints then belong to no branch); `peak "
                    "branch NAME {}` starts a branch there",
                    ref, *id, ref, ref),
        ErrorKind::input);
  auto r = switch_to(fmt::format("#{}", *id), *id, {}, opts, "checkout " + ref);
  if (r) r->message += "; new checkpoints made here belong to no branch";
  return r;
}

Result<SwitchResult> Workspace::branch(const std::string& name, const std::string& at,
                                       const SwitchOptions& opts) {
  if (auto s = check_ref_name("branch", name); !s) return s;
  auto existing = store_->ref(name);
  if (!existing) return existing.status();
  if (*existing)
    return make_error(fmt::format("branch {} already exists (at checkpoint {}); `peak checkout "
                                  "{}` switches to it",
                                  name, **existing, name),
                      ErrorKind::input);
  if (auto t = store_->find_tag(name); t && *t)
    return make_error(fmt::format("'{}' is already a tag (of checkpoint {}); a branch of the same "
                                  "name would hide it. Choose another name",
                                  name, **t),
                      ErrorKind::input);
  auto id = resolve(at.empty() ? "HEAD" : at);
  if (!id) return id.status();
  auto r = switch_to(name, *id, {{name, *id}}, opts, "branch " + name);
  if (r)
    r->message = fmt::format("switched to a new branch {} at checkpoint {}{}", name, *id,
                             r->stash ? fmt::format("; your local changes are stash {} (`peak "
                                                    "stash pop` brings them back)",
                                                    *r->stash)
                                      : "");
  return r;
}

Status Workspace::tag(const std::string& name, const std::string& at) {
  if (auto s = check_ref_name("tag", name); !s) return s;
  if (auto r = store_->ref(name); r && *r)
    return Status::error(fmt::format("'{}' is already a branch; a tag of the same name would be "
                                     "hidden by it. Choose another name",
                                     name),
                         ErrorKind::input);
  auto id = resolve(at.empty() ? "HEAD" : at);
  if (!id) return id.status();
  if (auto s = lock(); !s) return s;
  if (auto s = store_->tag(name, *id); !s) return Status::error(s.message(), ErrorKind::input);
  return Status::ok();
}

Result<std::string> Workspace::diff(const std::string& a, const std::string& b) const {
  auto ia = resolve(a.empty() ? "HEAD" : a);
  if (!ia) return ia.status();
  auto fa = files_of(*ia);
  if (!fa) return fa.status();
  std::map<std::string, std::string> fb;
  std::string label_b;
  if (b.empty()) {
    auto w = working_state();
    if (!w) return w.status();
    fb = w->files;
  } else {
    auto ib = resolve(b);
    if (!ib) return ib.status();
    auto f = files_of(*ib);
    if (!f) return f.status();
    fb = *f;
    label_b = fmt::format("#{}/", *ib);
  }
  std::string out;
  // The source first, then kernel.toml (as before).
  auto order = [](const std::map<std::string, std::string>& m) {
    std::vector<std::string> names;
    for (const auto& [p, t] : m)
      if (p != "kernel.toml") names.push_back(p);
    names.push_back("kernel.toml");
    return names;
  };
  std::vector<std::string> names = order(*fa);
  for (const auto& n : order(fb))
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  for (const auto& n : names) {
    auto x = fa->find(n);
    auto y = fb.find(n);
    out += unified_diff(x == fa->end() ? "" : x->second, y == fb.end() ? "" : y->second,
                        x == fa->end() ? "/dev/null" : fmt::format("#{}/{}", *ia, n),
                        y == fb.end() ? "/dev/null" : label_b + n);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Stashes

Result<int64_t> Workspace::stash_push(const std::string& message) {
  if (auto s = lock(); !s) return s.status();
  auto w = working_state();
  if (!w) return w.status();
  if (w->clean)
    return make_error("no local changes to stash: the working files are HEAD's", ErrorKind::input);
  auto h = head();
  if (!h) return h.status();
  StashRecord r;
  r.base_checkpoint = h->id;
  auto head_value = store_->head();
  r.branch = head_value && !starts_with(*head_value, "#") ? *head_value : "";
  r.message = message.empty() ? fmt::format("changes on checkpoint {}", h->id) : message;
  for (const auto& [path, text] : w->files) {
    auto blob = store_->put_blob(text);
    if (!blob) return blob.status();
    r.files[path] = *blob;
  }
  auto id = store_->add_stash(r);
  if (!id) return id;
  // HEAD's files back in place (HEAD does not move).
  auto target = files_of(h->id);
  if (!target) return target.status();
  RefUpdate none;
  if (auto s = switch_files(*target, none); !s) return s;
  return id;
}

Result<std::vector<StashRecord>> Workspace::stash_list() const { return store_->stashes(); }

Result<SwitchResult> Workspace::stash_pop(int64_t id, bool force) {
  if (auto s = lock(); !s) return s;
  auto all = store_->stashes();
  if (!all) return all.status();
  if (all->empty()) return make_error("there is no stash to pop", ErrorKind::input);
  auto it = id == 0 ? all->end() - 1
                    : std::find_if(all->begin(), all->end(),
                                   [&](const StashRecord& r) { return r.id == id; });
  if (it == all->end())
    return make_error(fmt::format("there is no stash {} (`peak stash list` shows them)", id),
                      ErrorKind::input);
  StashRecord r = *it;
  auto h = head();
  if (!h) return h.status();
  auto merged = merge_stash(r, h->id);
  if (!merged) return merged.status();
  SwitchResult res;
  if (auto s = protect_changes(merged->files, force, fmt::format("stash pop {}", r.id), res.stash);
      !s)
    return s;
  RefUpdate none;
  if (auto s = switch_files(merged->files, none); !s) return s;
  bool moved = r.base_checkpoint && *r.base_checkpoint != h->id;
  std::string replaced =
      res.stash ? fmt::format("; the local changes it replaced are stash {}", *res.stash) : "";
  if (!merged->conflicted.empty())
    return make_error(
        fmt::format("stash {} was made on checkpoint {}; its changes and HEAD's (checkpoint {}) "
                    "clash in {}: the working files hold both, between <<<<<<< and >>>>>>> "
                    "lines. `peak diff` shows them against HEAD; edit them to the text you want "
                    "(then `peak commit -m MESSAGE`), or `peak checkout --force HEAD` to go back "
                    "to HEAD's files. The stash is kept (`peak stash list`){}",
                    r.id, r.base_checkpoint ? std::to_string(*r.base_checkpoint) : "?", h->id,
                    join(merged->conflicted, ", "), replaced),
        ErrorKind::input);
  if (auto s = store_->finish_stash(r.id, "popped"); !s) return s;
  res.head = store_->head() ? *store_->head() : "";
  res.checkpoint = h->id;
  res.message = fmt::format("stash {} ({}) is in the working files", r.id, r.message);
  if (moved)
    res.message += fmt::format(
        "; it was made on checkpoint {}, and its changes were merged into HEAD's (checkpoint {})",
        *r.base_checkpoint, h->id);
  res.message += replaced;
  return res;
}

Result<Workspace::StashMerge> Workspace::merge_stash(const StashRecord& r, int64_t head_id) const {
  auto ours = files_of(head_id);
  if (!ours) return ours.status();
  // The stash's changes are those from its base to its files. A stash without a base replaces
  // the files it holds (its changes are taken against HEAD's).
  auto base = r.base_checkpoint ? files_of(*r.base_checkpoint) : ours;
  if (!base) return base.status();
  StashMerge m;
  std::string label_ours = fmt::format("HEAD (checkpoint {})", head_id);
  std::string label_theirs =
      r.base_checkpoint ? fmt::format("stash {} (made on checkpoint {})", r.id, *r.base_checkpoint)
                        : fmt::format("stash {}", r.id);
  auto text_of = [](const std::map<std::string, std::string>& files, const std::string& path) {
    auto f = files.find(path);
    return f == files.end() ? std::string() : f->second;
  };
  for (const auto& [path, blob] : r.files) {
    auto theirs = store_->get_blob(blob);
    if (!theirs) return make_error(theirs.error(), ErrorKind::environment);
    auto merged =
        merge3(text_of(*base, path), text_of(*ours, path), *theirs, label_ours, label_theirs);
    if (merged.conflicts > 0)
      m.conflicted.push_back(
          fmt::format("{} ({} place{})", path, merged.conflicts, merged.conflicts > 1 ? "s" : ""));
    m.files[path] = std::move(merged.text);
  }
  return m;
}

Status Workspace::stash_drop(int64_t id) {
  if (auto s = lock(); !s) return s;
  auto all = store_->stashes();
  if (!all) return all.status();
  if (all->empty()) return Status::error("there is no stash to drop", ErrorKind::input);
  return store_->finish_stash(id == 0 ? all->back().id : id, "dropped");
}

}  // namespace peak
