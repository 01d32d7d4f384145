#include "transform/prompt.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <set>

#include <fmt/format.h>

#include "util/fs.h"
#include "util/sha256.h"

namespace peak {

namespace {

constexpr std::string_view kEditFlag = "<<< EDIT THIS REGION >>>";

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "peak: build_prompt: %s\n", what);
  std::abort();
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string fence_language(std::string_view backend) {
  if (backend == "cuda") return "cuda";
  if (backend == "hip") return "cpp";
  if (backend == "hlsl") return "hlsl";
  return std::string(backend);
}

// A backtick fence longer than any backtick run inside `text`.
std::string fence_for(std::string_view text) {
  size_t longest = 0, run = 0;
  for (char c : text) {
    run = (c == '`') ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  return std::string(std::max<size_t>(3, longest + 1), '`');
}

std::string table_cell(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n')
      out += ' ';
    else
      out += c;
  }
  return out;
}

std::string join_values(const std::vector<int64_t>& values) {
  std::vector<std::string> parts;
  for (int64_t v : values) parts.push_back(std::to_string(v));
  return join(parts, ", ");
}

// Inserts the flag line just before the begin marker of `target` (which closes the fixed text
// `fixed`), or at its end when the marker is not part of the fixed text.
std::string flag_before_marker(const std::string& fixed, Region target) {
  const std::string marker = begin_marker(target);
  const std::string region(to_string(target));
  std::vector<std::string> lines = split_lines(fixed);
  for (size_t i = lines.size(); i-- > 0;) {
    const std::string t = trim(lines[i]);
    if (t != marker && !(starts_with(t, "// peak:begin") && trim(t.substr(13)) == region)) continue;
    size_t offset = 0;
    for (size_t j = 0; j < i; ++j) offset += lines[j].size() + 1;
    std::string out = fixed;
    out.insert(offset, std::string(kEditFlag) + "\n");
    return out;
  }
  std::string out = fixed;
  if (!out.empty() && out.back() != '\n') out += '\n';
  return out + std::string(kEditFlag) + "\n";
}

std::string render_source(const SourceRegions& src, Region target) {
  SourceRegions flagged = src;
  std::string* fixed = nullptr;
  switch (target) {
    case Region::macros:
      fixed = &flagged.before;
      break;
    case Region::device:
      fixed = &flagged.between_macros_device;
      break;
    case Region::host:
      fixed = &flagged.between_device_host;
      break;
  }
  *fixed = flag_before_marker(*fixed, target);
  return join_regions(flagged);
}

std::string system_prompt(Region region, const std::vector<std::string>& tuning_names) {
  const std::string r(to_string(region));
  std::string names = tuning_names.empty() ? "" : " (here: " + join(tuning_names, ", ") + ")";
  std::string s;
  s += "You are an expert GPU performance engineer. You carry out one pass of a performance "
       "transformation on a GPU kernel by editing one region of its source file.\n\n";
  s += "The source file is split into three regions by marker comments: macros (preprocessor "
       "definitions), device (the kernel code) and host (the launch plan: which kernels run, in "
       "what order, with what grid and arguments; the tool evaluates it, it is not compiled). "
       "Text outside the regions belongs to the tool and is never edited.\n\n";
  s += "Rules:\n";
  s += fmt::format(
      "1. Edit ONLY the {0} region. The other regions are shown for reference and are kept "
      "exactly as they are; do not repeat them in your reply.\n",
      r);
  s += fmt::format(
      "2. Keep every tuning parameter{} as a preprocessor name. Never replace one by a literal "
      "value and never #define, #undef or give a default value to one: the tool injects the "
      "values at compile time and tunes them.\n",
      names);
  s += "3. Introduce new tuning parameters only when the pass says so, using exactly the names "
       "it gives. Do not choose tuning values.\n";
  s += "4. The kernel must stay correct for every shape that satisfies the validity expression, "
       "including shapes that are not multiples of any tile size unless the validity expression "
       "forbids them. Guard every memory access that could fall outside an array.\n";
  s += "5. Keep the arrays and scalars of the kernel context as they are (the launch plan binds "
       "them by name). Do not call vendor libraries or hard-code shapes.\n";
  s += fmt::format(
      "6. Reply with exactly one fenced code block containing the complete new text of the {0} "
      "region (without its marker comments) and nothing else as code. Explanations, if any, go "
      "outside the block.\n",
      r);
  return s;
}

// A tuning parameter shown to the model, and whether this transformation introduces it.
struct ShownParam {
  const TuningParam* param;
  bool introduced;
};

// The context's tuning parameters (which may already hold this transformation's, merged by the
// caller, with their current value sets), then the ones this transformation introduces that the
// context lacks.
std::vector<ShownParam> shown_tuning(const Transformation& tr, const KernelContext& ctx) {
  std::set<std::string> introduced_names;
  for (const auto& p : tr.tuning) introduced_names.insert(p.name);
  std::vector<ShownParam> tuning;
  std::set<std::string> seen;
  for (const auto& p : ctx.tuning)
    if (seen.insert(p.name).second) tuning.push_back({&p, introduced_names.count(p.name) > 0});
  for (const auto& p : tr.tuning)
    if (seen.insert(p.name).second) tuning.push_back({&p, true});
  return tuning;
}

// The transformation's title, requirement and description, then what this pass must do.
std::string pass_section(const PromptInput& in, const Transformation& tr, const Pass& pass) {
  const int total = static_cast<int>(tr.passes.size());
  std::string u;
  u += fmt::format("# Transformation: {} ({} v{})\n\n", tr.title, tr.name, tr.version);
  if (!tr.required_arch.empty())
    u += fmt::format("Requires: {} (this device: {})\n\n", tr.required_arch,
                     in.device_arch.empty() ? "unknown" : in.device_arch);
  if (!tr.description.empty()) u += tr.description + "\n\n";

  u += fmt::format("## This pass ({} of {}): edit the {} region\n\n", in.pass_index, total,
                   to_string(pass.region));
  u += pass.instruction + "\n\n";
  if (in.pass_index < total) {
    std::vector<std::string> later;
    for (int i = in.pass_index; i < total; ++i)
      later.push_back(
          fmt::format("{} ({})", i + 1, to_string(tr.passes[static_cast<size_t>(i)].region)));
    u += fmt::format(
        "Passes still to come: {}. The kernel needs to compile and be correct only after the "
        "last pass; this pass may leave it temporarily incomplete where later passes finish "
        "the work.\n\n",
        join(later, ", "));
  } else if (total > 1) {
    u += "This is the last pass: after it the kernel must compile and be correct.\n\n";
  }
  return u;
}

// Device notes whose key occurs in the device name (case-insensitive), in key order.
std::string device_notes_section(const Transformation& tr, std::string_view device_name) {
  std::vector<std::pair<std::string, std::string>> notes;
  const std::string device_lower = lower(device_name);
  for (const auto& [key, note] : tr.device_notes)
    if (!key.empty() && device_lower.find(lower(key)) != std::string::npos)
      notes.emplace_back(key, note);
  if (notes.empty()) return "";
  std::string u = "## Device-specific notes\n\n";
  for (const auto& [key, note] : notes) u += fmt::format("For {}: {}\n\n", key, note);
  return u;
}

// How the phrases of the instructions are spelled in the backend: its table, overridden by the
// transformation's.
std::string vocabulary_section(const PromptInput& in, const Transformation& tr) {
  std::map<std::string, std::string> vocabulary = in.backend_translation;
  if (auto it = tr.translations.find(in.backend); it != tr.translations.end())
    for (const auto& [phrase, spelling] : it->second) vocabulary[phrase] = spelling;
  if (vocabulary.empty()) return "";
  std::string u = fmt::format("## Backend vocabulary ({})\n\n", in.backend);
  u += fmt::format("How the phrases used above are spelled in {}:\n\n", in.backend);
  u += fmt::format("| Phrase | {} |\n| --- | --- |\n", in.backend);
  for (const auto& [phrase, spelling] : vocabulary)
    u += fmt::format("| {} | {} |\n", table_cell(phrase), table_cell(spelling));
  return u + "\n";
}

std::string device_section(const PromptInput& in) {
  std::vector<std::string> facts;
  for (const auto& [k, v] : in.device_facts)
    if (!trim(v).empty()) facts.push_back(fmt::format("- {}: {}", k, v));
  if (facts.empty()) return "";
  return "## Device\n\n" + join(facts, "\n") + "\n\n";
}

// The bench and validation shapes, without repeats and without any hidden shape.
std::vector<std::string> example_shapes(const KernelContext& ctx) {
  std::set<std::string> hidden;
  for (const auto& s : ctx.hidden_shapes) hidden.insert(s.text());
  std::vector<std::string> shown;
  for (const auto* list : {&ctx.bench_shapes, &ctx.validation_shapes})
    for (const auto& s : *list) {
      std::string t = s.text();
      if (hidden.count(t) || std::find(shown.begin(), shown.end(), t) != shown.end()) continue;
      shown.push_back(std::move(t));
    }
  return shown;
}

std::string context_section(const PromptInput& in, const KernelContext& ctx,
                            const std::vector<ShownParam>& tuning) {
  std::string u = "## Kernel context\n\n";
  u += fmt::format("- Backend: {}\n", in.backend);
  if (!ctx.precision.empty()) u += fmt::format("- Precision: {}\n", ctx.precision);
  if (!ctx.arrays.empty()) {
    u += "- Arrays (in binding order):\n";
    for (const auto& a : ctx.arrays)
      u += fmt::format("  - {}: {}, {} elements, {}\n", a.name, to_string(a.dtype), a.size,
                       a.output ? "output" : "input");
  }
  if (!ctx.scalars.empty()) {
    u += "- Scalars:\n";
    for (const auto& s : ctx.scalars) u += fmt::format("  - {}: {}\n", s.name, to_string(s.dtype));
  }
  u += fmt::format("- Validity expression: {}\n", ctx.valid.empty() ? "(none)" : ctx.valid);
  if (!ctx.supports.empty())
    u += fmt::format("- Shapes this kernel supports (narrowed by earlier transformations): {}\n",
                     ctx.supports);
  if (const auto shown = example_shapes(ctx); !shown.empty()) {
    u += "- Example shapes (the kernel must also work for other valid shapes):\n";
    for (const auto& t : shown) u += "  - " + t + "\n";
  }
  if (!tuning.empty()) {
    u += "- Tuning parameters (preprocessor names whose values the tool injects and tunes):\n";
    for (const auto& [p, introduced] : tuning)
      u += fmt::format("  - {}: values {} (default {}){}\n", p->name, join_values(p->values),
                       p->default_value, introduced ? "; introduced by this transformation" : "");
  }
  if (!ctx.tuning_valid.empty())
    u += fmt::format("- Tuning constraint (configurations that break it are skipped): {}\n",
                     ctx.tuning_valid);
  return u + "\n";
}

// The launch-plan language: in full for a pass over the host region, else what it is.
std::string plan_section(const PromptInput& in, const Pass& pass) {
  if (trim(in.plan_reference).empty()) return "";
  std::string u = "## The launch plan (host region)\n\n";
  if (pass.region == Region::host) return u + in.plan_reference + "\n";
  return u +
         "The host region is a launch plan that the tool evaluates (it is not compiled): its "
         "`launch` statements name the kernels of the device region and give their grid and "
         "arguments in order. A kernel's parameters must keep matching the plan's `args`.\n\n";
}

// The whole source, the region to edit flagged.
std::string source_section(const PromptInput& in, const Pass& pass) {
  const std::string source = render_source(*in.source, pass.region);
  const std::string fence = fence_for(source);
  std::string u = "## Current source\n\n";
  u += fmt::format(
      "The whole file. Each region lies between its marker comments; the line `{}` (not part "
      "of the file) flags the {} region, the one to edit.\n\n",
      kEditFlag, to_string(pass.region));
  u += fence + fence_language(in.backend) + "\n" + source;
  if (!source.empty() && source.back() != '\n') u += "\n";
  return u + fence + "\n\n";
}

std::string feedback_section(const PromptInput& in) {
  const std::string feedback = trim(in.feedback);
  if (feedback.empty()) return "";
  return "## The previous attempt failed\n\n" + feedback +
         "\n\n"
         "Start again from the current source above and avoid this problem.\n\n";
}

}  // namespace

