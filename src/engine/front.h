#pragma once
// What the front ends (cli/, mcp/) include, so that they include engine headers only
// (docs/architecture.md). The engine has one API: the Workspace (engine/workspace.h) and the
// free functions beside it, grouped by concept: the evaluation options and their check
// (engine/options.h), where contexts, sequences and transformations are found
// (engine/library.h), the JSON forms (engine/forms.h), reports and statistics
// (engine/reports.h), the benchmarks and tuning caches (engine/bench.h), the demo and doctor
// (engine/demo.h). The data a front end fills in or prints comes through here too: Transformation
// and Sequence (transform/), the LLM driver interface, the LLM spec and the manual prompts (llm/;
// the MCP server implements a driver), the report (report/), the tuning strategies' names
// (tune/strategy.h), the store's timestamps (utc_now_iso8601, store/ through
// engine/workspace.h). Work that reaches into the store, the tuning caches or the statistics is
// done by engine functions, not by the front ends.
#include "engine/bench.h"
#include "engine/demo.h"
#include "engine/forms.h"
#include "engine/library.h"
#include "engine/options.h"
#include "engine/paths.h"
#include "engine/reports.h"
#include "engine/workspace.h"
#include "llm/llm.h"
#include "llm/spec.h"
#include "report/report.h"
#include "transform/transformation.h"
#include "tune/strategy.h"
