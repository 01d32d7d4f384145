#!/usr/bin/env node
// Opens a peak page (a report or stats HTML file, or a `peak serve` URL) in headless Chromium
// (Debian's /usr/bin/chromium through playwright-core) at 1280x800 and checks it as a reader
// would see it: no console errors, every chart drawn with data, the diff panes present, nothing
// wider than the window. Prints one JSON object; exits 1 when a check fails.
//
//   node web/test/check-page.js PAGE [--diffs N] [--charts N] [--screenshot FILE] [--full-page]
//        [--wait-for JS_EXPRESSION] [--timeout SECONDS] [--expect-text TEXT]...
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { chromium } = require('playwright-core');

function parseArgs(argv) {
  const a = { page: '', diffs: 0, charts: 1, screenshot: '', fullPage: false, waitFor: [],
              timeout: 120, expectText: [] };
  for (let i = 0; i < argv.length; ++i) {
    const k = argv[i];
    const next = () => argv[++i];
    if (k === '--diffs') a.diffs = Number(next());
    else if (k === '--charts') a.charts = Number(next());
    else if (k === '--screenshot') a.screenshot = next();
    else if (k === '--full-page') a.fullPage = true;
    else if (k === '--wait-for') a.waitFor.push(next());
    else if (k === '--timeout') a.timeout = Number(next());
    else if (k === '--expect-text') a.expectText.push(next());
    else if (!a.page) a.page = k;
    else throw new Error(`unknown argument ${k}`);
  }
  if (!a.page) throw new Error('usage: check-page.js PAGE [options]');
  return a;
}

// Everything the page shows, measured inside it.
async function inspect(page) {
  return page.evaluate(() => {
    const st = window.peakState || { charts: [] };
    const charts = st.charts.map((c) => {
      const points = c.data.datasets.reduce((n, ds) => n + ds.data.filter((v) => {
        if (v === null || v === undefined) return false;
        if (Array.isArray(v)) return v.length > 0;
        if (typeof v === 'object') return v.y !== null && v.y !== undefined;
        return Number.isFinite(v);
      }).length, 0);
      // Painted pixels: a canvas with data has many non-transparent pixels.
      const canvas = c.canvas;
      const ctx = canvas.getContext('2d');
      const img = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
      let painted = 0;
      for (let i = 3; i < img.length; i += 4) if (img[i] !== 0) painted++;
      const r = canvas.getBoundingClientRect();
      return { label: c.peakLabel, type: c.config.type, points, painted,
               width: Math.round(r.width), height: Math.round(r.height) };
    });
    return {
      kind: st.kind,
      renders: st.renders || 0,
      polls: st.polls || 0,
      canvases: document.querySelectorAll('canvas').length,
      charts,
      diffPanes: document.querySelectorAll('.diff-pane').length,
      diffFiles: document.querySelectorAll('.diff-pane .d2h-file-wrapper').length,
      highlighted: document.querySelectorAll('.diff-pane .hljs, .diff-pane [class^="hljs-"]').length,
      notes: Array.from(document.querySelectorAll('#notes li')).map((li) => li.textContent),
      live: (document.getElementById('live') || {}).textContent || '',
      scrollWidth: document.documentElement.scrollWidth,
      clientWidth: document.documentElement.clientWidth,
      title: document.title,
      h1: (document.querySelector('h1') || {}).textContent || '',
      text: document.body.textContent,
    };
  });
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const url = /^https?:/.test(a.page) ? a.page : 'file://' + path.resolve(a.page);
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'peak-chromium-'));
  // A fresh profile (--user-data-dir) for every run.
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.PEAK_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1280, height: 800 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const failures = [];
  const consoleErrors = [];
  const requests = [];
  let result = {};
  try {
    const page = browser.pages()[0] || await browser.newPage();
    page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
    page.on('pageerror', (e) => consoleErrors.push(String(e)));
    page.on('request', (r) => { if (!r.url().startsWith(url.split('#')[0].replace(/\/[^/]*$/, '/')) && !r.url().startsWith('data:')) requests.push(r.url()); });
    await page.goto(url, { waitUntil: 'load', timeout: a.timeout * 1000 });
    await page.waitForFunction(() => window.peakState && window.peakState.renders > 0, null, { timeout: 30000 });
    for (const expr of a.waitFor)
      await page.waitForFunction(expr, null, { timeout: a.timeout * 1000, polling: 500 });
    result = await inspect(page);
    if (a.screenshot) await page.screenshot({ path: a.screenshot, fullPage: a.fullPage });
  } catch (e) {
    failures.push(String(e.message || e).split('\n')[0]);
  } finally {
    await browser.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
  if (consoleErrors.length) failures.push(`console errors: ${consoleErrors.join(' | ')}`);
  if (requests.length) failures.push(`requests outside the page: ${requests.join(' ')}`);
  if (result.charts) {
    if (result.charts.length < a.charts) failures.push(`${result.charts.length} chart(s), expected at least ${a.charts}`);
    if (result.canvases !== result.charts.length) failures.push(`${result.canvases} canvases for ${result.charts.length} charts`);
    for (const c of result.charts) {
      if (c.points === 0) failures.push(`chart "${c.label}" has no data`);
      if (c.painted < 500) failures.push(`chart "${c.label}" is blank (${c.painted} painted pixels)`);
      if (c.width < 200 || c.height < 150) failures.push(`chart "${c.label}" is ${c.width}x${c.height}`);
    }
    if (result.diffFiles < a.diffs) failures.push(`${result.diffFiles} diff file(s) drawn, expected at least ${a.diffs}`);
    if (a.diffs > 0 && result.highlighted === 0) failures.push('the diffs are not syntax-highlighted');
    if (result.scrollWidth > result.clientWidth + 1) failures.push(`the page is ${result.scrollWidth} px wide in a ${result.clientWidth} px window`);
    for (const t of a.expectText) if (!result.text.includes(t)) failures.push(`the page does not show "${t}"`);
  }
  const out = Object.assign({}, result, { text: undefined, consoleErrors, failures, ok: failures.length === 0 });
  process.stdout.write(JSON.stringify(out, null, 1) + '\n');
  process.exit(failures.length ? 1 : 0);
}

main().catch((e) => { process.stdout.write(JSON.stringify({ ok: false, failures: [String(e)] }) + '\n'); process.exit(1); });
