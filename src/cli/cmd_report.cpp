// Reports along the history (report) and analytics over stores (stats).
#include "cli/common.h"

#include <fmt/format.h>

namespace peak::cli {

void setup_report(CLI::App* c, Options& o) {
  c->add_option("args", o.args, "CHECKPOINT (default HEAD)");
  c->add_option("--format", o.format, "text, markdown, json or html")->capture_default_str();
  c->add_option("-o,--output", o.output, "write to FILE");
  c->add_option("--html", o.html, "write the HTML report to FILE (= --format html -o FILE)");
  c->add_option("--store", o.store,
                "read this store instead of the workspace: a workspace, its .peak folder "
                "or a peak.db file");
  c->add_option("--cross-reference", o.cross_reference,
                "another store (workspace, .peak folder or peak.db) whose vendor-library "
                "rates on the same GPU model are shown beside the peak (e.g. a CUDA "
                "campaign's cuBLAS for an HLSL report)");
}

int cmd_report(Options& o) {
  if (o.args.size() > 1) {
    err("usage: peak report [CHECKPOINT] [--format text|markdown|json|html] [-o FILE]");
    return kUsage;
  }
  std::string fmt_name = o.json_out ? "json" : o.format;
  if (!o.html.empty()) {
    fmt_name = "html";
    o.output = o.html;
  }
  fs::path where = o.store.empty() ? fs::path(o.workspace) : fs::path(o.store);
  auto text = render_report_at(where, o.args.empty() ? "" : o.args[0], fmt_name, o.cross_reference);
  if (!text) {
    err(text.error());
    return text.error().find("unknown report format") != std::string::npos ||
                   text.error_kind() == ErrorKind::input
               ? kUsage
               : kEnvironment;
  }
  return emit(o, *text);
}

void setup_stats(CLI::App* c, Options& o) {
  c->add_option("args", o.args,
                "STORE_OR_WORKSPACE... (workspaces, .peak folders, peak.db files, or "
                "folders to search; default: the workspace)");
  c->add_option("--format", o.format, "text, json, csv or html")->capture_default_str();
  c->add_option("-o,--output", o.output, "write to FILE");
}

int cmd_stats(Options& o) {
  if (o.args.empty()) o.args.push_back(o.workspace);
  auto text = render_stats(o.args, o.json_out ? "json" : o.format);
  if (!text) return fail(text.status());  // input errors: kUsage; a store or page: kEnvironment
  return emit(o, *text);
}

}  // namespace peak::cli
