#pragma once
// The prompt builder: renders one pass of one transformation into a (system, user) prompt.
// Deterministic: the same inputs give byte-identical prompts (replay keys depend on it).
#include <map>
#include <string>
#include <vector>

#include "context/context.h"
#include "transform/transformation.h"

namespace peak {

struct Prompt {
  std::string system;
  std::string user;
  std::string key() const;  // sha256 of system + "\0" + user: the replay/manual key
};

struct PromptInput {
  const Transformation* transformation = nullptr;
  int pass_index = 1;  // 1-based
  const KernelContext* context = nullptr;  // the current context (validation shapes are shown,
                                           // hidden shapes never)
  const SourceRegions* source = nullptr;   // current source, split
  std::string backend;                     // "hlsl", "cuda", "hip"
  // The backend's translation table (phrase -> spelling), merged under the transformation's.
  std::map<std::string, std::string> backend_translation;
  // Device facts shown to the model: name, subgroup size, shared memory per group, ...
  std::vector<std::pair<std::string, std::string>> device_facts;
  std::string device_name;           // selects device_notes
  // The device's architecture ("sm_90a"; "" = unknown), shown beside the transformation's
  // `requires` (a transformation without one shows nothing, so its prompts do not change).
  std::string device_arch;
  // The launch-plan language of the host region, as taught for this backend
  // (plan_reference() in plan/plan_language.h); shown in full for host passes, summarized for
  // the others.
  std::string plan_reference;
  std::string extra_instructions;    // from the sequence step
  std::string feedback;              // what went wrong in the previous attempt ("" = none)
};

// The rules section says: edit only the named region; keep every tuning placeholder
// (the parameters listed) as a preprocessor name, never a literal; do not choose tuning values;
// reply with exactly one fenced code block holding the complete new region and nothing else
// that is code. The context shows every region, the target one marked.
Prompt build_prompt(const PromptInput& in);

}  // namespace peak
