// An agent drives the whole HLSL campaign through `peak mcp` over stdio, in manual mode: it reads
// each pending prompt and answers it with the committed recording's reply for that step.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { EVAL, call, connect, ok, recordedReplies, replyFor, tempRoot } from './lib.mjs';

test('manual-mode HLSL campaign driven by the SDK client over stdio', async () => {
  const root = tempRoot('manual');
  const replies = recordedReplies();
  const t0 = Date.now();
  const { client } = await connect(root);
  try {
    const names = (await client.listTools()).tools.map((t) => t.name);
    for (const n of ['init', 'apply', 'respond', 'run', 'status', 'log', 'diff', 'report'])
      assert.ok(names.includes(n), `tool ${n} is listed`);

    const init = ok(await call(client, 'init', { context: 'matmul-hlsl-fp32', dir: 'ws' }), 'init');
    assert.equal(init.checkpoint, 1);
    const seq = ok(await call(client, 'sequence_show', { name: 'hlsl-fp32-short' }), 'sequence_show');
    assert.ok(seq.steps.length >= 1);

    let progress = 0;
    let prompts = 0;
    for (const step of seq.steps) {
      for (let round = 0; ; round++) {
        assert.ok(round < 12, `${step.transformation} keeps asking`);
        const r = ok(await call(client, 'apply',
          { transformation: step.transformation, llm: 'manual', ...EVAL },
          { onprogress: () => { progress++; } }), `apply ${step.transformation}`);
        if (!r.pending) {
          assert.equal(r.disposition, 'passed', r.message);
          assert.ok(Number.isInteger(r.checkpoint));
          break;
        }
        assert.match(r.prompt.text, /# System/);
        const read = await client.readResource({ uri: r.prompt.uri });
        assert.equal(read.contents[0].text, r.prompt.text);
        ok(await call(client, 'respond', { id: r.prompt.id, reply: replyFor(replies, r.prompt.step) }),
          'respond');
        prompts++;
      }
    }
    assert.ok(progress > 0, 'progress notifications arrived');
    const total = [...replies.values()].reduce((n, l) => n + l.length, 0);
    assert.equal(prompts, total, 'every recorded pass was asked once');

    const log = ok(await call(client, 'log'), 'log');
    assert.equal(log.checkpoints.length, seq.steps.length + 1);
    assert.equal(log.checkpoints[0].transformation, seq.steps.at(-1).transformation);
    const diff = ok(await call(client, 'diff', { a: 'seed', b: 'HEAD' }), 'diff');
    assert.match(diff.diff, /^@@ /m);
    const report = ok(await call(client, 'report', { format: 'markdown' }), 'report');
    for (const step of seq.steps) assert.match(report.report, new RegExp(step.transformation));
    const show = ok(await call(client, 'show', { ref: 'HEAD' }), 'show');
    assert.ok(show.summary.bench.length > 0);
    const src = await client.readResource({ uri: `peak://checkpoints/${show.id}/source` });
    assert.equal(src.contents[0].text, show.source);

    // Manual answers are recorded like any driver's, for replay.
    const rec = path.join(root, 'ws', '.peak', 'recording');
    const files = fs.readdirSync(rec).filter((f) => /^\d+-[0-9a-f]+\.json$/.test(f));
    assert.equal(files.length, total);
    const first = JSON.parse(fs.readFileSync(path.join(rec, files.sort()[0]), 'utf8'));
    assert.match(first.producer, /over MCP/);
    console.log(`agent-driven HLSL campaign (manual mode, stdio, small shapes, budget 1): ` +
      `${((Date.now() - t0) / 1000).toFixed(1)} s`);
  } finally {
    await client.close();
  }
});
