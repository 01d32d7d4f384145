// The campaign file (docs/scale-out.md): parsing, resolution of its names, and the matrix.
#include "campaign/campaign.h"

#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "engine/library.h"
#include "engine/paths.h"
#include "llm/spec.h"
#include "transform/transformation.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/toml_names.h"

namespace peak::campaign {

namespace fs = std::filesystem;

namespace {

struct Src {
  std::string file;
  std::string at(const toml::node& n) const {
    return fmt::format("{}:{}", file, n.source().begin.line > 0 ? n.source().begin.line : 1);
  }
};

Error bad(std::string msg) { return make_error(std::move(msg), ErrorKind::input); }

// The names of the evaluation choices in a campaign file: a [[device]]'s select and devices.
const ChoiceNames kChoiceNames{"select", "devices", "compile_only"};

Status check_keys(const toml::table& t, const std::vector<std::string>& known, const Src& src,
                  const std::string& where) {
  for (auto&& [k, v] : t) {
    std::string key(k.str());
    if (std::find(known.begin(), known.end(), key) == known.end())
      return Status::error(fmt::format("{}: unknown key '{}' in {} (known: {})", src.at(v), key,
                                       where, join(known, ", ")),
                           ErrorKind::input);
  }
  return Status::ok();
}

Result<std::string> get_string(const toml::table& t, const std::string& key, const Src& src) {
  const toml::node* n = t.get(key);
  if (!n) return std::string();
  if (!n->is_string())
    return bad(
        fmt::format("{}: '{}' must be a string, found {}", src.at(*n), key, toml_type_name(*n)));
  return std::string(n->as_string()->get());
}

Result<int64_t> get_int(const toml::table& t, const std::string& key, const Src& src, int64_t dflt,
                        int64_t lo, int64_t hi) {
  const toml::node* n = t.get(key);
  if (!n) return dflt;
  if (!n->is_integer())
    return bad(
        fmt::format("{}: '{}' must be an integer, found {}", src.at(*n), key, toml_type_name(*n)));
  int64_t v = n->as_integer()->get();
  if (v < lo || v > hi)
    return bad(
        fmt::format("{}: '{}' must be between {} and {}, found {}", src.at(*n), key, lo, hi, v));
  return v;
}

Result<double> get_number(const toml::table& t, const std::string& key, const Src& src, double dflt,
                          double lo) {
  const toml::node* n = t.get(key);
  if (!n) return dflt;
  double v = 0;
  if (n->is_integer())
    v = static_cast<double>(n->as_integer()->get());
  else if (n->is_floating_point())
    v = n->as_floating_point()->get();
  else
    return bad(
        fmt::format("{}: '{}' must be a number, found {}", src.at(*n), key, toml_type_name(*n)));
  if (!(v >= lo))
    return bad(fmt::format("{}: '{}' must be at least {}, found {}", src.at(*n), key, lo, v));
  return v;
}

Result<std::optional<bool>> get_bool(const toml::table& t, const std::string& key, const Src& src) {
  const toml::node* n = t.get(key);
  if (!n) return std::optional<bool>();
  if (!n->is_boolean())
    return bad(fmt::format("{}: '{}' must be true or false, found {}", src.at(*n), key,
                           toml_type_name(*n)));
  return std::optional<bool>(n->as_boolean()->get());
}

// A non-empty array of non-empty strings.
Result<std::vector<std::pair<std::string, const toml::node*>>> get_strings(
    const toml::table& t, const std::string& key, const Src& src, bool required,
    const std::string& example) {
  std::vector<std::pair<std::string, const toml::node*>> out;
  const toml::node* n = t.get(key);
  if (!n) {
    if (required)
      return bad(fmt::format("{}:1: the campaign has no '{}'; add {} = [{}]", src.file, key, key,
                             example));
    return out;
  }
  const toml::array* arr = n->as_array();
  if (!arr)
    return bad(fmt::format("{}: '{}' must be an array of strings ({} = [{}])", src.at(*n), key, key,
                           example));
  for (const toml::node& e : *arr) {
    if (!e.is_string() || e.as_string()->get().empty())
      return bad(fmt::format("{}: every entry of '{}' must be a non-empty string, found {}",
                             src.at(e), key,
                             e.is_string() ? "an empty string" : toml_type_name(e)));
    out.emplace_back(std::string(e.as_string()->get()), &e);
  }
  if (out.empty() && required)
    return bad(fmt::format("{}: '{}' is empty; name at least one ({} = [{}])", src.at(*n), key, key,
                           example));
  return out;
}

bool path_exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

fs::path absolute_clean(const fs::path& p) {
  std::error_code ec;
  fs::path a = fs::absolute(p, ec);
  return (ec ? p : a).lexically_normal();
}

// `arg` relative to the campaign file's folder when it names something there, else as given.
std::string near_file(const fs::path& base, const std::string& arg) {
  fs::path p = arg;
  if (p.is_relative() && path_exists(base / p)) return (base / p).string();
  return arg;
}

bool is_cpu_selector(const std::string& s) {
  std::string l;
  for (char c : s) l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* w : {"lavapipe", "llvmpipe", "swiftshader", "cpu"})
    if (l.find(w) != std::string::npos) return true;
  return false;
}

// The driver's label: "replay:/x/recordings/hlsl-fp32" -> "replay-hlsl-fp32",
// "openai:gpt-5@http://127.0.0.1:8080/v1" -> "openai-gpt-5", "command:'...'" -> "command-<hash>".
std::string llm_label(const std::string& spec) {
  auto parsed = parse_llm_spec(spec);
  if (!parsed) return slug(spec);
  const std::string kind(to_string(parsed->kind));
  std::string rest;
  if (parsed->kind == LlmKind::replay) {
    fs::path p = parsed->dir;
    while (!p.empty() && p.filename().empty()) p = p.parent_path();
    rest = p.filename().string();
  } else if (parsed->kind == LlmKind::command) {
    rest = sha256_hex(spec).substr(0, 8);  // programs differ by more than their first word
  } else {
    rest = parsed->model;
  }
  return slug(rest.empty() ? kind : kind + "-" + rest);
}

// A driver spec as `--llm` takes it (llm/spec.h); a replay folder is also found relative to the
// campaign file, and must exist.
Result<std::string> resolve_llm(const fs::path& base, const std::string& arg, const Src& src,
                                const toml::node& n) {
  auto spec = parse_llm_spec(trim(arg), data_path("recordings"));
  if (!spec)
    return bad(fmt::format("{}: '{}' is not an LLM driver spec: {}", src.at(n), arg, spec.error()));
  if (spec->kind != LlmKind::replay) return spec->text;
  fs::path p = spec->arg;
  if (p.is_relative() && path_exists(base / p))
    p = base / p;
  else
    p = spec->dir;
  if (!fs::is_directory(p))
    return bad(fmt::format("{}: no recording folder '{}' (a folder, or a name under {})", src.at(n),
                           spec->arg, data_path("recordings").string()));
  return "replay:" + absolute_clean(p).string();
}

// Reads integer `key` (`dflt` when absent, else within [lo, hi]) into `out`.
Status read_int(const toml::table& t, const std::string& key, const Src& src, int64_t dflt,
                int64_t lo, int64_t hi, int* out) {
  auto v = get_int(t, key, src, dflt, lo, hi);
  if (!v) return v.status();
  *out = static_cast<int>(*v);
  return Status::ok();
}

// Reads string `key` ("" when absent) into `out`, without its surrounding blanks.
Status read_trimmed(const toml::table& t, const std::string& key, const Src& src,
                    std::string* out) {
  auto v = get_string(t, key, src);
  if (!v) return v.status();
  *out = trim(*v);
  return Status::ok();
}

Result<Device> parse_device(const toml::table& t, const Src& src, const toml::node& where) {
  PEAK_TRY(check_keys(t, {"name", "select", "devices", "gpus", "gres", "partition", "constraint"},
                      src, "a [[device]]"));
  Device d;
  std::string name;
  PEAK_TRY(read_trimmed(t, "name", src, &name));
  PEAK_TRY(read_trimmed(t, "select", src, &d.select));
  PEAK_TRY(read_trimmed(t, "devices", src, &d.devices));
  int64_t default_gpus = is_cpu_selector(d.select) ? 0 : 1;
  EvalChoices wanted;
  wanted.device = d.select;
  wanted.devices = d.devices;
  if (auto s = check_eval_choices(wanted, "", kChoiceNames); !s)
    return bad(fmt::format("{}: {}", src.at(where), s.message()));
  if (auto spec = parse_devices_spec(d.devices); spec && !spec->indices.empty())
    default_gpus = static_cast<int64_t>(spec->indices.size());
  const std::string& label = d.devices.empty() ? d.select : d.devices;
  d.name = slug(name.empty() ? (label.empty() ? "default" : label) : name);
  if (d.name.empty())
    return bad(fmt::format("{}: the device needs a name (name = \"h100\")", src.at(where)));
  PEAK_TRY(read_int(t, "gpus", src, default_gpus, 0, 64, &d.gpus));
  PEAK_TRY(read_trimmed(t, "gres", src, &d.gres));
  PEAK_TRY(read_trimmed(t, "partition", src, &d.partition));
  PEAK_TRY(read_trimmed(t, "constraint", src, &d.constraint));
  return d;
}

// format: required, and not newer than this peak reads.
Status parse_format(const toml::table& t, const Src& src, Campaign& c) {
  const toml::node* fn = t.get("format");
  if (!fn)
    return bad(fmt::format("{}:1: the campaign has no 'format'; add 'format = {}'", src.file,
                           kCampaignFormatVersion));
  auto format = get_int(t, "format", src, 0, 1, 1000000);
  if (!format) return format.status();
  if (*format > kCampaignFormatVersion)
    return bad(fmt::format(
        "{}: campaign format {} is newer than this peak supports (format {}); upgrade peak or "
        "rewrite the file in format {}",
        src.at(*fn), *format, kCampaignFormatVersion, kCampaignFormatVersion));
  c.format = static_cast<int>(*format);
  return Status::ok();
}

// name (a slug), description and dir (default: <name>.campaign next to the file).
Status parse_identity(const toml::table& t, const Src& src, const fs::path& base, Campaign& c) {
  auto name = get_string(t, "name", src);
  if (!name) return name.status();
  if (!t.get("name"))
    return bad(
        fmt::format("{}:1: the campaign has no 'name'; add name = \"matmul-fp32\"", src.file));
  c.name = trim(*name);
  if (c.name.empty() || slug(c.name) != c.name)
    return bad(
        fmt::format("{}: the campaign name '{}' must be made of letters, digits, '.', '_' and '-'",
                    src.at(*t.get("name")), c.name));
  PEAK_TRY(read_trimmed(t, "description", src, &c.description));
  std::string dir;
  PEAK_TRY(read_trimmed(t, "dir", src, &dir));
  c.dir = dir.empty() ? base / (c.name + ".campaign") : fs::path(dir);
  if (c.dir.is_relative()) c.dir = base / c.dir;
  c.dir = absolute_clean(c.dir);
  return Status::ok();
}

// contexts, sequences and llms: each entry resolved as the command line resolves it.
Status resolve_matrix(const toml::table& t, const Src& src, const fs::path& base, Campaign& c) {
  auto contexts = get_strings(t, "contexts", src, true, "\"matmul-hlsl-fp32\"");
  if (!contexts) return contexts.status();
  for (const auto& [arg, node] : *contexts) {
    auto found = find_context(near_file(base, arg));
    if (!found) return bad(fmt::format("{}: {}", src.at(*node), found.error()));
    fs::path p = absolute_clean(*found);
    while (!p.empty() && p.filename().empty()) p = p.parent_path();
    c.contexts.push_back({slug(p.filename().string()), p.string()});
  }
  auto sequences = get_strings(t, "sequences", src, true, "\"hlsl-fp32\"");
  if (!sequences) return sequences.status();
  for (const auto& [arg, node] : *sequences) {
    auto found = find_sequence(near_file(base, arg));
    if (!found) return bad(fmt::format("{}: {}", src.at(*node), found.error()));
    auto seq = load_sequence(*found);
    if (!seq) return bad(seq.error());
    c.sequences.push_back({slug(seq->name), absolute_clean(*found).string()});
  }
  auto llms = get_strings(t, "llms", src, true, "\"openai:gpt-5\"");
  if (!llms) return llms.status();
  for (const auto& [arg, node] : *llms) {
    auto spec = resolve_llm(base, arg, src, *node);
    if (!spec) return spec.status();
    c.llms.push_back({llm_label(*spec), *spec});
  }
  return Status::ok();
}

// Each sequence runs on each context: a step written for other kernel families than a context's
// is refused here, when the campaign is read, rather than in the middle of its runs. A context or
// a library that cannot be read is left to the runs, which report it.
Status check_families(const Campaign& c) {
  std::vector<std::string> problems;
  auto lib = load_library_for("", &problems);
  if (!lib) return Status::ok();
  for (const auto& ctx : c.contexts) {
    auto kc = load_context(ctx.value);
    if (!kc) continue;
    for (const auto& s : c.sequences) {
      auto seq = load_sequence(s.value);
      if (!seq) continue;
      if (auto why = sequence_family_problem(*seq, *lib, kc->family); !why.empty())
        return bad(fmt::format(
            "{}: sequence {} cannot run on context {}: {}; give each family's contexts a "
            "campaign of their own",
            c.file.string(), s.name, ctx.name, why));
    }
  }
  return Status::ok();
}

// [[device]] tables; without any, one default device.
Status parse_devices(const toml::table& t, const Src& src, Campaign& c) {
  const toml::node* dn = t.get("device");
  if (!dn) {
    c.devices.push_back({"default", "", 0, "", "", "", ""});
    return Status::ok();
  }
  const toml::array* arr = dn->as_array();
  if (!arr || !arr->is_array_of_tables() || arr->empty())
    return bad(fmt::format(
        "{}: 'device' must be [[device]] tables (name = \"h100\", select = \"H100\", gpus = 1)",
        src.at(*dn)));
  for (const toml::node& e : *arr) {
    auto d = parse_device(*e.as_table(), src, e);
    if (!d) return d.status();
    c.devices.push_back(*d);
  }
  return Status::ok();
}

Status parse_eval(const toml::table& t, const Src& src, EvalChoices& eval) {
  const toml::node* en = t.get("eval");
  if (!en) return Status::ok();
  if (!en->is_table())
    return bad(fmt::format("{}: 'eval' must be a table ([eval] budget = 8)", src.at(*en)));
  const toml::table& e = *en->as_table();
  PEAK_TRY(check_keys(
      e,
      {"shapes", "budget", "jobs", "baseline", "strategy", "strategy_budget", "reuse_measurements"},
      src, "[eval]"));
  auto shapes = get_string(e, "shapes", src);
  if (!shapes) return shapes.status();
  if (*shapes == "small")
    eval.small = true;
  else if (*shapes == "full")
    eval.small = false;
  else if (!shapes->empty())
    return bad(fmt::format("{}: shapes must be \"small\" or \"full\", found \"{}\"",
                           src.at(*e.get("shapes")), *shapes));
  int budget = 0;
  PEAK_TRY(read_int(e, "budget", src, 0, 1, 100000, &budget));
  eval.budget = static_cast<size_t>(budget);
  PEAK_TRY(read_int(e, "jobs", src, 0, 1, 4096, &eval.jobs));
  auto baseline = get_bool(e, "baseline", src);
  if (!baseline) return baseline.status();
  eval.baseline = baseline->value_or(true);
  auto reuse = get_bool(e, "reuse_measurements", src);
  if (!reuse) return reuse.status();
  eval.reuse_measurements = reuse->value_or(false);
  std::string strategy_budget;
  PEAK_TRY(read_trimmed(e, "strategy", src, &eval.strategy));
  PEAK_TRY(read_trimmed(e, "strategy_budget", src, &strategy_budget));
  if (auto s = check_eval_choices(eval, strategy_budget, kChoiceNames); !s)
    return bad(fmt::format("{}: {}", src.at(*en), s.message()));
  return Status::ok();
}

Status parse_slurm(const toml::table& t, const Src& src, const fs::path& base,
                   SlurmSettings& slurm) {
  const toml::node* sn = t.get("slurm");
  if (!sn) return Status::ok();
  if (!sn->is_table())
    return bad(
        fmt::format("{}: 'slurm' must be a table ([slurm] partition = \"gpu\")", src.at(*sn)));
  const toml::table& s = *sn->as_table();
  PEAK_TRY(check_keys(s,
                      {"partition", "account", "qos", "time", "mem", "cpus_per_task", "extra",
                       "max_requeues", "poll_seconds", "peak"},
                      src, "[slurm]"));
  for (auto [key, out] :
       {std::pair{"partition", &slurm.partition}, std::pair{"account", &slurm.account},
        std::pair{"qos", &slurm.qos}, std::pair{"time", &slurm.time}, std::pair{"mem", &slurm.mem},
        std::pair{"peak", &slurm.peak}})
    PEAK_TRY(read_trimmed(s, key, src, out));
  if (!slurm.peak.empty() && fs::path(slurm.peak).is_relative())
    slurm.peak = absolute_clean(base / slurm.peak).string();
  PEAK_TRY(read_int(s, "cpus_per_task", src, 0, 1, 4096, &slurm.cpus_per_task));
  PEAK_TRY(read_int(s, "max_requeues", src, 3, 0, 1000, &slurm.max_requeues));
  auto poll = get_number(s, "poll_seconds", src, 30, 0.1);
  if (!poll) return poll.status();
  slurm.poll_s = *poll;
  auto extra = get_strings(s, "extra", src, false, "\"--constraint=h100\"");
  if (!extra) return extra.status();
  for (const auto& [arg, node] : *extra) {
    if (!starts_with(arg, "-"))
      return bad(fmt::format("{}: '{}' is not an sbatch option (extra = [\"--exclusive\"])",
                             src.at(*node), arg));
    slurm.extra.push_back(arg);
  }
  return Status::ok();
}

}  // namespace

