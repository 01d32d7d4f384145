// Bad input never ends the server: unknown tools, wrong argument types, paths outside the root,
// malformed JSON-RPC, and a step cancelled midway (the store stays consistent and the run resumes).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import readline from 'node:readline';
import { test } from 'node:test';

import { McpError } from '@modelcontextprotocol/sdk/types.js';

import { EVAL, PEAK, call, connect, errorText, integrityCheck, ok, tempRoot } from './lib.mjs';

test('unknown tools, wrong arguments and paths outside the root are refused with a way out', async () => {
  const root = tempRoot('bad');
  const { client } = await connect(root);
  try {
    await assert.rejects(call(client, 'no_such_tool'), (e) => e instanceof McpError &&
      e.code === -32602 && /unknown tool 'no_such_tool'.*apply/.test(e.message));
    assert.match(errorText(await call(client, 'log')), /no workspace yet: call init/);
    assert.match(errorText(await call(client, 'init', { context: 42 })),
      /argument 'context' must be a string \(got 42\)/);
    assert.match(errorText(await call(client, 'init', {})), /missing required argument 'context'/);
    assert.match(errorText(await call(client, 'init', { context: 'matmul-hlsl-fp32', colour: 'red' })),
      /unknown argument 'colour'/);
    assert.match(errorText(await call(client, 'init', { context: '/etc' })), /outside the folders/);
    assert.match(errorText(await call(client, 'init', { context: 'matmul-hlsl-fp32', dir: '../escape' })),
      /outside the folders/);
    ok(await call(client, 'init', { context: 'matmul-hlsl-fp32', dir: 'ws' }), 'init');
    assert.match(errorText(await call(client, 'log', { workspace: '/tmp' })), /outside the folders/);
    assert.match(errorText(await call(client, 'apply', { transformation: 'refactor', llm: 'command:sh -c id' })),
      /not available over MCP/);
    assert.match(errorText(await call(client, 'apply', { transformation: 'refactor', llm: 'replay:/etc' })),
      /outside the folders/);
    assert.match(errorText(await call(client, 'apply', { transformation: 'refactor', llm: 'openai:m@http://example.invalid/v1' })),
      /URL in the llm spec is not accepted/);
    assert.match(errorText(await call(client, 'apply', { transformation: 'refactor', llm: 'mcp' })),
      /did not offer the sampling capability/);
    assert.match(errorText(await call(client, 'apply', { transformation: 'refactr', budget: 'many' })),
      /'budget' must be an integer/);
    assert.match(errorText(await call(client, 'apply', { transformation: 'refactr', ...EVAL })),
      /unknown transformation 'refactr'; did you mean 'refactor'/);
    assert.match(errorText(await call(client, 'show', { ref: '99' })), /99/);
    assert.match(errorText(await call(client, 'report', { format: 'pdf' })), /must be one of/);
    assert.match(errorText(await call(client, 'respond', { id: '7', reply: 'x' })), /no manual prompt 0007/);
    assert.match(errorText(await call(client, 'transformation_write', { text: 'not a transformation' })),
      /was not written/);
    await assert.rejects(client.readResource({ uri: 'file:///etc/passwd' }), /unknown resource/);
    // Still answering.
    assert.equal(ok(await call(client, 'log'), 'log').checkpoints.length, 1);
  } finally {
    await client.close();
  }
});

test('malformed JSON-RPC is answered with the right error and the server keeps serving', async () => {
  const root = tempRoot('rpc');
  const child = spawn(PEAK, ['mcp', '--root', root], { cwd: root, stdio: ['pipe', 'pipe', 'ignore'] });
  const lines = readline.createInterface({ input: child.stdout });
  const answers = [];
  const waiters = [];
  lines.on('line', (l) => { const m = JSON.parse(l); (waiters.shift() ?? ((x) => answers.push(x)))(m); });
  const next = () => (answers.length ? Promise.resolve(answers.shift()) : new Promise((r) => waiters.push(r)));
  const send = async (text) => { child.stdin.write(`${text}\n`); return next(); };
  try {
    assert.equal((await send('this is not json')).error.code, -32700);
    assert.equal((await send('{"jsonrpc":"1.0","id":1,"method":"ping"}')).error.code, -32600);
    assert.equal((await send('[{"jsonrpc":"2.0","id":1,"method":"ping"}]')).error.code, -32600);
    assert.equal((await send('{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}')).error.code, -32600);
    assert.equal((await send('{"jsonrpc":"2.0","id":2,"method":"tools/list"}')).error.code, -32600);
    const init = await send(JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'initialize',
      params: { protocolVersion: '1999-01-01', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } }));
    assert.equal(init.result.protocolVersion, '2025-11-25');
    child.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n');
    assert.equal((await send('{"jsonrpc":"2.0","id":4,"method":"tools/list","params":[1]}')).error.code, -32602);
    assert.equal((await send('{"jsonrpc":"2.0","id":5,"method":"no/such/method"}')).error.code, -32601);
    assert.equal((await send('{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"status","arguments":[]}}')).error.code, -32602);
    assert.equal((await send('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}')).error.code, -32602);
    const list = await send('{"jsonrpc":"2.0","id":8,"method":"tools/list"}');
    assert.ok(list.result.tools.length > 10);
    for (const t of list.result.tools) {
      assert.equal(t.inputSchema.type, 'object');
      assert.equal(t.outputSchema.type, 'object');
    }
  } finally {
    child.stdin.end();
    await new Promise((r) => child.on('exit', r));
  }
});

test('a cancelled step leaves the store consistent; the server answers meanwhile; run resumes', async () => {
  const root = tempRoot('cancel');
  const { client } = await connect(root);
  try {
    ok(await call(client, 'init', { context: 'matmul-hlsl-fp32', dir: 'ws' }), 'init');
    const abort = new AbortController();
    let started;
    const progressed = new Promise((r) => { started = r; });
    const running = call(client, 'run', { sequence: 'hlsl-fp32-short', llm: 'manual', ...EVAL },
      { signal: abort.signal, onprogress: () => started() });
    await progressed;
    // While the step runs the server answers, and refuses a second step.
    const st = ok(await call(client, 'status'), 'status');
    assert.equal(st.job.tool, 'run');
    assert.equal(ok(await call(client, 'log'), 'log').checkpoints.length, 1);
    assert.match(errorText(await call(client, 'apply', { transformation: 'refactor' })), /busy: run is running/);
    assert.match(errorText(await call(client, 'checkout', { ref: 'seed' })), /busy/);
    abort.abort('the agent changed its mind');
    await assert.rejects(running, /changed its mind/);
    let status;
    for (let i = 0; i < 1200; i++) {
      status = ok(await call(client, 'status'), 'status');
      if (status.job === null) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(status.job, null, 'the step stopped');
    assert.equal(status.workflows[0].kind, 'run');
    assert.equal(status.workflows[0].status, 'interrupted');
    assert.equal(status.workflows[0].state.next_step, 0);
    assert.equal(ok(await call(client, 'log'), 'log').checkpoints.length, 1);
    assert.equal(integrityCheck(`${root}/ws`), 'ok');
    // The interrupted run continues where it stopped: at the first pass's prompt.
    const resumed = ok(await call(client, 'run', { sequence: 'hlsl-fp32-short', llm: 'manual', resume: true, ...EVAL }), 'run');
    assert.equal(resumed.pending, true);
    assert.equal(resumed.workflow, status.workflows[0].id);
    assert.match(resumed.prompt.step, /pass 1\//);
  } finally {
    await client.close();
  }
});
