// The programs peak starts (serve, mcp), the checks of this machine (doctor) and the demo.
#include "cli/common.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "mcp/serve.h"
#include "util/fs.h"

namespace peak::cli {

void setup_serve(CLI::App* c, Options& o) {
  c->add_option("--host", o.host, "address to listen on (default: loopback only)")
      ->capture_default_str();
  c->add_option("--port", o.port, "port (0: any free port)")->capture_default_str();
  c->add_option("--store", o.store, "serve this store instead of the workspace");
}

// `peak serve` is the peak-serve program beside peak (it links the HTTP server library, which
// the peak binary itself does without).
int cmd_serve(Options& o) {
  fs::path exe = self_executable().parent_path() / "peak-serve";
  std::error_code ec;
  if (!fs::exists(exe, ec)) {
    err(fmt::format("{} is missing: build it (`ninja -C build peak-serve`) next to peak",
                    exe.string()));
    return kEnvironment;
  }
  std::vector<std::string> args = {exe.string(), "-C",     o.workspace,           "--host",
                                   o.host,       "--port", std::to_string(o.port)};
  if (!o.store.empty()) args.insert(args.end(), {"--store", o.store});
  if (o.quiet) args.push_back("-q");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  ::execv(exe.c_str(), argv.data());
  err(fmt::format("cannot run {}: {}", exe.string(), std::strerror(errno)));
  return kEnvironment;
}

void setup_mcp(CLI::App* c, Options& o) {
  c->add_option("--http", o.mcp_http,
                "serve Streamable HTTP at HOST:PORT/mcp instead of stdio (default host "
                "127.0.0.1; port 0 picks a free one)");
  c->add_option("--root", o.mcp_root,
                "the folder clients may use: workspaces are created and opened only "
                "inside it (default: the current folder)");
  c->add_option("--token-env", o.mcp_token_env,
                "HTTP: the environment variable holding the bearer token (default "
                "PEAK_MCP_TOKEN); required to listen beyond loopback");
}

int cmd_mcp(Options& o) { return mcp::run(o.workspace, o.mcp_root, o.mcp_http, o.mcp_token_env); }

void setup_doctor(CLI::App* c, Options& o) {
  c->add_option("--device", o.device, "device selector");
  c->add_option("--llm", o.doctor_llm,
                "check this LLM driver instead: reachable, authenticated, model offered, "
                "one tiny completion and its reply format");
  c->add_option("--key-env", o.key_env, "environment variable holding the API key");
  c->add_option("--llm-deadline", o.llm_deadline,
                "seconds the tiny completion may take, retries included");
}

int cmd_doctor(Options& o) {
  if (!o.doctor_llm.empty()) {
    if (o.llm_deadline < 0) {
      err("--llm-deadline takes seconds");
      return kUsage;
    }
    auto ws = Workspace::open(o.workspace);
    DriverOptions d = driver_options(o, ws ? (*ws)->root() : fs::path());
    DoctorReport r = run_llm_doctor(resolve_llm_spec(o.doctor_llm, data_path("recordings")), d);
    if (o.json_out)
      emit_json(r.to_json());
    else
      std::printf("%s", r.text().c_str());
    return r.ok ? kOk : r.bad_input ? kUsage : kEnvironment;
  }
  DoctorReport d = run_doctor(o.device);
  if (o.json_out)
    emit_json(d.to_json());
  else
    std::printf("%s", d.text().c_str());
  return d.ok ? kOk : kEnvironment;
}

void setup_demo(CLI::App* c, Options& o) {
  c->add_option("--backend", o.backend, "cuda, hip, hlsl or auto")->capture_default_str();
  c->add_option("--family", o.family,
                "the kernel family of the campaign: matmul (default), or one recorded in "
                "recordings/FAMILY-BACKEND (softmax)");
  c->add_option("--dir", o.dir, "workspace folder (default: a new temporary folder)");
  c->add_option("--device", o.device, "device selector");
  c->add_option("--devices", o.devices,
                "several GPUs of this host, of one model: all, indices (0,1) or a name "
                "substring");
  c->add_flag("--small", o.small, "small shapes (default on CPU devices)");
  c->add_flag("--full", o.full,
              "the whole sequence where its recording exists "
              "(recordings/BACKEND-fp32-full) at the bench shapes; without --full a GPU "
              "replays the first three steps, a CPU device the whole sequence at the "
              "small shapes");
  c->add_option("--budget", o.budget,
                "tuning configurations per step at most (on a CPU device, where the "
                "whole sequence runs at the small shapes, 2 unless given)");
}

int cmd_demo(Options& o) {
  DemoOptions d;
  d.backend = o.backend;
  d.family = o.family;
  d.dir = o.dir;
  d.device = o.device;
  d.devices = o.devices;
  d.small = o.small;
  d.full = o.full;
  d.quiet = o.quiet;
  d.budget = o.budget;
  d.json_out = o.json_out;
  return run_demo(d);
}

}  // namespace peak::cli
