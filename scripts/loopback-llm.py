#!/usr/bin/env python3
"""A loopback OpenAI-compatible server for measuring peak's first contact with a model.

Python 3 standard library only. It serves, on 127.0.0.1 (a free port unless --port is given):

  GET  /v1/models/MODEL     200 with the model object (404 with --model-missing)
  GET  /v1/models           the listing: MODEL (or only "other-model" with --model-missing)
  POST /v1/chat/completions a chat completion whose content is the recorded reply of the same
                            transformation pass in --recordings (matched by the prompt's
                            "# Transformation:" and "## This pass (i of n)" lines, because the
                            prompt key differs on another device), else one small fenced code
                            block (what `peak doctor --llm` asks for)

Faults, to see how peak reacts:

  --all-status 401          every request is answered with this HTTP status (an OpenAI-style
                            error body)
  --hang                    every request is read, then never answered (the connection stays
                            open until the server stops)
  --post-faults LIST        the first POSTs to /chat/completions get these answers, one each, in
                            order; later POSTs are answered normally. Items: an HTTP status
                            ("500"), "429" (with Retry-After: --retry-after seconds), "cut" (a
                            200 whose body stops half-way through the promised Content-Length,
                            then the connection closes), "drop" (the connection closes with
                            nothing sent)

Every request is logged to --log as one JSON line: time, method, path, status answered, whether an
Authorization header came (never its value), and which recording answered. --port-file receives
the port once the server listens. SIGTERM or SIGINT stops it.
"""
import argparse
import http.server
import json
import os
import re
import signal
import sys
import threading
import time

TITLE = re.compile(r"^# Transformation: .*$", re.M)
PASS = re.compile(r"^## This pass \((\d+) of (\d+)\): edit the (\w+) region", re.M)

DOCTOR_REPLY = "```c\nx = 1;\n```\n"


def load_recordings(folder):
    """(title line, pass line) -> (file name, reply) for every usable recording."""
    table = {}
    if not folder:
        return table
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".json") or name == "device.json":
            continue
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            rec = json.load(f)
        if rec.get("status") not in ("ok",):
            continue
        key = prompt_signature(rec.get("user", ""))
        if key and key not in table:  # the first (lowest seq) recording of a pass answers
            table[key] = (name, rec["reply"])
    return table


def prompt_signature(user):
    t, p = TITLE.search(user), PASS.search(user)
    if not t or not p:
        return None
    return (t.group(0).strip(), p.group(0).strip())


class State:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.posts = 0
        self.faults = [x for x in args.post_faults.split(",") if x] if args.post_faults else []
        self.recordings = load_recordings(args.recordings)
        self.log = open(args.log, "a", encoding="utf-8") if args.log else None
        self.stopping = threading.Event()

    def record(self, **entry):
        entry["t"] = time.time()
        with self.lock:
            if self.log:
                self.log.write(json.dumps(entry) + "\n")
                self.log.flush()


def error_body(status, model):
    messages = {
        401: ("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"),
        403: ("You are not allowed to use this model.", "invalid_request_error", "forbidden"),
        404: (f"The model `{model}` does not exist or you do not have access to it.",
              "invalid_request_error", "model_not_found"),
        429: ("Rate limit reached for requests. Please try again later.", "requests",
              "rate_limit_exceeded"),
    }
    msg, typ, code = messages.get(status, ("The server had an error while processing your request.",
                                           "server_error", None))
    return json.dumps({"error": {"message": msg, "type": typ, "param": None, "code": code}})


