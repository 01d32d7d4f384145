// The client lends peak its model: `run` with llm "mcp" sends each pass's prompt back as
// sampling/createMessage, and the client's sampling handler answers from the committed recording
// (by the step label peak puts in the request's metadata). While the last step is being
// evaluated the client disconnects: the server stops the step at its next safe point, the store
// stays consistent, and `peak run --resume` finishes the campaign by replaying what the sampling
// session recorded.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import {
  EVAL, call, connect, integrityCheck, ok, peakCli, recordedReplies, replyFor, tempRoot,
} from './lib.mjs';

test('sampling campaign over stdio, a disconnect mid-step, then run --resume', async () => {
  const root = tempRoot('sampling');
  const replies = recordedReplies();
  const asked = [];
  const lastLabel = [...replies.keys()].at(-1);
  const lastStep = lastLabel.split(' ')[0];
  const t0 = Date.now();
  const { client, transport } = await connect(root, {
    sampling: async (req) => {
      const label = req.params.metadata?.['peak/step'];
      asked.push(label);
      assert.equal(req.params.messages[0].role, 'user');
      assert.ok(req.params.systemPrompt.length > 0);
      return {
        role: 'assistant',
        model: 'recorded-hlsl-fp32',
        stopReason: 'endTurn',
        content: { type: 'text', text: replyFor(replies, label) },
      };
    },
  });
  ok(await call(client, 'init', { context: 'matmul-hlsl-fp32', dir: 'ws' }), 'init');
  const ws = path.join(root, 'ws');

  // Disconnect once the last step's candidate is being evaluated (all its passes answered).
  let disconnected;
  const gone = new Promise((resolve) => { disconnected = resolve; });
  const lines = [];
  const running = call(client, 'run', { sequence: 'hlsl-fp32-short', llm: 'mcp', ...EVAL }, {
    onprogress: (p) => {
      lines.push(p.message);
      if (p.message?.startsWith(`${lastStep}: evaluating the candidate`)) disconnected();
    },
  }).then((r) => ({ answered: r }), (e) => ({ rejected: e.message }));
  const first = await Promise.race([gone.then(() => 'disconnect'), running]);
  assert.equal(first, 'disconnect', `the run ended before its last step was evaluated: ${lines.join(' | ')}`);
  const midway = ((Date.now() - t0) / 1000).toFixed(1);
  const pid = transport.pid;
  await transport.close();  // the client goes away mid-step
  // The server answers the stopped step if the client still reads (every request gets exactly
  // one response); a client already gone sees its request rejected by the closed connection.
  const outcome = await running;
  if (outcome.answered) {
    const r = outcome.answered.structuredContent;
    assert.equal(r.cancelled, true, JSON.stringify(r));
    assert.equal(r.steps_done, 2, JSON.stringify(r));
    assert.equal(r.steps.at(-1).checkpoint, null, JSON.stringify(r));
  } else {
    assert.match(outcome.rejected, /closed/i);
  }
  assert.deepEqual(asked, [...replies.keys()], 'every pass was asked through sampling, in order');

  // The server stops the step and exits; wait until the store is no longer written.
  for (let i = 0; i < 600 && isAlive(pid); i++) await sleep(100);
  assert.equal(integrityCheck(ws), 'ok');
  const log = JSON.parse(peakCli(['--json', 'log'], ws).stdout);
  assert.equal(log.length, 3, 'seed and two steps: the interrupted step made no checkpoint');

  // The recording made through sampling replays: run --resume finishes the last step from it.
  const rec = path.join(ws, '.peak', 'recording');
  const recorded = fs.readdirSync(rec).filter((f) => /^\d+-[0-9a-f]+\.json$/.test(f)).sort();
  assert.equal(recorded.length, asked.length);
  assert.match(JSON.parse(fs.readFileSync(path.join(rec, recorded[0]), 'utf8')).producer, /^mcp:/);
  const resumed = peakCli(['-q', '--json', 'run', 'hlsl-fp32-short', '--resume', '--llm', `replay:${rec}`,
    '--small', '--budget', String(EVAL.budget)], ws);
  assert.equal(resumed.status, 0, resumed.stderr + resumed.stdout);
  const r = JSON.parse(resumed.stdout);
  assert.equal(r.disposition, 'passed');
  const after = JSON.parse(peakCli(['--json', 'log'], ws).stdout);
  assert.equal(after.length, 4);
  assert.equal(after[0].transformation, lastStep);
  console.log(`sampling-driven HLSL campaign: disconnect after ${midway} s, finished by ` +
    `run --resume at ${((Date.now() - t0) / 1000).toFixed(1)} s`);
});

function isAlive(pid) {
  try { process.kill(pid, 0); return true; } catch { return false; }
}
function sleep(ms) { return new Promise((r) => setTimeout(r, ms)); }
