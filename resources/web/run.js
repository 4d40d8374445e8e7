/* A run's page: GET /api/runs/ID (info) and /api/runs/ID/frame (every chart from one read);
 * live on /api/live?run=ID ({"type":"run"} -> re-fetch the frame, coalesced); predicted vs
 * measured from /api/runs/ID/prediction, asked again only when the run's status changes or its
 * steps grew noticeably (it reads the cluster's other runs); the run's health (hung, mismatched,
 * straggling: /api/runs/ID/health, the JSON of `meshwork diagnose --json`) every 2 s while it is
 * live, since a hang is time passing with nothing arriving, which the live pushes never see. */
'use strict';

(function () {
  var GiB = 1024 * 1024 * 1024;
  var id = MW.param('id');
  if (!id || !/^[1-9][0-9]{0,17}$/.test(id)) {
    MW.showError('param', 'id: ' + (id === null ? '(missing)' : id) + ': a positive integer run id is required');
    return;
  }
  MW.$('nav-run').setAttribute('href', '/run?id=' + id);
  MW.$('nav-run').textContent = 'Run ' + id;

  var state = {
    zoom: null,        // [x_min, x_max] while zoomed
    rank: -1,
    smoothing: 0.6,
    frame: null,
    info: null,
    status: null,
    infoAt: 0,
    infoDone: false,
    frameDone: false,
    world: null
  };

  // ---- charts ----------------------------------------------------------------------------------

  var onZoom = MW.xZoomHandler(function () { return state.zoom; }, function (win) {
    var lo = Math.floor(win[0]), hi = Math.ceil(win[1]);
    if (hi <= lo) hi = lo + 1;
    setZoom([lo, hi]);
    refreshFrame();
  });

  // A chart's card under `title` in the grid, before Problems: its legend (#legend-KEY) over its plot
  // (#chart-KEY); opts.wide: the full width of the grid and taller.
  function chart(key, title, opts) {
    var wide = !!opts.wide;
    var legend = MW.el('div', { className: 'chart-legend', id: 'legend-' + key });
    var plot = MW.el('div', { className: wide ? 'chart tall' : 'chart', id: 'chart-' + key });
    MW.$('charts').insertBefore(MW.el('div', { className: wide ? 'card wide' : 'card' }, [
      MW.el('h2', { text: title }), legend, plot]), MW.$('problems-card'));
    return new MW.Chart(plot, legend, Object.assign({
      xName: 'step', xFormat: MW.fmtNum, zoomCallback: onZoom, onReset: resetZoom
    }, opts));
  }

  var gibFmt = function (v) { return MW.isNum(v) ? Number(v.toPrecision(4)) + ' GiB' : '—'; };
  var charts = {
    loss: chart('loss', 'Loss', { wide: true, yFormat: MW.fmtLoss, legendFormat: MW.fmtLoss }),
    lr: chart('lr', 'Learning rate', {
      yFormat: function (v) { return MW.isNum(v) ? (v === 0 ? '0' : v.toExponential(2)) : '—'; } }),
    grad: chart('grad-norm', 'Gradient norm', { yFormat: MW.fmtNum }),
    tokens: chart('tokens', 'Tokens/s', { yFormat: MW.fmtSI, legendFormat: MW.fmtRate }),
    mfu: chart('mfu', 'MFU', { yFormat: MW.fmtPercent }),
    mem: chart('mem', 'Memory per rank (GiB)', { dygraph: { includeZero: true },
                        yFormat: function (v) { return MW.isNum(v) ? String(Number(v.toPrecision(3))) : '—'; },
                        legendFormat: gibFmt }),
    comm: chart('comm', 'Per-axis communication stacked under compute (s per step)', {
      yFormat: MW.fmtSeconds, dygraph: { stackedGraph: true, fillGraph: true, fillAlpha: 0.55 },
      emptyText: 'no communication or compute recorded' }),
    step: chart('step', 'Step time', { yFormat: MW.fmtSeconds })
  };
  var chartList = Object.keys(charts).map(function (k) { return charts[k]; });

  function setZoom(win) {
    state.zoom = win;
    chartList.forEach(function (c) { c.setWindow(win); });
    MW.$('reset-zoom').hidden = !win;
    MW.$('zoom').textContent = win ? 'steps ' + MW.fmtNum(win[0]) + '–' + MW.fmtNum(win[1]) + ' (full resolution)'
      : 'drag on a chart to zoom · double-click to reset';
  }

  function resetZoom() {
    if (!state.zoom) {  // still clear a y zoom
      chartList.forEach(function (c) { if (c.g) c.g.updateOptions({ valueRange: null }); });
      return;
    }
    setZoom(null);
    refreshFrame();
  }
  MW.$('reset-zoom').addEventListener('click', resetZoom);

  // ---- header facts ----------------------------------------------------------------------------

  function fact(label, value) {
    var dd = typeof value === 'string' ? MW.el('dd', { text: value }) : MW.el('dd', null, [value]);
    return MW.el('div', null, [MW.el('dt', { text: label }), dd]);
  }

  // "100 / 100": steps completed (1-based; the store keeps the highest 0-based step) of the
  // config's steps, as the workbench's monitor and runs table count them.
  function stepText(run) {
    var done = MW.isNum(run.steps) && (run.steps > 0 || run.points > 0) ? run.steps + 1 : 0;
    var cfg = state.info && state.info.config;
    var total = cfg && cfg.training && MW.isNum(cfg.training.steps) ? cfg.training.steps : null;
    return MW.fmtNum(done) + (total === null ? '' : ' / ' + MW.fmtNum(total));
  }

  function renderFacts(run) {
    if (!run) return;
    state.status = run.status;
    if (MW.isNum(run.world)) state.world = run.world;
    MW.$('run-name').textContent = MW.visible(run.name || ('run ' + run.id));
    document.title = 'Meshwork · ' + MW.visible(run.name || ('run ' + run.id));
    var dl = MW.clear(MW.$('facts'));
    [
      fact('status', MW.statusBadge(run.status, run.exit_reason || undefined)),
      fact('shape', MW.shapeText(run)),
      fact('model', run.model || '—'),
      fact('steps', stepText(run)),
      fact('final loss', MW.fmtLoss(run.final_loss)),
      fact('tokens/s', MW.fmtRate(run.tokens_per_s)),
      fact('world', MW.fmtNum(run.world)),
      fact('created', MW.fmtTime(run.created))
    ].forEach(function (e) { dl.appendChild(e); });
  }

  // ---- the frame -------------------------------------------------------------------------------

  function arr(a) { return Array.isArray(a) ? a : []; }

  // mem_peak: one line, or one line per rank (like mem).
  function lineList(a) {
    a = arr(a);
    if (a.length && a.every(function (l) { return Array.isArray(l) && (l.length === 0 || Array.isArray(l[0])); })) return a;
    return a.length ? [a] : [];
  }

  function toGiB(pts) { return arr(pts).map(function (p) { return [p[0], MW.isNum(p[1]) ? p[1] / GiB : null]; }); }

  function xExtent(lines) {
    var lo = Infinity, hi = -Infinity;
    lines.forEach(function (l) {
      if (l.length) { lo = Math.min(lo, l[0][0]); hi = Math.max(hi, l[l.length - 1][0]); }
    });
    return lo <= hi ? [lo, hi] : null;
  }

  function drawLoss() {
    var f = state.frame;
    if (!f) return;
    var raw = arr(f.loss), ev = arr(f.eval_loss);
    var base = MW.COLORS[0];
    var series = [];
    if (state.smoothing > 0) {
      series.push({ name: 'loss (raw)', color: MW.withAlpha(base, 0.35), points: raw, width: 1, legend: true });
      series.push({ name: 'loss (smoothed ' + state.smoothing.toFixed(2) + ')', color: base, points: MW.smooth(raw, state.smoothing), width: 2.2 });
    } else {
      series.push({ name: 'loss', color: base, points: raw, width: 1.5 });
    }
    if (ev.length) series.push({ name: 'eval_loss', color: MW.COLORS[1], points: ev, pointsOnly: true });
    charts.loss.set(series);
  }

  // ---- predicted vs measured ------------------------------------------------------------------

  // The section sits between the charts and the mesh; made here, text only.
  var predSection = null;
  function predictionSection() {
    if (predSection) return predSection;
    predSection = MW.el('section', { className: 'card', id: 'prediction' }, [
      MW.el('h2', { text: 'Predicted vs measured (ms per step)' }),
      MW.el('p', { className: 'hint', id: 'prediction-note', text: 'loading…' }),
      MW.el('div', { className: 'table-wrap' }, [MW.el('table', { className: 'diff', id: 'prediction-table' })])
    ]);
    var mesh = MW.$('mesh'), anchor = mesh ? mesh.closest('section') : null;
    if (anchor && anchor.parentNode) anchor.parentNode.insertBefore(predSection, anchor);
    else document.querySelector('main').appendChild(predSection);
    return predSection;
  }

  function renderPrediction(p) {
    predictionSection();
    var note = MW.$('prediction-note'), table = MW.clear(MW.$('prediction-table'));
    if (!p || p.available !== true) {
      // predict_run's words why this run cannot be judged (yet): a note, not a page error.
      note.textContent = p && typeof p.reason === 'string' ? p.reason : 'no prediction';
      table.hidden = true;
      window.meshwork.predictionRows = 0;
      return;
    }
    var pr = p.predicted || {}, me = p.measured || {}, er = p.error || {};
    var pc = pr.comm_s || {}, mc = me.comm_s || {}, ec = er.comm_s || {};
    note.textContent = 'predicted from ' + String(p.basis) + ' · measured: mean of ' + MW.fmtNum(me.steps) + ' steps';
    var rows = [['step', pr.step_s, me.step_s, er.step_s, null], ['compute', pr.compute_s, me.compute_s, er.compute_s, null]];
    MW.AXES.forEach(function (a) {
      if ((MW.isNum(pc[a]) && pc[a] > 0) || (MW.isNum(mc[a]) && mc[a] > 0)) rows.push([a, pc[a], mc[a], ec[a], a]);
    });
    table.appendChild(MW.el('thead', null, [MW.el('tr', null, [
      MW.el('th', { text: '' }), MW.el('th', { text: 'predicted ms' }), MW.el('th', { text: 'measured ms' }),
      MW.el('th', { text: 'error' })])]));
    var body = MW.el('tbody');
    rows.forEach(function (r) {
      var what = MW.el('td', { text: r[0] });
      if (r[4] && MW.AXIS_COLORS[r[4]]) what.style.color = MW.AXIS_COLORS[r[4]];
      body.appendChild(MW.el('tr', { className: 'prediction-row', dataset: { what: r[0] } }, [
        what, MW.el('td', { text: MW.fmtPredMs(r[1]) }), MW.el('td', { text: MW.fmtPredMs(r[2]) }),
        MW.el('td', { text: MW.fmtSignedPercent(r[3]) })]));
    });
    table.appendChild(body);
    table.hidden = false;
    window.meshwork.predictionRows = rows.length;
  }

  // Plain fetch, not MW.fetchJSON: a prediction that cannot be read says so in its own section
  // and never raises the page's error banner.
  var pred = { status: null, steps: -1, inFlight: false, again: false };
  function refreshPrediction() {
    if (pred.inFlight) { pred.again = true; return; }
    pred.inFlight = true;
    fetch('/api/runs/' + id + '/prediction', { headers: { Accept: 'application/json' }, cache: 'no-store', credentials: 'same-origin' })
      .then(function (res) {
        return res.json().catch(function () { return null; }).then(function (data) {
          if (!res.ok) throw new Error(data && typeof data.error === 'string' ? data.error : 'HTTP ' + res.status);
          return data;
        });
      })
      .then(renderPrediction, function (err) {
        predictionSection();
        MW.$('prediction-note').textContent = 'prediction: ' + (err && err.message ? err.message : String(err));
        MW.clear(MW.$('prediction-table')).hidden = true;
        window.meshwork.predictionRows = 0;
      })
      .then(function () {
        pred.inFlight = false;
        if (pred.again) { pred.again = false; refreshPrediction(); }
      });
  }
  function maybePredict(run) {
    if (!run) return;
    var steps = MW.isNum(run.steps) ? run.steps : 0;
    var grown = steps >= pred.steps + Math.max(10, Math.ceil(0.1 * Math.max(0, pred.steps)));
    if (pred.steps >= 0 && run.status === pred.status && !grown) return;
    pred.status = run.status;
    pred.steps = steps;
    refreshPrediction();
  }

  function drawFrame(f) {
    state.frame = f;
    if (f.run) renderFacts(f.run);
    maybePredict(f.run);
    chartList.forEach(function (c) { c.dateWindow = state.zoom; });

    drawLoss();
    charts.lr.set([{ name: 'lr', color: MW.COLORS[3], points: arr(f.lr) }]);
    charts.grad.set([{ name: 'grad_norm', color: MW.COLORS[4], points: arr(f.grad_norm) }]);
    charts.tokens.set([{ name: 'tokens/s', color: MW.COLORS[6], points: arr(f.tokens_per_s) }]);
    charts.mfu.set([{ name: 'MFU', color: MW.COLORS[5], points: arr(f.mfu) }]);
    charts.step.set([{ name: 'step time', color: MW.COLORS[8], points: arr(f.step_s) }]);

    // Memory: a line per rank (or "max"), its peak dashed, the capacity as a dashed red line.
    var mem = arr(f.mem), ranks = arr(f.mem_ranks), peaks = lineList(f.mem_peak);
    var label = function (i) {
      var r = ranks[i];
      return r === undefined ? 'line ' + i : (typeof r === 'number' ? 'rank ' + r : String(r));
    };
    var memSeries = [];
    mem.forEach(function (pts, i) {
      memSeries.push({ name: label(i), color: MW.color(i), points: toGiB(pts), width: 1.5 });
    });
    peaks.forEach(function (pts, i) {
      var one = peaks.length === 1 && mem.length !== 1;
      memSeries.push({ name: one ? 'peak' : label(i) + ' peak', color: one ? '#cfd5dd' : MW.withAlpha(MW.color(i), 0.75),
                       points: toGiB(pts), width: 1, dotted: true });
    });
    var cap = MW.isNum(f.capacity_bytes) ? f.capacity_bytes
      : (state.info && MW.isNum(state.info.capacity_bytes) ? state.info.capacity_bytes : null);
    if (cap !== null) {
      var ext = state.zoom || xExtent(mem.concat(peaks));
      if (ext) {
        memSeries.push({ name: 'capacity ' + MW.fmtBytes(cap), color: '#ff6b6b', dashed: true, width: 1.5,
                         points: [[ext[0], cap / GiB], [ext[1], cap / GiB]] });
      }
    }
    charts.mem.set(memSeries);

    // Communication: compute on top, the axes stacked under it (dygraphs stacks the last series at
    // the bottom), in mesh order from the bottom: dp_replicate, dp_shard, cp, tp, then any other.
    var comm = f.comm && typeof f.comm === 'object' ? f.comm : {};
    var axes = MW.AXES.filter(function (a) { return a in comm; })
      .concat(Object.keys(comm).filter(function (a) { return MW.AXES.indexOf(a) < 0; }).sort());
    var commSeries = [{ name: 'compute', color: MW.AXIS_COLORS.compute, points: arr(f.compute) }];
    axes.slice().reverse().forEach(function (a, i) {
      commSeries.push({ name: a, color: MW.AXIS_COLORS[a] || MW.color(i + 5), points: arr(comm[a]) });
    });
    charts.comm.set(commSeries);

    // The test hook: every [x, y] pair received in this frame.
    var lists = [f.loss, f.eval_loss, f.lr, f.grad_norm, f.tokens_per_s, f.mfu, f.step_s, f.compute];
    Object.keys(comm).forEach(function (a) { lists.push(comm[a]); });
    mem.forEach(function (l) { lists.push(l); });
    peaks.forEach(function (l) { lists.push(l); });
    var n = MW.countPoints(lists);

    // source_points: the loss's stored points in range; the loss line shows them all, or min/max
    // per pixel column of them. n counts every chart's points together.
    var src = f.source_points, shown = arr(f.loss).length;
    var lossText = !MW.isNum(src) ? '' : shown >= src ? 'loss: all ' + MW.fmtNum(src) + ' stored points · '
      : 'loss: ' + MW.fmtNum(shown) + ' of ' + MW.fmtNum(src) + ' stored points (min/max per pixel) · ';
    MW.$('points').textContent = lossText + MW.fmtNum(n) + ' points in all charts';
    MW.$('points').dataset.points = String(n);

    MW.expertLoad.onFrame(f, state.zoom);  // expert_load.js: mixtures of experts only

    state.frameDone = true;
    MW.setState({ points: n, lossPoints: arr(f.loss).length, version: f.version, pixels: f.pixels,
                  ready: state.frameDone && state.infoDone });
  }

  function frameURL() {
    var px = MW.clampPixels(charts.loss.width());
    var q = '/api/runs/' + id + '/frame?pixels=' + px;
    if (state.zoom) q += '&x_min=' + state.zoom[0] + '&x_max=' + state.zoom[1];
    if (state.rank !== -1) q += '&rank=' + state.rank;
    return q;
  }

  var refreshFrame = MW.coalesce(function () {
    return MW.fetchJSON(frameURL(), 'frame').then(drawFrame);
  });

  // ---- info: failure, problems, mesh, config ---------------------------------------------------

  function renderRootCause(rc) {
    var box = MW.$('root-cause');
    MW.clear(box);
    if (rc === null || rc === undefined || rc === '') { box.hidden = true; return; }
    var text = String(rc);
    var nl = text.indexOf('\n');
    var first = nl < 0 ? text : text.slice(0, nl);
    var rest = nl < 0 ? '' : text.slice(nl + 1).replace(/\s+$/, '');
    box.appendChild(MW.el('strong', { text: first }));
    if (rest) box.appendChild(MW.el('pre', { text: rest }));
    box.hidden = false;
  }

  function renderProblems(problems) {
    var ul = MW.clear(MW.$('problems'));
    problems = arr(problems);
    if (!problems.length) {
      ul.appendChild(MW.el('li', { className: 'hint', text: 'No warnings or errors.' }));
      return;
    }
    problems.forEach(function (p) {
      var level = String(p.level || 'info').toLowerCase();
      ul.appendChild(MW.el('li', { className: 'level-' + level.replace(/[^a-z]/g, '') }, [
        MW.el('span', { className: 'when', text: MW.fmtTime(p.time) }),
        MW.el('span', { className: 'lvl', text: level }),
        MW.el('span', { text: p.text === undefined ? '' : String(p.text) })
      ]));
    });
  }

  function renderMesh(info) {
    var box = MW.clear(MW.$('mesh'));
    var note = MW.$('mesh-note');
    var layout = info.layout || {};
    var coords = arr(layout.coords);
    var nodes = arr(layout.nodes);
    if (!nodes.length && coords.length) {
      nodes = [{ node: 0, host: '', ranks: coords.map(function (c, i) { return i; }) }];
    }
    var totalRaw = MW.isNum(info.ranks_total) ? info.ranks_total
      : MW.isNum(layout.ranks_total) ? layout.ranks_total
      : (info.run && MW.isNum(info.run.world) ? info.run.world : coords.length);
    if (!nodes.length) {
      note.textContent = 'No layout recorded for this run.';
      return;
    }
    var drawn = 0;
    nodes.forEach(function (nd) { drawn += arr(nd.ranks).length; });
    var parts = [];
    if (totalRaw > coords.length) parts.push('first ' + MW.fmtNum(coords.length) + ' of ' + MW.fmtNum(totalRaw) + ' ranks');
    parts.push(nodes.length + (nodes.length === 1 ? ' node' : ' nodes'));
    var byHealth = rankHealth();
    parts.push(byHealth ? 'colour: what each rank does (computing, waiting, slow; culprits red and outlined)'
      : 'colour: tp group (ranks with the same dp_replicate, dp_shard, cp)');
    parts.push('label: [dp_replicate, dp_shard, cp, tp]');
    note.textContent = parts.join(' · ');

    var big = drawn <= 64, medium = drawn <= 512;
    var cw = big ? 56 : medium ? 14 : 9, ch = big ? 30 : cw, gap = big ? 4 : 2, pad = 8, head = 18;
    var perRowMax = big ? 8 : 16;
    var W = Math.max(300, box.clientWidth || 1000) - 4;
    var groups = new Map();
    function groupColor(c) {
      if (!c) return '#3a3f47';
      var k = c.slice(0, 3).join(',');
      if (!groups.has(k)) groups.set(k, groups.size);
      return MW.color(groups.get(k));
    }

    var x = 0, y = 0, rowH = 0, items = [], right = 0;
    nodes.forEach(function (nd) {
      var rs = arr(nd.ranks);
      var per = Math.max(1, Math.min(perRowMax, rs.length));
      var rows = Math.max(1, Math.ceil(rs.length / per));
      var w = Math.max(pad * 2 + per * cw + (per - 1) * gap, 90);
      var h = head + pad + rows * ch + (rows - 1) * gap + pad;
      if (x > 0 && x + w > W) { x = 0; y += rowH + 10; rowH = 0; }
      var g = MW.svg('g', { transform: 'translate(' + x + ',' + y + ')' });
      var hostText = 'node ' + (nd.node === undefined ? '?' : nd.node) + (nd.host ? ' · ' + nd.host : '');
      g.appendChild(MW.svg('rect', { class: 'mesh-node', x: 0.5, y: 0.5, width: w - 1, height: h - 1, rx: 5 }, [
        MW.svg('title', { text: hostText + ' · ' + rs.length + ' ranks' })
      ]));
      g.appendChild(MW.svg('text', { class: 'mesh-host', x: pad, y: 13,
        text: hostText.length > w / 7 ? hostText.slice(0, Math.max(4, Math.floor(w / 7) - 1)) + '…' : hostText }));
      rs.forEach(function (r, i) {
        var c = MW.isNum(r) && r >= 0 && r < coords.length ? arr(coords[r]) : null;
        var cx = pad + (i % per) * (cw + gap), cy = head + pad + Math.floor(i / per) * (ch + gap);
        var tip = 'rank ' + r + ' · ' + hostText + (c ? ' · dp_replicate ' + c[0] + ', dp_shard ' + c[1] + ', cp ' + c[2] + ', tp ' + c[3] +
          (c.length > 4 ? ', pp stage ' + c[4] : '') : '');
        var rh = byHealth && MW.isNum(r) ? byHealth.get(r) || byHealth.rest : null;
        if (rh) tip += ' · ' + rh.note;
        var cell = MW.svg('g', { transform: 'translate(' + cx + ',' + cy + ')', 'data-rank': String(r),
                                 'data-health': rh ? rh.state : '' }, [
          MW.svg('rect', { class: 'mesh-rank' + (rh && rh.state === 'culprit' ? ' culprit' : ''), width: cw, height: ch,
                           rx: big ? 3 : 1.5, fill: rh ? HEALTH_COLORS[rh.state] : groupColor(c) }),
          MW.svg('title', { text: tip })
        ]);
        if (big) {
          cell.appendChild(MW.svg('text', { class: 'mesh-label strong', x: cw / 2, y: 12, text: 'r' + r }));
          if (c) cell.appendChild(MW.svg('text', { class: 'mesh-label', x: cw / 2, y: 24, text: c.join(',') }));
        }
        g.appendChild(cell);
      });
      items.push(g);
      right = Math.max(right, x + w);
      x += w + 10;
      rowH = Math.max(rowH, h);
    });
    var svg = MW.svg('svg', { xmlns: 'http://www.w3.org/2000/svg', role: 'img', id: 'mesh-svg' });
    items.forEach(function (g) { svg.appendChild(g); });
    box.appendChild(svg);
    svg.setAttribute('width', String(Math.ceil(Math.max(right, 100)) + 2));
    svg.setAttribute('height', String(y + rowH + 2));
  }

  function renderInfo(info) {
    state.info = info;
    state.infoAt = Date.now();
    renderFacts(info.run);
    renderRootCause(info.root_cause);
    renderProblems(info.problems);
    renderMesh(info);
    MW.$('config').textContent = info.config === undefined ? '' : MW.visible(JSON.stringify(info.config, null, 2));
    var slurm = info.slurm_script;
    MW.$('slurm-box').hidden = !(typeof slurm === 'string' && slurm);
    MW.$('slurm').textContent = typeof slurm === 'string' ? MW.visible(slurm) : '';
    var rankIn = MW.$('rank');
    state.infoDone = true;
    if (state.frame) drawFrame(state.frame);  // capacity may come from info
    else MW.setState({ ready: state.frameDone && state.infoDone });
  }

  var refreshInfo = MW.coalesce(function () {
    state.infoAt = Date.now();
    return MW.fetchJSON('/api/runs/' + id, 'info').then(renderInfo);
  });

  // ---- health: hung, mismatched, straggling --------------------------------------------------

  // The workbench's colours (ui/rank_health.cpp, dark theme).
  var HEALTH_COLORS = { computing: '#2f5d4a', waiting: '#8a6d1d', slow: '#9a5a22', culprit: '#b3362f' };
  var HEALTH_TITLES = { hang: 'Hung', mismatch: 'Mismatched collectives', straggler: 'Straggler', failed: 'Failed' };
  var healthState = { data: null, inFlight: false, again: false, live: true };

  function isLive(status) { return status === 'running' || status === 'created'; }

  // Every rank's state from the diagnosis, as the workbench derives it (ui/health_model.cpp):
  // a Map rank -> {state, note} and `rest` for ranks neither waiting nor blamed; null while the
  // run is healthy (the mesh then keeps its tp-group colours).
  function rankHealth() {
    var d = healthState.data;
    if (!d || typeof d.state !== 'string' || d.state === 'healthy') return null;
    var hung = d.state === 'hang' || d.state === 'mismatch';
    var m = new Map();
    m.rest = { state: 'computing', note: hung ? 'moving (no stall reported)' : 'computing' };
    arr(d.waiting).forEach(function (g) {
      var note = 'waiting in ' + g.axis + ' ' + g.op + ' #' + g.seq;
      arr(g.ranks).forEach(function (r) { m.set(r, { state: 'waiting', note: note }); });
    });
    arr(d.stragglers).forEach(function (s) { m.set(s.rank, { state: 'slow', note: s.slow_in === 'not running' ? 'not running' : 'slow in ' + s.slow_in }); });
    arr(d.culprits).forEach(function (c) {
      var words = arr(c.waited_by).length ? 'never entered the collective' : 'ended';
      if (c.process) words += ': ' + c.process;
      if (c.phase) words += ', last in ' + c.phase;
      m.set(c.rank, { state: 'culprit', note: words });
    });
    return m;
  }

  function renderHealth(d) {
    var prev = healthState.data;
    healthState.data = d;
    if (d && typeof d.status === 'string') healthState.live = isLive(d.status);
    var box = MW.clear(MW.$('health'));
    var bad = d && typeof d.state === 'string' && d.state !== 'healthy';
    box.className = 'banner health' + (bad ? ' state-' + d.state.replace(/[^a-z]/g, '') : '');
    if (bad) {
      box.appendChild(MW.el('strong', { text: (HEALTH_TITLES[d.state] || d.state) + ': ' + String(d.summary || '') }));
      var culprits = arr(d.culprits);
      if (culprits.length) {
        var table = MW.el('table', { className: 'culprits', id: 'health-culprits' });
        table.appendChild(MW.el('thead', null, [MW.el('tr', null, ['rank', 'node', 'pid', 'process', 'phase', 'ended']
          .map(function (t) { return MW.el('th', { text: t }); }))]));
        var body = MW.el('tbody');
        culprits.forEach(function (c) {
          var node = String(c.node) + (c.host ? ' (' + c.host + ')' : '');
          body.appendChild(MW.el('tr', { dataset: { rank: String(c.rank) } }, [
            String(c.rank), node, MW.isNum(c.pid) && c.pid > 0 ? String(c.pid) : '—', c.process || 'unknown',
            String(c.phase || '—'), String(c.ended || '')
          ].map(function (t) { return MW.el('td', { text: t }); })));
        });
        table.appendChild(body);
        box.appendChild(table);
      }
      arr(d.notes).forEach(function (n) { box.appendChild(MW.el('p', { className: 'hint', text: String(n) })); });
    }
    box.hidden = !bad;
    MW.setState({ health: d && typeof d.state === 'string' ? d.state : null,
                  healthCulprits: bad ? arr(d.culprits).length : 0, healthLoaded: (window.meshwork.healthLoaded || 0) + 1 });
    // The mesh's colours follow the diagnosis: redrawn when it changed.
    if (state.info && JSON.stringify(prev && [prev.state, prev.culprits, prev.waiting, prev.stragglers]) !==
        JSON.stringify(d && [d.state, d.culprits, d.waiting, d.stragglers])) renderMesh(state.info);
  }

  // Plain fetch, as for the prediction: a health that cannot be read never raises the page's
  // error banner (the run may be another tool's, without a mesh: {"available": false}).
  function refreshHealth() {
    if (healthState.inFlight) { healthState.again = true; return; }
    healthState.inFlight = true;
    fetch('/api/runs/' + id + '/health', { headers: { Accept: 'application/json' }, cache: 'no-store', credentials: 'same-origin' })
      .then(function (res) { return res.ok ? res.json() : null; })
      .then(function (d) { renderHealth(d && d.available === false ? null : d); }, function () { /* next tick */ })
      .then(function () {
        healthState.inFlight = false;
        if (healthState.again) { healthState.again = false; refreshHealth(); }
      });
  }
  setInterval(function () { if (healthState.live) refreshHealth(); }, 2000);

  // ---- controls --------------------------------------------------------------------------------

  var slider = MW.$('smoothing');
  slider.addEventListener('input', function () {
    state.smoothing = Math.max(0, Math.min(0.99, parseFloat(slider.value) || 0));
    MW.$('smoothing-value').textContent = state.smoothing.toFixed(2);
    drawLoss();
  });
  state.smoothing = parseFloat(slider.value) || 0;
  MW.$('smoothing-value').textContent = state.smoothing.toFixed(2);

  var rankIn = MW.$('rank');
  rankIn.addEventListener('change', function () {
    // "mean" (or anything not a rank) is the mean over ranks; the API's rank -1.
    var text = rankIn.value.trim();
    var r = /^\d+$/.test(text) ? parseInt(text, 10) : -1;
    if (MW.isNum(state.world) && r > state.world - 1) r = state.world - 1;
    rankIn.value = r === -1 ? 'mean' : String(r);
    state.rank = r;
    MW.$('rank-hint').textContent = r === -1 ? 'mean over ranks' : 'rank ' + r;
    refreshFrame();
  });

  MW.onResize(function () { refreshFrame(); if (state.info) renderMesh(state.info); });

  // ---- live ------------------------------------------------------------------------------------

  MW.live('/api/live?run=' + id, function (m) {
    if (m.type !== 'run') return;
    if (m.run !== undefined && String(m.run) !== id) return;
    refreshFrame();
    if (m.status !== undefined && m.status !== state.status) refreshHealth();
    if ((m.status !== undefined && m.status !== state.status) || Date.now() - state.infoAt > 5000) refreshInfo();
  }, function () { refreshFrame(); refreshInfo(); refreshHealth(); });

  refreshInfo();
  refreshFrame();
  refreshHealth();
})();