std::string slug(std::string_view text) {
  std::string out;
  for (char c : text) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (ok)
      out += c;
    else if (!out.empty() && out.back() != '-')
      out += '-';
  }
  while (!out.empty() && (out.back() == '-' || out.back() == '.')) out.pop_back();
  while (!out.empty() && (out.front() == '-' || out.front() == '.')) out.erase(0, 1);
  return out;
}

Result<Campaign> parse_campaign(std::string_view text, const fs::path& file) {
  Campaign c;
  c.file = absolute_clean(file);
  const fs::path base = c.file.parent_path();
  Src src{file.string()};
  toml::table t;
  try {
    t = toml::parse(text, file.string());
  } catch (const toml::parse_error& e) {
    return bad(fmt::format("{}:{}: {}", file.string(), e.source().begin.line, e.description()));
  }
  PEAK_TRY(check_keys(t,
                      {"format", "name", "description", "dir", "contexts", "sequences", "llms",
                       "device", "attempts", "llm_deadline", "eval", "slurm"},
                      src, "a campaign"));
  PEAK_TRY(parse_format(t, src, c));
  PEAK_TRY(parse_identity(t, src, base, c));
  PEAK_TRY(resolve_matrix(t, src, base, c));
  PEAK_TRY(check_families(c));
  PEAK_TRY(parse_devices(t, src, c));
  PEAK_TRY(read_int(t, "attempts", src, 0, 1, 100, &c.attempts));
  auto deadline = get_number(t, "llm_deadline", src, 0, 1);
  if (!deadline) return deadline.status();
  c.llm_deadline = *deadline;
  PEAK_TRY(parse_eval(t, src, c.eval));
  PEAK_TRY(parse_slurm(t, src, base, c.slurm));

  // Every workflow id is unique: two entries with the same label would share a workspace.
  std::set<std::string> ids;
  for (const auto& w : workflows(c))
    if (!ids.insert(w.id).second)
      return bad(fmt::format(
          "{}: two combinations are both named '{}' (the same context, sequence, LLM or device "
          "twice, or two that read the same); list each once, or give the devices different "
          "names",
          src.file, w.id));
  return c;
}

