// The official MCP conformance suite against `peak mcp --http`: every scenario passes except the
// ones listed (with their reasons) in conformance-baseline.yml, which need fixtures of the suite's
// reference server. The suite needs Node.js 22, installed with it by npm (the "node" package).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { startHttp, tempRoot } from './lib.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const NODE22 = path.join(HERE, 'node_modules', '.bin', 'node');
const SUITE = path.join(HERE, 'node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js');

test('conformance suite against peak mcp --http', async () => {
  const root = tempRoot('conformance');
  const { url, child } = await startHttp(root);
  try {
    const r = spawnSync(NODE22, [SUITE, 'server', '--url', url, '--suite', 'all',
      '--expected-failures', path.join(HERE, 'conformance-baseline.yml')],
    { cwd: root, encoding: 'utf8', timeout: 10 * 60 * 1000 });
    const summary = (r.stdout + r.stderr).split('\n').filter((l) => /^[✓✗]|^Total/.test(l));
    console.log(summary.join('\n'));
    assert.equal(r.status, 0, `conformance suite failed:\n${r.stdout.slice(-4000)}\n${r.stderr.slice(-2000)}`);
    const passed = summary.filter((l) => l.startsWith('✓')).map((l) => l.slice(2, l.indexOf(':')));
    for (const s of ['server-initialize', 'ping', 'tools-list', 'resources-list', 'logging-set-level',
      'server-sse-multiple-streams', 'dns-rebinding-protection'])
      assert.ok(passed.includes(s), `${s} passes`);
  } finally {
    child.kill('SIGTERM');
  }
});