std::string Prompt::key() const {
  std::string data = system;
  data.push_back('\0');
  data += user;
  return sha256_hex(data);
}

Prompt build_prompt(const PromptInput& in) {
  if (!in.transformation) fail("no transformation given");
  if (!in.context) fail("no kernel context given");
  if (!in.source) fail("no source given");
  const Transformation& tr = *in.transformation;
  const KernelContext& ctx = *in.context;
  const int total = static_cast<int>(tr.passes.size());
  if (in.pass_index < 1 || in.pass_index > total) fail("pass index out of range");
  const Pass& pass = tr.passes[static_cast<size_t>(in.pass_index - 1)];

  const std::vector<ShownParam> tuning = shown_tuning(tr, ctx);
  std::vector<std::string> tuning_names;
  for (const auto& [p, introduced] : tuning) tuning_names.push_back(p->name);

  Prompt prompt;
  prompt.system = system_prompt(pass.region, tuning_names);
  std::string u = pass_section(in, tr, pass);
  u += device_notes_section(tr, in.device_name);
  const std::string extra = trim(in.extra_instructions);
  if (!extra.empty()) u += "## Additional instructions\n\n" + extra + "\n\n";
  u += vocabulary_section(in, tr);
  u += device_section(in);
  u += context_section(in, ctx, tuning);
  u += plan_section(in, pass);
  u += source_section(in, pass);
  u += feedback_section(in);
  u += fmt::format(
      "Reply with exactly one fenced code block holding the complete new text of the {} region "
      "(without its marker comments), and nothing else as code.\n",
      to_string(pass.region));
  prompt.user = std::move(u);
  return prompt;
}

}  // namespace peak
