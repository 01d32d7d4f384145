// Shared helpers of the MCP tests: the peak binary, the committed HLSL recording (read by step
// label, so any re-recording of it works), and an MCP client from the official TypeScript SDK
// connected to `peak mcp` over stdio.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CreateMessageRequestSchema } from '@modelcontextprotocol/sdk/types.js';

export const SOURCE_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const PEAK = process.env.PEAK_BIN || path.join(SOURCE_DIR, 'build', 'peak');
export const RECORDING = path.join(SOURCE_DIR, 'recordings', 'hlsl-fp32');
// Small shapes and one tuning configuration per step keep a campaign short on lavapipe.
export const EVAL = { small: true, budget: 1 };
export const LONG = 20 * 60 * 1000;

export function tempRoot(name) {
  return fs.mkdtempSync(path.join(os.tmpdir(), `peak-mcp-${name}-`));
}

// step label ("tb-tiling pass 2/3 (device)") -> recorded replies that succeeded, in order.
export function recordedReplies(dir = RECORDING) {
  const replies = new Map();
  const files = fs.readdirSync(dir).filter((f) => /^\d+-[0-9a-f]+\.json$/.test(f)).sort();
  for (const f of files) {
    const r = JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'));
    if (r.status !== 'ok') continue;
    if (!replies.has(r.step_label)) replies.set(r.step_label, []);
    replies.get(r.step_label).push(r.reply);
  }
  return replies;
}

export function replyFor(replies, stepLabel) {
  const list = replies.get(stepLabel);
  if (!list || list.length === 0) throw new Error(`the recording has no reply for "${stepLabel}"`);
  return list[0];
}

// Writes every message of a session to a file (PEAK_MCP_TRANSCRIPT), long texts shortened: the
// transcript in docs/mcp.md comes from here.
class LoggingTransport {
  constructor(inner, file) {
    this.inner = inner;
    this.file = file;
    fs.writeFileSync(file, '');
  }
  log(dir, m) {
    const short = JSON.stringify(m, (k, v) => (typeof v === 'string' && v.length > 160
      ? `${v.slice(0, 150)}… (${v.length} chars)` : v));
    fs.appendFileSync(this.file, `${dir} ${short}\n`);
  }
  async start() {
    this.inner.onmessage = (m, e) => { this.log('<-', m); this.onmessage?.(m, e); };
    this.inner.onclose = () => this.onclose?.();
    this.inner.onerror = (e) => this.onerror?.(e);
    return this.inner.start();
  }
  async send(m, o) { this.log('->', m); return this.inner.send(m, o); }
  async close() { return this.inner.close(); }
  setProtocolVersion(v) { this.inner.setProtocolVersion?.(v); }
}

// A client of `peak mcp --root ROOT` over stdio. `sampling`: a handler for
// sampling/createMessage (the client then offers the sampling capability).
export async function connect(root, { sampling, name = 'peak-test-agent' } = {}) {
  const transport = new StdioClientTransport({
    command: PEAK,
    args: ['mcp', '--root', root],
    cwd: root,
    env: { ...process.env },
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (d) => { stderr += d.toString(); });
  const client = new Client(
    { name, version: '1.0.0' },
    { capabilities: sampling ? { sampling: {} } : {} },
  );
  if (sampling) client.setRequestHandler(CreateMessageRequestSchema, sampling);
  const file = process.env.PEAK_MCP_TRANSCRIPT;
  await client.connect(file ? new LoggingTransport(transport, file) : transport);
  return { client, transport, stderr: () => stderr };
}

// Calls a tool with a long timeout that restarts on every progress notification.
export async function call(client, name, args = {}, { onprogress, signal } = {}) {
  return client.callTool({ name, arguments: args }, undefined, {
    timeout: LONG,
    resetTimeoutOnProgress: true,
    onprogress,
    signal,
  });
}

// The structured result of a tool call that must not be an error.
export function ok(result, what) {
  if (result.isError) throw new Error(`${what}: ${result.content?.[0]?.text}`);
  return result.structuredContent;
}

export function errorText(result) {
  return result.isError ? result.content?.[0]?.text ?? '' : '';
}

export function peakCli(args, cwd) {
  return spawnSync(PEAK, args, { cwd, encoding: 'utf8', timeout: LONG });
}

export function integrityCheck(workspace) {
  const r = spawnSync('sqlite3', [path.join(workspace, '.peak', 'peak.db'), 'PRAGMA integrity_check'],
    { encoding: 'utf8' });
  return r.stdout.trim();
}

// `peak mcp --http 127.0.0.1:0 ...`: resolves with { url, child } once it listens.
export function startHttp(root, { env = {}, args = [] } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(PEAK, ['mcp', '--http', '127.0.0.1:0', '--root', root, ...args], {
      cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (d) => {
      err += d.toString();
      const m = err.match(/listening on (http:\/\/\S+\/mcp)/);
      if (m) resolve({ url: m[1], child, stderr: () => err });
    });
    child.on('exit', (code) => reject(new Error(`peak mcp --http exited (${code}): ${err}`)));
  });
}
