/* The compare page: GET /api/compare?runs=...&key=K&x=X&pixels=W[&x_min&x_max]: one metric
 * overlaid, per-axis communication bars, config diff; beneath the bars each run's predicted vs
 * measured step, compute and per-axis communication (GET /api/runs/ID/prediction, asked once
 * per run status and step count). */
'use strict';

(function () {
  // The runs list exactly as in the address (the server validates it and says what is wrong).
  var m = /[?&]runs=([^&#]*)/.exec(location.search);
  var runsRaw = m ? m[1] : '';
  if (!runsRaw) {
    MW.showError('param', 'runs: (missing): pick 2–10 runs on the runs list and press Compare');
    return;
  }
  MW.$('nav-compare').setAttribute('href', '/compare?runs=' + runsRaw);

  var KEY_FORMAT = {
    loss: MW.fmtLoss, eval_loss: MW.fmtLoss, tokens_per_s: MW.fmtSI, step_s: MW.fmtSeconds,
    mfu: MW.fmtPercent, grad_norm: MW.fmtNum, mem_peak_bytes: MW.fmtBytes,
    lr: function (v) { return MW.isNum(v) ? (v === 0 ? '0' : v.toExponential(2)) : '—'; }
  };
  var X_FORMAT = { step: MW.fmtNum, tokens: MW.fmtSI, time: MW.fmtSeconds };

  var keySel = MW.$('key'), xSel = MW.$('x'), slider = MW.$('smoothing'), onlyDiff = MW.$('only-diff');
  var state = { key: 'loss', x: 'step', smoothing: 0.6, zoom: null, data: null };

  function pickOption(sel, value) {
    if (!value) return;
    var found = Array.prototype.some.call(sel.options, function (o) { return o.value === value; });
    if (!found) sel.appendChild(MW.el('option', { value: value, text: value }));
    sel.value = value;
  }
  pickOption(keySel, MW.param('key'));
  pickOption(xSel, MW.param('x'));
  state.key = keySel.value;
  state.x = xSel.value;
  state.smoothing = parseFloat(slider.value) || 0;
  MW.$('smoothing-value').textContent = state.smoothing.toFixed(2);

  function runId(r) { return r && typeof r === 'object' ? r.id : r; }
  function arr(a) { return Array.isArray(a) ? a : []; }

  // ---- the overlaid chart ----------------------------------------------------------------------

  var onZoom = MW.xZoomHandler(function () { return state.zoom; }, function (win) {
    var lo = win[0], hi = win[1];
    if (state.x !== 'time') { lo = Math.floor(lo); hi = Math.ceil(hi); if (hi <= lo) hi = lo + 1; }
    setZoom([lo, hi]);
    refresh();
  });

  var chart = new MW.Chart(MW.$('chart-compare'), MW.$('legend-compare'), {
    xName: state.x, xFormat: X_FORMAT[state.x] || MW.fmtNum, yFormat: KEY_FORMAT[state.key] || MW.fmtNum,
    zoomCallback: onZoom, onReset: resetZoom, emptyText: 'none of these runs recorded this metric'
  });

  function setZoom(win) {
    state.zoom = win;
    chart.setWindow(win);
    var xf = X_FORMAT[state.x] || MW.fmtNum;
    MW.$('reset-zoom').hidden = !win;
    MW.$('zoom').textContent = win ? state.x + ' ' + xf(win[0]) + '–' + xf(win[1]) + ' (full resolution)'
      : 'drag to zoom · double-click to reset';
  }

  function resetZoom() {
    if (!state.zoom) { if (chart.g) chart.g.updateOptions({ valueRange: null }); return; }
    setZoom(null);
    refresh();
  }
  MW.$('reset-zoom').addEventListener('click', resetZoom);

  function runIndex(runs) {
    var idx = new Map();
    runs.forEach(function (r, i) { idx.set(String(r.id), i); });
    return idx;
  }

  function runName(r) { return r ? (r.name || ('run ' + r.id)) : '?'; }

  function drawChart() {
    var d = state.data;
    if (!d) return;
    var runs = arr(d.runs), idx = runIndex(runs);
    chart.opts.xName = state.x;
    chart.opts.xFormat = X_FORMAT[state.x] || MW.fmtNum;
    chart.opts.yFormat = KEY_FORMAT[state.key] || MW.fmtNum;
    if (chart.g && chart.builtFor !== state.key + '|' + state.x) {  // formatters are read when the graph is built
      chart.g.destroy();
      chart.g = null;
    }
    chart.builtFor = state.key + '|' + state.x;
    var raw = [], smooth = [];
    arr(d.series).forEach(function (s) {
      var i = idx.has(String(runId(s.run))) ? idx.get(String(runId(s.run))) : runs.length + raw.length;
      var color = MW.color(i);
      var name = runName(runs[i]) + (runs[i] ? '' : ' (' + runId(s.run) + ')');
      var pts = arr(s.points);
      if (state.smoothing > 0) {
        raw.push({ name: name + ' (raw)', color: MW.withAlpha(color, 0.25), points: pts, width: 1, legend: false });
        smooth.push({ name: name, color: color, points: MW.smooth(pts, state.smoothing), width: 2 });
      } else {
        smooth.push({ name: name, color: color, points: pts, width: 1.6 });
      }
    });
    chart.dateWindow = state.zoom;
    chart.set(smooth.concat(raw));
  }

  // ---- per-axis communication bars -------------------------------------------------------------

  var PARTS = MW.AXES.concat(['compute']);

  function fmtMs(s) { return MW.isNum(s) ? String(Number((s * 1000).toPrecision(3))) + ' ms' : '—'; }

  function drawComm() {
    var d = state.data, box = MW.clear(MW.$('comm-bars')), legend = MW.clear(MW.$('comm-legend'));
    PARTS.forEach(function (p) {
      var sw = MW.el('span', { className: 'swatch swatch-box' });
      sw.style.background = MW.AXIS_COLORS[p];
      legend.appendChild(MW.el('span', { className: 'legend-item' }, [sw, MW.el('span', { text: p })]));
    });
    var runs = arr(d.runs), byRun = new Map();
    arr(d.comm).forEach(function (c) { byRun.set(String(runId(c.run)), c); });
    var max = 0;
    byRun.forEach(function (c) {
      var t = 0;
      PARTS.forEach(function (p) { var v = c.mean ? c.mean[p] : null; if (MW.isNum(v) && v > 0) t += v; });
      max = Math.max(max, t);
    });
    runs.forEach(function (r, i) {
      var c = byRun.get(String(r.id));
      var sw = MW.el('span', { className: 'swatch swatch-box' });
      sw.style.background = MW.color(i);
      box.appendChild(MW.el('div', { className: 'bar-name' }, [sw, MW.el('span', { text: runName(r) })]));
      var track = MW.el('div', { className: 'bar-track' });
      box.appendChild(track);
      var text = MW.el('div', { className: 'bar-text' });
      box.appendChild(text);
      if (!c || !c.mean) { text.textContent = 'no per-step timings recorded'; return; }
      if (PARTS.every(function (p) { return !MW.isNum(c.mean[p]); })) { text.textContent = 'no per-step timings recorded'; return; }
      var total = 0, parts = [];
      PARTS.forEach(function (p) {
        var v = c.mean[p];
        if (v === null || v === undefined || !MW.isNum(v)) { parts.push(p + ' —'); return; }  // absent, not 0
        total += v;
        parts.push(p + ' ' + fmtMs(v));
        if (v <= 0 || max <= 0) return;
        var seg = MW.el('div', { className: 'bar-seg', title: p + ': ' + fmtMs(v) + ' per step' });
        seg.style.width = (100 * v / max) + '%';
        seg.style.background = MW.AXIS_COLORS[p];
        track.appendChild(seg);
      });
      text.textContent = parts.join(' · ') + ' · total ' + fmtMs(total);
      if (c.exact === false) {
        var n = MW.isNum(c.steps) ? MW.fmtNum(c.steps) : '?';
        var of = MW.isNum(r.steps) ? MW.fmtNum(r.steps) : '?';
        text.appendChild(MW.el('span', { className: 'note', text: 'estimated from ' + n + ' of ' + of + ' steps' }));
      }
    });
  }

  // ---- predicted vs measured -------------------------------------------------------------------

  var predictions = new Map();  // run id -> {key: status|steps, body}
  var predSection = null;
  function predictionSection() {
    if (predSection) return predSection;
    predSection = MW.el('section', { className: 'card', id: 'prediction' }, [
      MW.el('h2', { text: 'Predicted vs measured (ms per step)' }),
      MW.el('div', { className: 'table-wrap' }, [MW.el('table', { className: 'diff', id: 'prediction-table' })])
    ]);
    var bars = MW.$('comm-bars'), anchor = bars ? bars.closest('section') : null;
    if (anchor && anchor.parentNode) anchor.parentNode.insertBefore(predSection, anchor.nextSibling);
    else document.querySelector('main').appendChild(predSection);
    return predSection;
  }

  // Plain fetch: a prediction that cannot be read shows in its row, not in the page's banner.
  function fetchPrediction(runIdText) {
    return fetch('/api/runs/' + encodeURIComponent(runIdText) + '/prediction',
                 { headers: { Accept: 'application/json' }, cache: 'no-store', credentials: 'same-origin' })
      .then(function (res) {
        return res.json().catch(function () { return null; }).then(function (data) {
          if (!res.ok) return { available: false, reason: data && typeof data.error === 'string' ? data.error : 'HTTP ' + res.status };
          return data;
        });
      }, function (err) { return { available: false, reason: 'cannot reach the server (' + (err && err.message ? err.message : err) + ')' }; });
  }

  function loadPredictions(runs) {
    var asks = [];
    runs.forEach(function (r) {
      var key = String(r.status) + '|' + String(r.steps);
      var have = predictions.get(String(r.id));
      if (have && have.key === key) return;
      var entry = { key: key, body: have ? have.body : null };
      predictions.set(String(r.id), entry);
      asks.push(fetchPrediction(String(r.id)).then(function (body) { entry.body = body; }));
    });
    drawPredictions();
    if (asks.length) Promise.all(asks).then(drawPredictions);
  }

  function drawPredictions() {
    var d = state.data;
    if (!d) return;
    predictionSection();
    var runs = arr(d.runs), table = MW.clear(MW.$('prediction-table'));
    var axes = MW.AXES.filter(function (a) {
      return runs.some(function (r) {
        var e = predictions.get(String(r.id)), p = e && e.body;
        if (!p || p.available !== true) return false;
        var pc = (p.predicted || {}).comm_s || {}, mc = (p.measured || {}).comm_s || {};
        return (MW.isNum(pc[a]) && pc[a] > 0) || (MW.isNum(mc[a]) && mc[a] > 0);
      });
    });
    var head = ['run', 'step pred ms', 'step meas ms', 'step error', 'compute pred ms', 'compute meas ms'];
    axes.forEach(function (a) { head.push(a + ' pred ms', a + ' meas ms'); });
    head.push('basis');
    table.appendChild(MW.el('thead', null, [MW.el('tr', null, head.map(function (h, i) {
      var th = MW.el('th', { text: h });
      var a = i >= 6 && i < head.length - 1 ? axes[Math.floor((i - 6) / 2)] : null;
      if (a && MW.AXIS_COLORS[a]) th.style.color = MW.AXIS_COLORS[a];
      return th;
    }))]));
    var body = MW.el('tbody'), shown = 0;
    runs.forEach(function (r, i) {
      var sw = MW.el('span', { className: 'swatch swatch-box' });
      sw.style.background = MW.color(i);
      var tr = MW.el('tr', { className: 'prediction-row', dataset: { run: String(r.id) } },
                     [MW.el('td', null, [sw, MW.el('span', { text: runName(r) })])]);
      var e = predictions.get(String(r.id)), p = e && e.body;
      if (!p || p.available !== true) {
        var why = MW.el('td', { className: 'hint', colSpan: head.length - 1,
                                text: !p ? 'loading…' : (typeof p.reason === 'string' ? p.reason : 'no prediction') });
        tr.appendChild(why);
      } else {
        var pr = p.predicted || {}, me = p.measured || {}, er = p.error || {};
        var pc = pr.comm_s || {}, mc = me.comm_s || {};
        var cells = [MW.fmtPredMs(pr.step_s), MW.fmtPredMs(me.step_s), MW.fmtSignedPercent(er.step_s),
                     MW.fmtPredMs(pr.compute_s), MW.fmtPredMs(me.compute_s)];
        axes.forEach(function (a) { cells.push(MW.fmtPredMs(pc[a]), MW.fmtPredMs(mc[a])); });
        cells.push(String(p.basis));
        cells.forEach(function (c) { tr.appendChild(MW.el('td', { text: c })); });
        shown++;
      }
      body.appendChild(tr);
    });
    table.appendChild(body);
    window.meshwork.predictions = shown;
  }

  // ---- config diff -----------------------------------------------------------------------------

  function drawDiff() {
    var d = state.data, runs = arr(d.runs), rows = arr(d.diff);
    var head = MW.clear(MW.$('diff-head')), body = MW.clear(MW.$('diff-body'));
    var tr = MW.el('tr', null, [MW.el('th', { text: 'key' })]);
    runs.forEach(function (r, i) {
      var sw = MW.el('span', { className: 'swatch swatch-box' });
      sw.style.background = MW.color(i);
      tr.appendChild(MW.el('th', null, [sw, MW.el('span', { text: runName(r) })]));
    });
    head.appendChild(tr);
    var differing = 0;
    rows.forEach(function (row) {
      var differs = row.differs === true;
      if (differs) differing++;
      var keyCell = MW.el('td', { text: row.key });
      var axis = /^mesh\.(.+)$/.exec(String(row.key));
      if (axis && MW.AXIS_COLORS[axis[1]] && MW.AXES.indexOf(axis[1]) >= 0) keyCell.style.color = MW.AXIS_COLORS[axis[1]];
      var r = MW.el('tr', { className: differs ? 'differs' : 'same' }, [keyCell]);
      var vals = arr(row.values);
      runs.forEach(function (run, i) { r.appendChild(MW.el('td', { text: MW.fmtValue(vals[i]) })); });
      body.appendChild(r);
    });
    var none = MW.el('tr', { className: 'none' }, [MW.el('td', { colSpan: runs.length + 1, className: 'empty',
      text: rows.length ? 'The configs do not differ.' : 'No config recorded.' })]);
    body.appendChild(none);
    MW.$('diff-count').textContent = differing + ' of ' + rows.length + ' keys differ';
    applyOnlyDiff();
    return differing;
  }

  function applyOnlyDiff() {
    var only = onlyDiff.checked;
    var body = MW.$('diff-body'), shown = 0;
    Array.prototype.forEach.call(body.rows, function (r) {
      if (r.classList.contains('none')) return;
      r.hidden = only && !r.classList.contains('differs');
      if (!r.hidden) shown++;
    });
    var none = body.querySelector('tr.none');
    if (none) none.hidden = shown > 0;
  }
  onlyDiff.addEventListener('change', applyOnlyDiff);

  // ---- fetch -----------------------------------------------------------------------------------

  function url() {
    var px = MW.clampPixels(chart.width());
    var q = '/api/compare?runs=' + runsRaw + '&key=' + encodeURIComponent(state.key) +
      '&x=' + encodeURIComponent(state.x) + '&pixels=' + px;
    if (state.zoom) q += '&x_min=' + state.zoom[0] + '&x_max=' + state.zoom[1];
    return q;
  }

  function draw(d) {
    state.data = d;
    var runs = arr(d.runs);
    document.title = 'Meshwork · Compare ' + runs.length + ' runs';
    drawChart();
    drawComm();
    loadPredictions(runs);
    var diffRows = drawDiff();
    var n = MW.countPoints(arr(d.series).map(function (s) { return s.points; }));
    var src = 0, haveSrc = false;
    arr(d.series).forEach(function (s) { if (MW.isNum(s.source_points)) { src += s.source_points; haveSrc = true; } });
    MW.$('points').textContent = MW.fmtNum(n) + ' points' + (haveSrc ? ' (of ' + MW.fmtNum(src) + ' stored)' : '');
    MW.setState({ points: n, runs: runs.length, diffRows: diffRows, pixels: d.pixels, ready: true });
  }

  var refresh = MW.coalesce(function () {
    return MW.fetchJSON(url(), 'compare').then(draw);
  });

  function syncAddress() {
    var q = '?runs=' + runsRaw + '&key=' + encodeURIComponent(state.key) + '&x=' + encodeURIComponent(state.x);
    try { history.replaceState(null, '', '/compare' + q); } catch (e) { /* not important */ }
  }

  keySel.addEventListener('change', function () {
    state.key = keySel.value;
    syncAddress();
    refresh();
  });
  xSel.addEventListener('change', function () {
    state.x = xSel.value;
    setZoom(null);  // a step range means nothing in tokens or seconds
    syncAddress();
    refresh();
  });
  slider.addEventListener('input', function () {
    state.smoothing = Math.max(0, Math.min(0.99, parseFloat(slider.value) || 0));
    MW.$('smoothing-value').textContent = state.smoothing.toFixed(2);
    drawChart();
  });
  MW.onResize(refresh);

  refresh();
})();
