// peak's report and stats pages: everything is drawn from the JSON in #peak-data with Chart.js
// (and its error-bar and box-plot modules) and diff2html (with highlight.js). Inlined into every
// HTML page by peak (src/report/render_html.cpp). In `peak serve` the page polls body[data-live]
// for new JSON and redraws.
(function () {
  'use strict';

  const COLORS = {
    passed: '#2e7d32', compile_failed: '#c62828', invalid_config: '#8e24aa', incorrect: '#ef6c00',
    launch_failed: '#6d4c41', crashed: '#ad1457', timeout: '#5d4037', unwritten_output: '#f9a825',
    inputs_modified: '#00838f', nondeterministic: '#3949ab', faster_than_peak: '#d81b60',
    not_run: '#9e9e9e', llm_error: '#455a64', no_code: '#78909c', region_violation: '#b71c1c',
    running: '#1565c0', interrupted: '#757575', pruned: '#bdbdbd',
  };
  const SERIES = ['#1565c0', '#e65100', '#2e7d32', '#6a1b9a', '#c62828', '#00838f', '#827717',
                  '#4e342e', '#ad1457', '#37474f'];
  const PHASES = [
    ['llm_s', 'LLM', '#6a1b9a'], ['compile_s', 'compile', '#1565c0'],
    ['validate_s', 'validate', '#2e7d32'], ['tune_s', 'tune', '#ef6c00'],
    ['bench_s', 'final timing', '#c62828'],
  ];

  const state = { charts: [], kind: '', text: '', errors: [] };
  window.peakState = state;

  function colorOf(name, i) {
    return COLORS[name] || SERIES[i % SERIES.length];
  }

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      e.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
    }
    return e;
  }

  function fmt(v, digits) {
    if (v === undefined || v === null || !isFinite(v) || v === 0) return '-';
    return Number(v).toFixed(digits === undefined ? 1 : digits);
  }

  function table(headers, rows, cls) {
    return el('table', { class: cls || 'grid' },
      el('thead', {}, el('tr', {}, headers.map((h) => el('th', { text: h })))),
      el('tbody', {}, rows.map((r) => el('tr', {}, r.map((c) =>
        c instanceof Node ? el('td', {}, c) : el('td', { text: c === undefined ? '' : String(c) }))))));
  }

  function badge(disposition) {
    return el('span', { class: 'badge', style: `background:${colorOf(disposition, 0)}`, text: disposition });
  }

  function section(id, title, ...children) {
    return el('section', { id }, el('h2', { text: title }), ...children);
  }

  // A chart in a fixed-height box; `config` is a Chart.js configuration.
  function chart(box, config, label) {
    const canvas = el('canvas', { role: 'img', 'aria-label': label || '' });
    const holder = el('div', { class: 'chart' }, canvas);
    box.appendChild(holder);
    config.options = Object.assign({ responsive: true, maintainAspectRatio: false, animation: false },
                                   config.options || {});
    const c = new Chart(canvas, config);
    c.peakLabel = label || '';
    state.charts.push(c);
    return c;
  }

  function noData(text) {
    return el('p', { class: 'empty', text });
  }

  function stepLabel(s) {
    return s.checkpoint ? `#${s.checkpoint} ${s.transformation}` : `(failed) ${s.transformation}`;
  }

  // ---------------------------------------------------------------------------------------------
  // The report of one campaign

  function renderReport(app, r) {
    const p = r.provenance || {};
    const steps = r.steps || [];
    const measured = steps.filter((s) => s.checkpoint && (s.bench || []).length);
    // A memory-bound family headlines GB/s with its shares of the same-run copy and the bandwidth.
    const bytes = steps.some((s) => (s.bench || []).some((b) => b.headline === 'bytes'));
    const rate = bytes ? 'gbs' : 'gflops';
    const unit = bytes ? 'GB/s' : 'GFLOP/s';
    const roofed = measured.some((s) => s.bench.some((b) => b.gbs > 0));
    app.appendChild(el('header', {},
      el('h1', { text: `peak report: ${r.kernel}` }),
      el('p', { class: 'sub' }, `${r.source} · ${p.device || 'not evaluated yet'}`,
        p.backend ? ` (${p.backend})` : '', p.peak_tflops ? ` · peak ${fmt(p.peak_tflops, 3)} TFLOP/s` : '',
        r.memory_gbs ? ` · documented memory bandwidth ${fmt(r.memory_gbs, 0)} GB/s` : '')));
    if ((r.notes || []).length)
      app.appendChild(el('div', { class: 'notes', id: 'notes' },
        el('strong', { text: 'Partial report: ' }), el('ul', {}, r.notes.map((n) => el('li', { text: n })))));
    if (r.live && r.live.running) app.appendChild(renderLive(r.live));

    const suited = steps.filter((s) => s.suite && (s.suite.rows || []).length);
    const nav = el('nav', {}, ['performance', ...(roofed ? ['roofline'] : []), 'speedup', 'tuning', 'costs', ...(suited.length ? ['suite'] : []),
      'steps', 'provenance'].map((id) => el('a', { href: `#${id}`, text: id })));
    app.appendChild(nav);

    // Performance along the sequence, per bench shape.
    const perf = section('performance', 'Performance along the sequence');
    const shapes = [...new Set(measured.flatMap((s) => s.bench.map((b) => b.shape)))];
    if (!shapes.length) perf.appendChild(noData('No step has been timed yet.'));
    const grid = el('div', { class: 'charts' });
    perf.appendChild(grid);
    for (const shape of shapes) {
      const box = el('div', { class: 'chartbox' }, el('h3', { text: shape }));
      grid.appendChild(box);
      const rows = measured.map((s) => s.bench.find((b) => b.shape === shape) || null);
      const labels = measured.map(stepLabel);
      const hasVendor = rows.some((b) => b && b.baseline_gflops > 0);
      const datasets = [{
        type: 'lineWithErrorBars', label: `${unit} (median, error bars p25..p75)`,
        data: rows.map((b) => b ? { y: b[rate], yMin: b[rate + '_low'], yMax: b[rate + '_high'] } : null),
        borderColor: SERIES[0], backgroundColor: SERIES[0], yAxisID: 'y',
      }];
      if (hasVendor && !bytes)
        datasets.push({
          type: 'lineWithErrorBars', label: `${rows.find((b) => b && b.baseline).baseline} GFLOP/s (same run)`,
          data: rows.map((b) => b && b.baseline_gflops > 0 ? {
            y: b.baseline_gflops,
            yMin: b.baseline_gflops_low || b.baseline_gflops,
            yMax: b.baseline_gflops_high || b.baseline_gflops,
          } : null),
          borderColor: '#757575', backgroundColor: '#757575', borderDash: [6, 4], yAxisID: 'y',
        });
      const pct = [];
      if (hasVendor)
        pct.push({ type: 'line', label: '% of vendor library', data: rows.map((b) => b ? b.pct_of_baseline : null),
                   borderColor: SERIES[1], backgroundColor: SERIES[1], yAxisID: 'pct' });
      for (const [key, label, color] of [['pct_of_copy', '% of copy (same run)', SERIES[3]],
                                         ['pct_of_bandwidth', '% of documented bandwidth', SERIES[4]]])
        if (bytes && rows.some((b) => b && b[key] > 0))
          pct.push({ type: 'line', label, data: rows.map((b) => b ? b[key] || null : null),
                     borderColor: color, backgroundColor: color, yAxisID: 'pct' });
      if (!bytes && rows.some((b) => b && b.pct_of_peak > 0))
        pct.push({ type: 'line', label: '% of peak', data: rows.map((b) => b ? b.pct_of_peak : null),
                   borderColor: SERIES[2], backgroundColor: SERIES[2], yAxisID: 'pct', borderDash: [2, 3] });
      chart(box, {
        type: 'lineWithErrorBars',
        data: { labels, datasets: datasets.concat(pct) },
        options: {
          scales: {
            y: { beginAtZero: true, title: { display: true, text: unit } },
            pct: { position: 'right', beginAtZero: true, grid: { drawOnChartArea: false },
                   title: { display: true, text: '%' }, display: pct.length > 0 },
          },
        },
      }, `performance ${shape}`);
    }
    perf.appendChild(summaryTable(steps, bytes));
    app.appendChild(perf);
    if (roofed) app.appendChild(renderRoofline(r, measured));

    // Parent -> child speedup.
    const sp = section('speedup', 'Speedup of each step over its parent');
    const children = measured.filter((s) => s.parent);
    if (!children.length) sp.appendChild(noData('No step after the seed has been timed yet.'));
    else {
      const box = el('div', { class: 'chartbox wide' });
      sp.appendChild(box);
      chart(box, {
        type: 'bar',
        data: {
          labels: children.map(stepLabel),
          datasets: shapes.map((shape, i) => ({
            label: shape, backgroundColor: SERIES[i % SERIES.length],
            data: children.map((s) => { const b = s.bench.find((x) => x.shape === shape); return b ? b.speedup_vs_parent : null; }),
          })),
        },
        options: { scales: { y: { beginAtZero: true, title: { display: true, text: '× parent' } } } },
      }, 'speedup over parent');
    }
    app.appendChild(sp);

    // Tuning configurations.
    const tu = section('tuning', 'Tuning configurations');
    const searched = steps.filter((s) => (s.configs || []).length || Object.keys(s.config_dispositions || {}).length);
    const timed = searched.filter((s) => s.configs.some((c) => c.score_ms > 0));
    const useGflops = timed.some((s) => s.configs.some((c) => c.score_gflops > 0));
    const tgrid = el('div', { class: 'charts' });
    tu.appendChild(tgrid);
    if (timed.length) {
      const box = el('div', { class: 'chartbox' }, el('h3', {
        text: useGflops ? 'Every configuration timed on the tuning shape (GFLOP/s)'
                        : 'Configurations timed on the tuning shape (ms; lower is better)' }));
      tgrid.appendChild(box);
      chart(box, {
        type: 'boxplot',
        data: {
          labels: timed.map(stepLabel),
          datasets: [{
            label: useGflops ? 'GFLOP/s per configuration' : 'median ms per configuration',
            backgroundColor: 'rgba(21,101,192,0.25)', borderColor: SERIES[0], itemRadius: 3,
            itemBackgroundColor: SERIES[0], outlierBackgroundColor: SERIES[0],
            data: timed.map((s) => s.configs.filter((c) => c.score_ms > 0)
              .map((c) => useGflops ? c.score_gflops : c.score_ms).filter((v) => v > 0)),
          }],
        },
        options: { scales: { y: { beginAtZero: true, title: { display: true, text: useGflops ? 'GFLOP/s' : 'ms' } } } },
      }, 'configuration distribution');
    }
    if (searched.length) {
      const dispositions = [...new Set(searched.flatMap((s) => Object.keys(s.config_dispositions || {})))];
      const box = el('div', { class: 'chartbox' }, el('h3', { text: 'Configurations by disposition (pruned: rejected by tuning_valid)' }));
      tgrid.appendChild(box);
      const ds = dispositions.map((d, i) => ({
        label: d, backgroundColor: colorOf(d, i),
        data: searched.map((s) => (s.config_dispositions || {})[d] || 0),
      }));
      if (searched.some((s) => s.pruned > 0))
        ds.push({ label: 'pruned', backgroundColor: COLORS.pruned, data: searched.map((s) => s.pruned || 0) });
      chart(box, {
        type: 'bar', data: { labels: searched.map(stepLabel), datasets: ds },
        options: { scales: { x: { stacked: true }, y: { stacked: true, type: ds.some((d) => d.label === 'pruned') ? 'logarithmic' : 'linear',
                                                       title: { display: true, text: 'configurations' } } } },
      }, 'configurations by disposition');
    } else {
      tu.appendChild(noData('No tuning search is recorded yet.'));
    }
    app.appendChild(tu);

    // Phase costs.
    const co = section('costs', 'Where the time went, per step');
    const costed = steps.filter((s) => s.costs && (s.costs.recorded || s.costs.llm_calls > 0 || s.costs.compile_cpu_s > 0));
    if (!costed.length) co.appendChild(noData('No phase times are recorded yet.'));
    else {
      const box = el('div', { class: 'chartbox wide' });
      co.appendChild(box);
      chart(box, {
        type: 'bar',
        data: {
          labels: costed.map(stepLabel),
          datasets: PHASES.map(([key, label, color]) => ({
            label, backgroundColor: color,
            data: costed.map((s) => key === 'compile_s' && !s.costs.recorded ? s.costs.compile_cpu_s : s.costs[key]),
          })),
        },
        options: { indexAxis: 'y', scales: { x: { stacked: true, title: { display: true, text: 'seconds (wall)' } }, y: { stacked: true } } },
      }, 'phase costs');
      co.appendChild(table(
        ['step', 'LLM s', 'LLM calls', 'prompt tokens', 'completion tokens', 'compile s (wall)',
         'compile s (sum of builds)', 'validate s', 'tune s', 'final timing s', 'GPU s (device timer)'],
        costed.map((s) => [stepLabel(s), fmt(s.costs.llm_s, 3), s.costs.llm_calls, s.costs.prompt_tokens,
          s.costs.completion_tokens, fmt(s.costs.compile_s, 2), fmt(s.costs.compile_cpu_s, 2),
          fmt(s.costs.validate_s, 2), fmt(s.costs.tune_s, 2), fmt(s.costs.bench_s, 2), fmt(s.costs.gpu_s, 3)])));
    }
    app.appendChild(co);

    // The shape suite (`peak bench`): the newest benchmark of each checkpoint that has one.
    if (suited.length) {
      const su = section('suite', 'Shape suite (peak bench)');
      for (const s of suited) {
        const b = s.suite;
        const basis = `of ${b.ratio_of || (b.baseline ? b.baseline : 'peak')}`;
        const byteSuite = b.headline === 'bytes';
        const vendor = b.baseline || 'vendor';
        const heads = byteSuite ? ['GB/s', '% copy', '% bandwidth', `${vendor} GB/s`] : ['GFLOP/s', `${vendor} GFLOP/s`];
        const cells = (x) => byteSuite ? [fmt(x.gbs), fmt(x.pct_of_copy), fmt(x.pct_of_bandwidth), fmt(x.baseline_gbs)]
                                       : [fmt(x.gflops), fmt(x.baseline_gflops)];
        // With a dispatch table (`peak tune --classes`) every row ran its class's configuration.
        const dispatched = b.dispatch > 0;
        su.appendChild(el('h3', { text: `${stepLabel(s)} · ` + (dispatched
          ? `one configuration per shape class (dispatch table of evaluation ${b.dispatch})`
          : `${b.config || 'no tuning parameters'}${b.default_config ? ' (default values: never tuned)' : ''}`) +
          ` · ${b.device || ''}${b.small ? ' · small suite' : ''}${b.created_at ? ' · ' + b.created_at : ''}` }));
        if (b.dispatch_note) su.appendChild(el('p', { class: 'sub', text: b.dispatch_note }));
        su.appendChild(table(['shape', 'class', b.dims_names || 'MxNxK', ...heads, `ratio ${basis}`, 'disposition',
          ...(dispatched ? ['configuration (dispatched class)'] : [])],
          b.rows.map((x) => [x.name, x.class, x.dims, ...cells(x), fmt(x.ratio, 3),
            x.disposition === 'passed' ? badge('passed') : el('span', {}, badge(x.disposition), ' ', x.message || ''),
            ...(dispatched ? [x.config ? `${x.config} (${x.dispatched_class || 'no class'})` : '-'] : [])])));
        su.appendChild(el('p', { class: 'sub', text: b.rated
          ? `geometric mean of the ratios ${basis}: ${fmt(b.geomean, 3)} (${fmt(100 * b.geomean)}%) over ${b.rated} of ${b.rows.length} shapes`
          : `geometric mean: - (no shape has a ratio ${basis})` }));
      }
      app.appendChild(su);
    }

    // Steps: attempts, configurations, resources, diff.
    const st = section('steps', 'Steps');
    for (const s of steps) st.appendChild(renderStep(s));
    app.appendChild(st);

    app.appendChild(renderProvenance(r));
  }

  // The bench table: GFLOP/s with its shares of the vendor library and the peak, or for a
  // memory-bound headline GB/s with its shares of the same-run copy, the documented bandwidth and
  // the vendor library (and GFLOP/s where the context gives flops).
  function summaryTable(steps, bytes) {
    const flops = steps.some((s) => (s.bench || []).some((b) => b.gflops > 0));
    const heads = bytes ? ['GB/s', '% copy', '% bandwidth', '% vendor', ...(flops ? ['GFLOP/s'] : [])]
                        : ['GFLOP/s', '% vendor', '% peak'];
    const measures = (b) => !b ? heads.map(() => '')
      : bytes ? [fmt(b.gbs), fmt(b.pct_of_copy), fmt(b.pct_of_bandwidth), fmt(b.pct_of_baseline), ...(flops ? [fmt(b.gflops)] : [])]
        : [fmt(b.gflops), fmt(b.pct_of_baseline), fmt(b.pct_of_peak)];
    const rows = [];
    for (const s of steps) {
      const bench = s.bench && s.bench.length ? s.bench : [null];
      bench.forEach((b, i) => rows.push([
        i ? '' : (s.checkpoint ? `#${s.checkpoint}` : '-'), i ? '' : s.transformation,
        i ? '' : badge(s.disposition), i ? '' : s.best_config, b ? b.shape : '', ...measures(b),
        b ? fmt(b.speedup_vs_seed, 2) : '', b ? fmt(b.speedup_vs_parent, 2) : '',
        b && b.spread ? `${(100 * b.spread).toFixed(1)}%` : '', b ? b.samples : '',
      ]));
    }
    return table(['ckpt', 'step', 'disposition', 'best configuration', 'shape', ...heads, '× seed', '× parent',
                  'spread', 'samples'], rows, 'grid summary');
  }

  // Every step on a roofline: attained GFLOP/s against arithmetic intensity (FLOPs per byte of the
  // context's traffic) under the device's compute ceiling (the documented peak of the precision)
  // and its bandwidth ceilings (the documented memory bandwidth, and the same-run copy's measured
  // rate where one was timed). A context without flops has no intensity: its steps' GB/s are shown
  // against the two bandwidth ceilings instead.
  function renderRoofline(r, measured) {
    const sec = section('roofline', 'Roofline');
    const box = el('div', { class: 'chartbox wide' });
    sec.appendChild(box);
    const rows = measured.flatMap((s) => s.bench.filter((b) => b.gbs > 0).map((b) => ({ s, b })));
    const copy = Math.max(0, ...rows.map(({ b }) => b.copy_gbs || 0));
    const bw = r.memory_gbs || 0;
    const peak = (r.peak_tflops || 0) * 1e3;
    const placed = rows.filter(({ b }) => b.intensity > 0);
    const ceilings = [];
    if (placed.length) {
      const xs = placed.map(({ b }) => b.intensity);
      const lo = Math.min(...xs, peak && bw ? peak / bw : Infinity) / 8;
      const hi = Math.max(...xs, peak && bw ? peak / bw : 0) * 8;
      const line = (gbs) => Array.from({ length: 49 }, (_, i) => {
        const x = lo * Math.pow(hi / lo, i / 48);
        return { x, y: peak > 0 ? Math.min(peak, gbs * x) : gbs * x };
      });
      if (bw > 0) ceilings.push({ label: `documented bandwidth ${fmt(bw, 0)} GB/s${peak ? `, peak ${fmt(peak, 0)} GFLOP/s` : ''}`, data: line(bw) });
      if (copy > 0) ceilings.push({ label: `measured copy ${fmt(copy, 0)} GB/s (same run)`, data: line(copy), borderDash: [6, 4] });
      sec.appendChild(el('p', { class: 'sub', text: 'Each step at each bench shape: FLOPs per byte of its traffic against attained GFLOP/s (log scales).' }));
      chart(box, {
        type: 'scatter',
        data: { datasets: [
          ...ceilings.map((c, i) => Object.assign({ type: 'line', pointRadius: 0, borderWidth: 2, fill: false,
            borderColor: i ? '#757575' : '#212121', backgroundColor: i ? '#757575' : '#212121' }, c)),
          ...measured.map((s, i) => ({ label: stepLabel(s), pointRadius: 5, backgroundColor: SERIES[i % SERIES.length],
            data: s.bench.filter((b) => b.intensity > 0).map((b) => ({ x: b.intensity, y: b.gflops })) })),
        ] },
        options: { scales: {
          x: { type: 'logarithmic', title: { display: true, text: 'arithmetic intensity (FLOP/byte)' } },
          y: { type: 'logarithmic', title: { display: true, text: 'GFLOP/s' } } } },
      }, 'roofline');
      return sec;
    }
    const shapes = [...new Set(rows.map(({ b }) => b.shape))];
    const labels = measured.map(stepLabel);
    const flat = (v) => labels.map(() => v);
    if (bw > 0) ceilings.push({ label: `documented bandwidth ${fmt(bw, 0)} GB/s`, data: flat(bw), borderColor: '#212121' });
    if (copy > 0) ceilings.push({ label: `measured copy ${fmt(copy, 0)} GB/s (same run)`, data: flat(copy), borderColor: '#757575', borderDash: [6, 4] });
    sec.appendChild(el('p', { class: 'sub', text: 'The context gives no flops (no arithmetic intensity): each step\'s GB/s under the bandwidth ceilings.' }));
    chart(box, {
      type: 'line',
      data: { labels, datasets: [
        ...ceilings.map((c) => Object.assign({ pointRadius: 0, borderWidth: 2, fill: false }, c)),
        ...shapes.map((shape, i) => ({ label: shape, backgroundColor: SERIES[i % SERIES.length], borderColor: SERIES[i % SERIES.length],
          data: measured.map((s) => { const b = s.bench.find((x) => x.shape === shape); return b && b.gbs > 0 ? b.gbs : null; }) })),
      ] },
      options: { scales: { y: { beginAtZero: true, title: { display: true, text: 'GB/s' } } } },
    }, 'roofline');
    return sec;
  }

  function renderLive(l) {
    const box = el('div', { class: 'live', id: 'live' },
      el('strong', { text: l.process_gone ? 'Interrupted run' : 'Run in progress' }),
      ` · workflow ${l.workflow} (${l.kind})`,
      l.transformation ? ` · ${l.transformation}, attempt ${l.attempt} (${l.phase})` : '');
    if (l.line) box.appendChild(el('div', { class: 'mono', text: l.line }));
    if (l.status) box.appendChild(el('div', { class: 'mono', id: 'live-status', text: l.status.trim() }));
    if ((l.configs || []).length) {
      const timedNow = l.configs.filter((c) => c.score_ms > 0);
      box.appendChild(el('div', { id: 'live-configs', text: `${timedNow.length} configuration(s) timed so far` }));
      if (timedNow.length) {
        const holder = el('div', { class: 'chartbox wide' });
        box.appendChild(holder);
        const useG = timedNow.some((c) => c.score_gflops > 0);
        chart(holder, {
          type: 'bar',
          data: {
            labels: timedNow.map((c) => c.config),
            datasets: [{ label: useG ? 'GFLOP/s on the tuning shape' : 'ms on the tuning shape', backgroundColor: SERIES[0],
                         data: timedNow.map((c) => useG ? c.score_gflops : c.score_ms) }],
          },
          options: { indexAxis: 'y', scales: { x: { beginAtZero: true } } },
        }, 'configurations so far');
      }
    }
    return box;
  }

  function renderStep(s) {
    const id = s.checkpoint ? `step-${s.checkpoint}` : `step-failed-${s.transformation}-${(s.attempt_rows[0] || {}).id || 0}`;
    const d = el('details', { class: 'step', id, open: state.open.has(id) || !s.checkpoint });
    d.addEventListener('toggle', () => { if (d.open) state.open.add(id); else state.open.delete(id); });
    d.appendChild(el('summary', {}, el('span', { class: 'step-title', text: stepLabel(s) }), ' ', badge(s.disposition),
      s.best_config ? el('span', { class: 'mono dim', text: `  ${s.best_config}` }) : '',
      s.attempts ? el('span', { class: 'dim', text: `  ${s.attempts} attempt(s)` }) : ''));
    if ((s.attempt_rows || []).length) {
      d.appendChild(el('h4', { text: 'Attempts' }));
      d.appendChild(table(['attempt', 'pass', 'region', 'LLM', 'tokens (prompt + completion)', 'latency s',
                           'disposition', 'message'],
        s.attempt_rows.map((a) => [a.attempt, a.pass > 0 ? a.pass : 'evaluation', a.region,
          a.pass > 0 ? `${a.driver}${a.model ? ':' + a.model : ''}` : '', a.pass > 0 ? `${a.prompt_tokens} + ${a.completion_tokens}` : '',
          a.pass > 0 ? fmt(a.latency_s, 3) : '', badge(a.disposition), el('pre', { class: 'msg', text: a.error || '' })]), 'grid attempts'));
    }
    if ((s.configs || []).length) {
      d.appendChild(el('h4', { text: `Tuning configurations (${s.configs.length} evaluated${s.space ? ` of a space of ${s.space}` : ''}${s.pruned ? `, ${s.pruned} pruned by tuning_valid` : ''})` }));
      d.appendChild(table(['configuration', 'disposition', 'compile s', 'checks', 'time ms', 'GFLOP/s', 'resources', ''],
        s.configs.map((c) => [el('span', { class: 'mono', text: c.config }), badge(c.disposition), fmt(c.compile_s, 2),
          c.checks ? `${c.checks - c.failed_checks}/${c.checks}` : '', fmt(c.score_ms, 4), fmt(c.score_gflops),
          c.resources, [c.best ? 'best' : '', c.top ? 'top' : ''].filter(Boolean).join(', ') + (c.message ? ` ${c.message}` : '')]),
        'grid configs'));
    }
    if (s.resources_raw && Object.keys(s.resources_raw).length) {
      d.appendChild(el('h4', { text: `Resources of the best configuration: ${s.resources}` }));
      const flat = [];
      const walk = (o, prefix) => {
        for (const [k, v] of Object.entries(o)) {
          if (v && typeof v === 'object') walk(v, `${prefix}${k}.`);
          else flat.push([`${prefix}${k}`, String(v)]);
        }
      };
      // The instruction mix has a table of its own below.
      walk(Object.fromEntries(Object.entries(s.resources_raw).filter(([k]) => k !== 'sass')), '');
      d.appendChild(table(['resource', 'value'], flat, 'grid resources'));
    }
    if (s.instruction_mix) {
      d.appendChild(el('h4', { text: `Instruction mix of the best configuration: ${s.instruction_mix}` }));
      const rows = [];
      for (const [kernel, k] of Object.entries((s.sass && s.sass.kernels) || {})) {
        const ops = Object.entries(k.opcodes || {}).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
        rows.push([el('span', { class: 'mono', text: kernel }), k.instructions,
          ops.map(([op, n]) => `${op} ${n}`).join(', ')]);
      }
      d.appendChild(table(['kernel', 'instructions', 'opcodes (most frequent first)'], rows, 'grid sass'));
    }
    d.appendChild(el('h4', { text: 'Diff against the parent' }));
    if (s.diff) {
      const controls = el('div', { class: 'diff-controls' });
      const pane = el('div', { class: 'diff-pane', 'data-step': id });
      const draw = (format) => {
        pane.textContent = '';
        const ui = new Diff2HtmlUI(pane, s.diff, {
          outputFormat: format, drawFileList: false, matching: 'lines', highlight: true,
          fileContentToggle: false, synchronisedScroll: true,
        });
        ui.draw();
        ui.highlightCode();
        state.diffFormat = format;
      };
      for (const [format, label] of [['side-by-side', 'side by side'], ['line-by-line', 'unified']]) {
        const b = el('button', { type: 'button', text: label });
        b.addEventListener('click', () => draw(format));
        controls.appendChild(b);
      }
      d.appendChild(controls);
      d.appendChild(pane);
      draw(state.diffFormat || 'side-by-side');
    } else {
      d.appendChild(noData(s.diff_note || 'No diff.'));
    }
    return d;
  }

  function renderProvenance(r) {
    const p = r.provenance || {};
    const rows = [
      ['device', p.device], ['backend', p.backend], ['driver', p.driver], ['API', p.api], ['architecture', p.arch],
      ['SM clock (MHz, before and after every timing)', p.clock_mhz_min ? `${p.clock_mhz_min} .. ${p.clock_mhz_max}` : 'not recorded'],
      ['throttling flagged', p.throttled ? 'yes' : 'no'],
      ['peak used for % of peak', p.peak_tflops ? `${p.peak_tflops} TFLOP/s (${p.peak_source})` : 'none'],
      ['measured FP32 FMA throughput', p.measured_fp32_tflops ? `${fmt(p.measured_fp32_tflops, 3)} TFLOP/s` : 'not measured'],
      ['peak version that evaluated the steps', p.peak_versions || 'not recorded'],
      ['peak version of this report', p.report_version], ['store schema', p.store_schema],
      ['recordings', (p.recordings || []).join(', ') || 'none'],
    ];
    for (const [k, v] of Object.entries(p.toolchain || {})) rows.push([`toolchain: ${k}`, v]);
    for (const u of p.llm || []) rows.push([`LLM: ${u.driver}${u.model ? ':' + u.model : ''}`, `${u.calls} call(s)${u.producer ? ', ' + u.producer : ''}`]);
    for (const w of p.workflows || []) rows.push([`workflow ${w.id} (${w.kind})`, `${w.status}, ${w.started_at} .. ${w.finished_at || '-'}, ${w.args}`]);
    return section('provenance', 'Provenance', table(['', ''], rows.map(([k, v]) => [k, v === undefined ? '' : String(v)]), 'grid prov'));
  }

  // ---------------------------------------------------------------------------------------------
  // Stats over many stores

  function renderStats(app, s) {
    app.appendChild(el('header', {}, el('h1', { text: `peak stats: ${s.campaigns.length} store(s)` })));
    if ((s.notes || []).length)
      app.appendChild(el('div', { class: 'notes', id: 'notes' }, el('strong', { text: 'Partial data: ' }),
        el('ul', {}, s.notes.map((n) => el('li', { text: n })))));
    app.appendChild(section('campaigns', 'Stores', table(['store', 'kernel', 'device', 'backend', 'vendor library', 'checkpoints', 'LLM'],
      s.campaigns.map((c) => [c.label, c.kernel, c.device, c.backend, c.baseline || '-', c.checkpoints, (c.models || []).join(', ')]))));

    const su = section('success', 'Step success');
    const grid = el('div', { class: 'charts' });
    su.appendChild(grid);
    for (const [key, title] of [['success_by_transformation', 'per transformation'], ['success_by_model', 'per model']]) {
      const rows = s[key] || [];
      const box = el('div', { class: 'chartbox' }, el('h3', { text: title }));
      grid.appendChild(box);
      if (!rows.length) { box.appendChild(noData('No step was tried.')); continue; }
      chart(box, {
        type: 'bar',
        data: {
          labels: rows.map((r) => r.key),
          datasets: [
            { label: '% of tries that passed', backgroundColor: SERIES[0], data: rows.map((r) => r.tries ? 100 * r.passed / r.tries : 0) },
            { label: '% of steps that passed', backgroundColor: SERIES[2], data: rows.map((r) => r.steps ? 100 * r.steps_passed / r.steps : 0) },
          ],
        },
        options: { scales: { y: { beginAtZero: true, max: 100, title: { display: true, text: '%' } } } },
      }, `success ${title}`);
      box.appendChild(table([title.replace('per ', ''), 'tries', 'passed', 'steps', 'passed'],
        rows.map((r) => [r.key, r.tries, r.passed, r.steps, r.steps_passed])));
    }
    app.appendChild(su);

    const er = section('errors', 'Error taxonomy (failed tries)');
    const errors = s.errors || [];
    if (!errors.length) er.appendChild(noData('No try failed.'));
    else {
      const trs = [...new Set(errors.map((e) => e.transformation))];
      const disps = [...new Set(errors.map((e) => e.disposition))];
      const box = el('div', { class: 'chartbox wide' });
      er.appendChild(box);
      chart(box, {
        type: 'bar',
        data: {
          labels: trs,
          datasets: disps.map((d, i) => ({ label: d, backgroundColor: colorOf(d, i),
            data: trs.map((t) => (errors.find((e) => e.transformation === t && e.disposition === d) || { count: 0 }).count) })),
        },
        options: { scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true, title: { display: true, text: 'failed tries' } } } },
      }, 'error taxonomy');
      er.appendChild(table(['disposition', 'transformation', 'count', 'first line of a representative message'],
        errors.map((e) => [badge(e.disposition), e.transformation, e.count, el('span', { class: 'mono', text: e.example })])));
    }
    app.appendChild(er);

    const ev = section('evolution', 'Performance along each sequence');
    const points = s.evolution || [];
    if (!points.length) ev.appendChild(noData('No step has been timed.'));
    else {
      const series = [...new Set(points.map((p) => `${p.campaign} ${p.shape}`))];
      const maxStep = Math.max(...points.map((p) => p.step));
      const labels = Array.from({ length: maxStep + 1 }, (_, i) => `step ${i}`);
      const egrid = el('div', { class: 'charts' });
      ev.appendChild(egrid);
      // Memory-bound sequences (headline bytes) add their shares of the same-run copy and the bandwidth.
      const metrics = [['vs_seed', '× seed'], ['pct_of_vendor', '% of vendor library'], ['pct_of_peak', '% of peak'],
                       ['pct_of_copy', '% of copy (memory-bound)'], ['pct_of_bandwidth', '% of documented bandwidth (memory-bound)']];
      for (const [metric, title] of metrics) {
        if (!points.some((p) => p[metric] > 0)) continue;
        const box = el('div', { class: 'chartbox' }, el('h3', { text: title }));
        egrid.appendChild(box);
        chart(box, {
          type: 'line',
          data: {
            labels,
            datasets: series.map((name, i) => ({
              label: name, borderColor: SERIES[i % SERIES.length], backgroundColor: SERIES[i % SERIES.length],
              data: labels.map((_, step) => { const p = points.find((q) => `${q.campaign} ${q.shape}` === name && q.step === step); return p && p[metric] > 0 ? p[metric] : null; }),
            })),
          },
          options: { plugins: { legend: { labels: { boxWidth: 12, font: { size: 10 } } } },
                     scales: { y: { beginAtZero: true, title: { display: true, text: title } } } },
        }, `evolution ${metric}`);
      }
    }
    app.appendChild(ev);

    const co = section('costs', 'Cost breakdown');
    const costs = s.costs || [];
    const total = s.total || {};
    if (!costs.some((c) => c.total_s > 0)) co.appendChild(noData('No phase times are recorded.'));
    else {
      const cgrid = el('div', { class: 'charts' });
      co.appendChild(cgrid);
      const box = el('div', { class: 'chartbox' }, el('h3', { text: 'per store (seconds)' }));
      cgrid.appendChild(box);
      chart(box, {
        type: 'bar',
        data: { labels: costs.map((c) => c.campaign),
                datasets: PHASES.map(([key, label, color]) => ({ label, backgroundColor: color, data: costs.map((c) => c[key]) })) },
        options: { indexAxis: 'y', scales: { x: { stacked: true }, y: { stacked: true, ticks: { font: { size: 9 } } } } },
      }, 'cost per store');
      const box2 = el('div', { class: 'chartbox' }, el('h3', { text: 'all stores: share of the time' }));
      cgrid.appendChild(box2);
      chart(box2, {
        type: 'doughnut',
        data: { labels: PHASES.map((x) => x[1]),
                datasets: [{ data: PHASES.map(([key]) => total[key] || 0), backgroundColor: PHASES.map((x) => x[2]) }] },
      }, 'cost share');
      co.appendChild(table(['store', 'steps', 'LLM s', 'compile s', 'validate s', 'tune s', 'final timing s', 'GPU s', 'total s'],
        costs.concat([total]).map((c) => [c.campaign, c.steps, fmt(c.llm_s, 2), fmt(c.compile_s, 2), fmt(c.validate_s, 2),
          fmt(c.tune_s, 2), fmt(c.bench_s, 2), fmt(c.gpu_s, 3), fmt(c.total_s, 2)])));
    }
    app.appendChild(co);
  }

  // ---------------------------------------------------------------------------------------------

  function render(data) {
    for (const c of state.charts) c.destroy();
    state.charts = [];
    const app = document.getElementById('app');
    const scroll = window.scrollY;
    app.textContent = '';
    state.kind = data.kind || '';
    if (data.kind === 'peak-report') renderReport(app, data);
    else if (data.kind === 'peak-stats') renderStats(app, data);
    else app.appendChild(el('div', { class: 'notes', id: 'notes' }, el('strong', { text: 'No report yet: ' }), data.message || 'unknown data'));
    if (document.body.dataset.live)
      app.appendChild(el('footer', { id: 'live-footer', text: `live: redrawn ${new Date().toLocaleTimeString()} from ${document.body.dataset.live}` }));
    window.scrollTo(0, scroll);
    state.renders = (state.renders || 0) + 1;
  }

  function start() {
    state.open = new Set();
    const text = document.getElementById('peak-data').textContent;
    state.text = text;
    render(JSON.parse(text));
    const live = document.body.dataset.live;
    if (!live) return;
    const poll = () => {
      fetch(live, { cache: 'no-store' })
        .then((res) => res.text())
        .then((t) => {
          state.polls = (state.polls || 0) + 1;
          if (t !== state.text) {
            state.text = t;
            render(JSON.parse(t));
          }
        })
        .catch((e) => { state.errors.push(String(e)); })
        .finally(() => setTimeout(poll, 1000));
    };
    setTimeout(poll, 1000);
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