class Handler(http.server.BaseHTTPRequestHandler):
    server_version = "loopback-llm/1"
    protocol_version = "HTTP/1.0"  # one request per connection: the log counts requests

    def log_message(self, fmt, *args):  # quiet: the JSON log says everything
        pass

    @property
    def state(self):
        return self.server.state

    def send_json(self, status, body, extra_headers=()):
        data = body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in extra_headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def common(self, method):
        st = self.state
        args = st.args
        base = args.base.rstrip("/")
        path = self.path.split("?", 1)[0]
        auth = "Authorization" in self.headers
        body = b""
        if method == "POST":
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n > 0 else b""
        if args.hang:
            st.record(method=method, path=path, status=0, auth=auth, fault="hang")
            st.stopping.wait()
            self.close_connection = True
            return
        if args.all_status:
            st.record(method=method, path=path, status=args.all_status, auth=auth)
            return self.send_json(args.all_status, error_body(args.all_status, args.model))
        if method == "GET" and path == f"{base}/models/{args.model}":
            if args.model_missing:
                st.record(method=method, path=path, status=404, auth=auth)
                return self.send_json(404, error_body(404, args.model))
            st.record(method=method, path=path, status=200, auth=auth)
            return self.send_json(200, json.dumps(
                {"id": args.model, "object": "model", "created": 0, "owned_by": "loopback"}))
        if method == "GET" and path == f"{base}/models":
            ids = ["other-model"] if args.model_missing else [args.model]
            st.record(method=method, path=path, status=200, auth=auth)
            return self.send_json(200, json.dumps({"object": "list", "data": [
                {"id": i, "object": "model", "created": 0, "owned_by": "loopback"} for i in ids]}))
        if method == "POST" and path == f"{base}/chat/completions":
            return self.chat(path, body, auth)
        st.record(method=method, path=path, status=404, auth=auth)
        return self.send_json(404, json.dumps({"error": {"message": f"no route {path}"}}))

    def chat(self, path, body, auth):
        st = self.state
        args = st.args
        with st.lock:
            index = st.posts
            st.posts += 1
        fault = st.faults[index] if index < len(st.faults) else None
        try:
            req = json.loads(body.decode("utf-8"))
            model = req.get("model", "")
            user = "".join(m.get("content", "") for m in req.get("messages", [])
                           if m.get("role") == "user" and isinstance(m.get("content"), str))
        except (ValueError, AttributeError):
            st.record(method="POST", path=path, status=400, auth=auth, fault=None)
            return self.send_json(400, json.dumps({"error": {"message": "body is not JSON"}}))
        if model != args.model:
            st.record(method="POST", path=path, status=404, auth=auth, fault=None)
            return self.send_json(404, error_body(404, model))
        if fault == "drop":
            st.record(method="POST", path=path, status=0, auth=auth, fault="drop")
            self.close_connection = True
            return
        if fault and fault not in ("cut",):
            status = int(fault)
            headers = [("Retry-After", str(args.retry_after))] if status == 429 else []
            st.record(method="POST", path=path, status=status, auth=auth, fault=fault)
            return self.send_json(status, error_body(status, args.model), headers)
        sig = prompt_signature(user)
        answered_by, content = "generic", DOCTOR_REPLY
        if sig and sig in st.recordings:
            answered_by, content = st.recordings[sig]
        elif sig:
            answered_by = "no recording for " + sig[1]
        reply = json.dumps({
            "id": f"chatcmpl-loopback-{index}", "object": "chat.completion",
            "created": int(time.time()), "model": args.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(body) // 4, "completion_tokens": len(content) // 4,
                      "total_tokens": (len(body) + len(content)) // 4},
        })
        if fault == "cut":
            data = reply.encode("utf-8")
            st.record(method="POST", path=path, status=200, auth=auth, fault="cut",
                      answered_by=answered_by)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        st.record(method="POST", path=path, status=200, auth=auth, fault=None,
                  answered_by=answered_by)
        return self.send_json(200, reply)

    def do_GET(self):
        self.common("GET")

    def do_POST(self):
        self.common("POST")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--log")
    ap.add_argument("--model", default="m")
    ap.add_argument("--base", default="/v1")
    ap.add_argument("--recordings", help="a recording folder (recordings/hlsl-fp32)")
    ap.add_argument("--all-status", type=int, default=0)
    ap.add_argument("--model-missing", action="store_true")
    ap.add_argument("--hang", action="store_true")
    ap.add_argument("--post-faults", default="")
    ap.add_argument("--retry-after", type=int, default=1)
    args = ap.parse_args()

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    srv.daemon_threads = True
    srv.state = State(args)
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{srv.server_address[1]}\n")
        os.replace(tmp, args.port_file)

    def stop(*_):
        srv.state.stopping.set()
        threading.Thread(target=srv.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    srv.serve_forever(poll_interval=0.1)
    srv.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
