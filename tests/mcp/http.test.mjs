// Streamable HTTP: the SDK's HTTP client runs a step with progress on an event stream; requests
// without a session, with a foreign Origin, a wrong token or an unknown protocol version are
// refused; a non-loopback bind without a token does not start.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { EVAL, PEAK, call, ok, startHttp, tempRoot } from './lib.mjs';

const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'fetch', version: '0' } } };
const post = (url, body, headers = {}) => fetch(url, { method: 'POST', headers: {
  'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
body: typeof body === 'string' ? body : JSON.stringify(body) });

test('the SDK HTTP client evaluates a checkpoint with progress on an event stream', async () => {
  const root = tempRoot('http');
  const { url, child } = await startHttp(root);
  const client = new Client({ name: 'peak-http-test', version: '1.0.0' });
  try {
    await client.connect(new StreamableHTTPClientTransport(new URL(url)));
    ok(await call(client, 'init', { context: 'matmul-hlsl-fp32', dir: 'ws' }), 'init');
    let progress = 0;
    const ev = ok(await call(client, 'evaluate', { ref: 'seed', ...EVAL },
      { onprogress: () => { progress++; } }), 'evaluate');
    assert.equal(ev.disposition, 'passed', ev.message);
    assert.ok(progress > 0);
    assert.match(ok(await call(client, 'report', { format: 'text' }), 'report').report, /seed/);
  } finally {
    await client.close();
    child.kill('SIGTERM');
  }
});

test('sessions, Origin, protocol version and malformed bodies', async () => {
  const root = tempRoot('http-bad');
  const { url, child } = await startHttp(root);
  try {
    assert.equal((await post(url, { jsonrpc: '2.0', id: 2, method: 'ping' })).status, 400);
    assert.equal((await post(url, { jsonrpc: '2.0', id: 2, method: 'ping' }, { 'Mcp-Session-Id': 'nope' })).status, 404);
    assert.equal((await post(url, INIT, { Origin: 'http://evil.example' })).status, 403);
    const parse = await post(url, '{not json');
    assert.equal(parse.status, 400);
    assert.equal((await parse.json()).error.code, -32700);
    const init = await post(url, INIT);
    assert.equal(init.status, 200);
    const sid = init.headers.get('mcp-session-id');
    assert.match(sid, /^[0-9a-f]{32}$/);
    assert.equal((await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' },
      { 'Mcp-Session-Id': sid })).status, 202);
    assert.equal((await post(url, { jsonrpc: '2.0', id: 3, method: 'ping' },
      { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '1999-01-01' })).status, 400);
    const ping = await post(url, { jsonrpc: '2.0', id: 4, method: 'ping' },
      { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-11-25' });
    assert.deepEqual((await ping.json()).result, {});
    assert.equal((await fetch(url)).status, 405);
    assert.equal((await fetch(url, { method: 'DELETE', headers: { 'Mcp-Session-Id': sid } })).status, 200);
    assert.equal((await post(url, { jsonrpc: '2.0', id: 5, method: 'ping' }, { 'Mcp-Session-Id': sid })).status, 404);
  } finally {
    child.kill('SIGTERM');
  }
});

test('a bearer token from the environment is required when set', async () => {
  const root = tempRoot('http-token');
  const { url, child } = await startHttp(root, { env: { PEAK_MCP_TOKEN: 'a-long-test-secret' } });
  try {
    const denied = await post(url, INIT);
    assert.equal(denied.status, 401);
    assert.match(denied.headers.get('www-authenticate'), /^Bearer/);
    assert.equal((await post(url, INIT, { Authorization: 'Bearer wrong-secret-value' })).status, 401);
    assert.equal((await post(url, INIT, { Authorization: 'Bearer a-long-test-secret' })).status, 200);
  } finally {
    child.kill('SIGTERM');
  }
});

test('listening beyond loopback without a token is refused', () => {
  const env = { ...process.env };
  delete env.PEAK_MCP_TOKEN;
  const r = spawnSync(PEAK, ['mcp', '--http', '0.0.0.0:0'], { env, encoding: 'utf8', timeout: 30000 });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /refusing to listen on 0\.0\.0\.0 without a token.*PEAK_MCP_TOKEN/s);
});