Result<Campaign> load_campaign(const fs::path& file) {
  auto text = read_file(file);
  if (!text) return bad(fmt::format("{} (the campaign file)", text.error()));
  return parse_campaign(*text, file);
}

std::vector<Workflow> workflows(const Campaign& c) {
  std::vector<Workflow> out;
  std::map<std::string, int> steps;
  for (const auto& seq : c.sequences)
    if (auto s = load_sequence(seq.value)) steps[seq.value] = static_cast<int>(s->steps.size());
  for (const auto& ctx : c.contexts)
    for (const auto& seq : c.sequences)
      for (const auto& llm : c.llms)
        for (const auto& dev : c.devices) {
          Workflow w;
          w.id = fmt::format("{}__{}__{}__{}", ctx.name, seq.name, llm.name, dev.name);
          w.context = ctx;
          w.sequence = seq;
          w.llm = llm;
          w.device = dev;
          w.steps = steps[seq.value];
          w.workspace = c.dir / "workspaces" / w.id;
          w.log = c.dir / "logs" / (w.id + ".log");
          w.outcome = c.dir / "outcomes" / (w.id + ".json");
          w.script = c.dir / "jobs" / (w.id + ".sh");
          out.push_back(std::move(w));
        }
  return out;
}

Result<Workflow> find_workflow(const Campaign& c, const std::string& id) {
  std::vector<std::string> ids;
  for (auto& w : workflows(c)) {
    if (w.id == id) return w;
    ids.push_back(w.id);
  }
  return bad(fmt::format("campaign {} has no workflow '{}'; its workflows: {}", c.name, id,
                         join(ids, ", ")));
}

}  // namespace peak::campaign
