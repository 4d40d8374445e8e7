/* Meshwork web view: helpers shared by every page (runs.js, run.js, compare.js).
 * Plain ES2017, no modules: everything lives on the global `MW`.
 * Text from the API is only ever put into the page with textContent / DOM nodes. */
'use strict';

// The test hook (docs/web.md): ready, points, error; pages add a few more fields.
window.meshwork = { ready: false, points: 0, error: null };

var MW = (function () {
  var MW = {};

  // Run colours (one per run of a compare, one per rank in the memory chart): the workbench's
  // dark-theme run colours (ui/axis_colors.cpp run_color; a test holds the two alike).
  MW.COLORS = ['#F0707E', '#5CC4CC', '#8593F0', '#C99A78', '#E27BD3',
               '#A4C45A', '#AAB4C2', '#CFC59A', '#7FB88E', '#C18BE6'];
  // Mesh axes, as in the workbench (ui/axis_colors.cpp, dark variants), plus compute.
  MW.AXES = ['dp_replicate', 'dp_shard', 'cp', 'tp'];
  MW.AXIS_COLORS = { dp_replicate: '#4AA8E8', dp_shard: '#3CCB9F', cp: '#E6A0C8', tp: '#FF8A3D',
                     compute: '#8C9AB0' };
  MW.STATUSES = ['created', 'running', 'ok', 'failed', 'stopped'];

  MW.color = function (i) { return MW.COLORS[((i % MW.COLORS.length) + MW.COLORS.length) % MW.COLORS.length]; };

  MW.withAlpha = function (hex, alpha) {
    var m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(hex);
    if (!m) return hex;
    return 'rgba(' + parseInt(m[1], 16) + ',' + parseInt(m[2], 16) + ',' + parseInt(m[3], 16) + ',' + alpha + ')';
  };

  // ---- DOM -------------------------------------------------------------------------------------

  // Text from a run (names, configs, messages) as it is, with its bidirectional controls shown as
  // <U+202E> instead of obeyed: a right-to-left override would make "safe\u202Eexe.txt" read
  // "safetxt.exe". The few controls that matter: LRM/RLM/ALM, the embeddings and overrides
  // (U+202A-202E) and the isolates (U+2066-2069).
  var BIDI_CONTROLS = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g;
  MW.visible = function (s) {
    return String(s).replace(BIDI_CONTROLS, function (c) {
      return '<U+' + c.charCodeAt(0).toString(16).toUpperCase() + '>';
    });
  };

  // el('a', {href: '/', className: 'x', text: 'hi'}, [children]) - never parses HTML; text is
  // shown through MW.visible.
  MW.el = function (tag, props, children) {
    var e = document.createElement(tag);
    if (props) {
      Object.keys(props).forEach(function (k) {
        var v = props[k];
        if (v === undefined || v === null) return;
        if (k === 'text') e.textContent = MW.visible(v);
        else if (k === 'title') e.title = MW.visible(v);
        else if (k === 'className') e.className = v;
        else if (k === 'dataset') Object.keys(v).forEach(function (d) { e.dataset[d] = v[d]; });
        else if (k in e && typeof v !== 'string') e[k] = v;
        else e.setAttribute(k, String(v));
      });
    }
    (children || []).forEach(function (c) {
      if (c === null || c === undefined) return;
      e.appendChild(typeof c === 'string' ? document.createTextNode(MW.visible(c)) : c);
    });
    return e;
  };

  MW.svg = function (tag, attrs, children) {
    var e = document.createElementNS('http://www.w3.org/2000/svg', tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === 'text') e.textContent = MW.visible(attrs[k]);
      else e.setAttribute(k, String(attrs[k]));
    });
    (children || []).forEach(function (c) { if (c) e.appendChild(c); });
    return e;
  };

  MW.clear = function (e) { while (e.firstChild) e.removeChild(e.firstChild); return e; };
  MW.$ = function (id) { return document.getElementById(id); };

  // For the few places that must hand a string to a library as HTML.
  MW.escapeHTML = function (s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c];
    });
  };

  MW.statusBadge = function (status, title) {
    var s = String(status || '');
    var cls = MW.STATUSES.indexOf(s) >= 0 ? s : 'other';
    return MW.el('span', { className: 'status status-' + cls, text: s || '?', title: title || undefined });
  };

  // ---- state: window.meshwork and the #status line ---------------------------------------------

  var errors = {};  // channel -> message

  function renderStatus() {
    var st = MW.$('status');
    if (!st) return;
    var m = window.meshwork;
    st.textContent = (m.error ? 'error: ' + m.error : (m.ready ? 'ready' : 'loading…')) +
      ' · ' + (m.points || 0) + ' points';
    st.dataset.ready = String(!!m.ready);
    st.dataset.points = String(m.points || 0);
    if (m.error) st.dataset.error = m.error; else delete st.dataset.error;
  }

  MW.setState = function (o) {
    Object.keys(o).forEach(function (k) { window.meshwork[k] = o[k]; });
    // When the page first became ready, in ms since navigation started (bench/web.sh reads it).
    if (window.meshwork.ready && !window.meshwork.readyAt) window.meshwork.readyAt = performance.now();
    // When the last frame was drawn (the live-latency bench compares it with the store's commit).
    window.meshwork.drawnAt = Date.now();
    renderStatus();
  };

  function renderErrors() {
    var banner = MW.$('error-banner');
    var keys = Object.keys(errors);
    var last = keys.length ? errors[keys[keys.length - 1]] : null;
    window.meshwork.error = last;
    if (banner) {
      MW.clear(banner);
      var seen = new Set();
      keys.forEach(function (k) {
        if (seen.has(errors[k])) return;
        seen.add(errors[k]);
        banner.appendChild(MW.el('div', { text: errors[k] }));
      });
      banner.hidden = keys.length === 0;
    }
    renderStatus();
  }

  MW.showError = function (channel, msg) {
    delete errors[channel];  // re-insert last so it becomes window.meshwork.error
    errors[channel] = String(msg);
    renderErrors();
  };
  MW.clearError = function (channel) {
    if (!(channel in errors)) return;
    delete errors[channel];
    renderErrors();
  };

  window.addEventListener('error', function (ev) {
    MW.showError('script', 'script error: ' + (ev.message || ev.error || 'unknown') +
      (ev.filename ? ' (' + ev.filename.replace(/^.*\//, '') + ':' + ev.lineno + ')' : ''));
  });
  window.addEventListener('unhandledrejection', function (ev) {
    var r = ev.reason;
    MW.showError('script', 'script error: ' + (r && r.message ? r.message : String(r)));
  });

  // ---- fetch -----------------------------------------------------------------------------------

  // GET url as JSON. A failure shows the server's {"error"} in the banner (keyed by channel, cleared
  // by the channel's next success) and rejects with an Error carrying that message.
  MW.fetchJSON = function (url, channel) {
    channel = channel || url;
    return fetch(url, { headers: { Accept: 'application/json' }, cache: 'no-store', credentials: 'same-origin' })
      .then(function (res) {
        return res.text().then(function (body) {
          var data = null;
          try { data = body ? JSON.parse(body) : null; } catch (e) { data = null; }
          if (!res.ok) {
            var msg = data && typeof data.error === 'string' ? data.error
              : ('HTTP ' + res.status + ' ' + res.statusText + (body && !data ? ': ' + body.slice(0, 200) : ''));
            throw new Error(msg);
          }
          if (data === null) throw new Error('not JSON: ' + url);
          return data;
        });
      }, function (netErr) {
        throw new Error('cannot reach the server (' + (netErr && netErr.message ? netErr.message : netErr) + ')');
      })
      .then(function (data) { MW.clearError(channel); return data; },
            function (err) { MW.showError(channel, err.message); throw err; });
  };

  // Calls fn() (returning a promise) with never more than one in flight; a request made while one
  // is in flight is remembered (once) and run when it ends.
  MW.coalesce = function (fn) {
    var inFlight = false, pending = false;
    function run() {
      if (inFlight) { pending = true; return; }
      inFlight = true; pending = false;
      Promise.resolve().then(fn).catch(function () { /* shown by fetchJSON */ }).then(function () {
        inFlight = false;
        if (pending) run();
      });
    }
    return run;
  };

  MW.param = function (name) { return new URLSearchParams(location.search).get(name); };

  // ---- formatting ------------------------------------------------------------------------------

  function isNum(x) { return typeof x === 'number' && isFinite(x); }
  MW.isNum = isNum;

  MW.fmtNum = function (x, digits) {
    if (!isNum(x)) return '—';
    var a = Math.abs(x);
    if (a === 0) return '0';
    if (a >= 1e6) return MW.fmtSI(x);
    if (Number.isInteger(x) && a < 1e6) return x.toLocaleString('en-US');
    if (a >= 1000) return x.toLocaleString('en-US', { maximumFractionDigits: 0 });
    if (a < 1e-3) return x.toExponential((digits || 4) - 1);
    return String(Number(x.toPrecision(digits || 4)));
  };

  MW.fmtSI = function (x) {
    if (!isNum(x)) return '—';
    var a = Math.abs(x), units = [[1e12, 'T'], [1e9, 'B'], [1e6, 'M'], [1e3, 'k']];
    for (var i = 0; i < units.length; i++) {
      if (a >= units[i][0]) return String(Number((x / units[i][0]).toPrecision(3))) + units[i][1];
    }
    return String(Number(x.toPrecision(3)));
  };
  MW.fmtTokens = MW.fmtSI;
  MW.fmtRate = function (x) { return isNum(x) ? MW.fmtSI(x) + '/s' : '—'; };

  MW.fmtBytes = function (x) {
    if (!isNum(x)) return '—';
    var units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'], i = 0, v = Math.abs(x);
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (x < 0 ? '-' : '') + (i === 0 ? String(v) : v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2)) + ' ' + units[i];
  };

  MW.fmtSeconds = function (s) {
    if (!isNum(s)) return '—';
    var a = Math.abs(s);
    if (a === 0) return '0 s';
    if (a < 1e-3) return Number((s * 1e6).toPrecision(3)) + ' µs';
    if (a < 1) return Number((s * 1e3).toPrecision(3)) + ' ms';
    if (a < 120) return Number(s.toPrecision(3)) + ' s';
    if (a < 7200) return Number((s / 60).toPrecision(3)) + ' min';
    return Number((s / 3600).toPrecision(3)) + ' h';
  };

  // Predicted vs measured, as the workbench shows them: milliseconds without the unit (123 / 12.3 /
  // 1.23 / 0.123) and a relative error as a signed percentage (0.123 -> "+12.3 %").
  MW.fmtPredMs = function (s) {
    if (!isNum(s)) return '—';
    var ms = s * 1000, a = Math.abs(ms);
    if (a === 0) return '0';
    return ms.toFixed(a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : 3);
  };
  MW.fmtSignedPercent = function (e) {
    if (!isNum(e)) return '—';
    var d = Math.abs(e * 100).toFixed(1);
    return d === '0.0' ? '0.0 %' : (e < 0 ? '-' : '+') + d + ' %';
  };
  MW.fmtPercent = function (x) { return isNum(x) ? Number((x * 100).toPrecision(3)) + '%' : '—'; };

  MW.fmtLoss = function (x) { return isNum(x) ? String(Number(x.toPrecision(5))) : '—'; };

  // created / problem times: ISO text, or seconds (or ms) since the epoch.
  MW.fmtTime = function (t) {
    if (t === null || t === undefined || t === '') return '—';
    var d = null;
    if (typeof t === 'number' && isFinite(t)) d = new Date(t > 1e12 ? t : t * 1000);
    else if (typeof t === 'string' && /^\d{4}-\d\d-\d\d/.test(t)) d = new Date(t);
    if (!d || isNaN(d.getTime())) return String(t);
    function p(n) { return n < 10 ? '0' + n : String(n); }
    return d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' + p(d.getDate()) + ' ' +
      p(d.getHours()) + ':' + p(d.getMinutes()) + ':' + p(d.getSeconds());
  };

  MW.fmtValue = function (v) {  // a config value
    if (v === null || v === undefined) return '—';
    if (typeof v === 'string') return v;
    return JSON.stringify(v);
  };

  MW.shapeText = function (run) {
    if (!run) return '—';
    if (run.shape_text) return run.shape_text;
    var s = run.shape;
    if (s) return [s.dp_replicate, s.dp_shard, s.cp, s.tp].join('×');
    return '—';
  };

  // ---- data ------------------------------------------------------------------------------------

  // TensorBoard's debiased exponential moving average; weight in [0, 1).
  MW.smooth = function (points, weight) {
    if (!points || !(weight > 0)) return points || [];
    var w = Math.min(weight, 0.999), last = 0, n = 0, out = new Array(points.length);
    for (var i = 0; i < points.length; i++) {
      var y = points[i][1];
      if (!isNum(y)) { out[i] = [points[i][0], null]; continue; }
      last = last * w + (1 - w) * y;
      n++;
      out[i] = [points[i][0], last / (1 - Math.pow(w, n))];
    }
    return out;
  };

  // Number of [x, y] pairs in a list of point arrays.
  MW.countPoints = function (arrays) {
    var n = 0;
    arrays.forEach(function (a) { if (Array.isArray(a)) n += a.length; });
    return n;
  };

  // [[points], [points], ...] -> dygraphs rows [x, y0, y1, ...], null where a series has no value.
  MW.merge = function (seriesList, mapY) {
    var xs = new Map();
    seriesList.forEach(function (pts) {
      (pts || []).forEach(function (p) { if (isNum(p[0])) xs.set(p[0], null); });
    });
    var sorted = Array.from(xs.keys()).sort(function (a, b) { return a - b; });
    var width = seriesList.length + 1;
    var rows = sorted.map(function (x, i) {
      xs.set(x, i);
      var r = new Array(width).fill(null);
      r[0] = x;
      return r;
    });
    seriesList.forEach(function (pts, s) {
      (pts || []).forEach(function (p) {
        var i = xs.get(p[0]);
        if (i === undefined || i === null) return;
        var y = p[1];
        rows[i][s + 1] = isNum(y) ? (mapY ? mapY(y) : y) : null;
      });
    });
    return rows;
  };

  MW.clampPixels = function (w) {
    w = Math.round(w || 800);
    return Math.max(16, Math.min(4096, w));
  };

  // ---- live (WebSocket, reconnecting) ----------------------------------------------------------

  // MW.live('/api/live?run=3', onMessage(obj), onReopen()) - onReopen after a reconnect (updates may
  // have been missed while it was down). The #live element shows the state.
  MW.live = function (path, onMessage, onReopen) {
    var delay = 500, opened = false, ws = null;
    var ind = MW.$('live');
    function show(state, text) {
      if (!ind) return;
      ind.className = 'live live-' + state;
      ind.textContent = text;
    }
    function connect() {
      var url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + path;
      show('connecting', 'connecting…');
      try { ws = new WebSocket(url); } catch (e) { retry(); return; }
      ws.addEventListener('open', function () {
        delay = 500;
        show('on', 'live');
        if (opened && onReopen) onReopen();
        opened = true;
      });
      ws.addEventListener('message', function (ev) {
        var m;
        try { m = JSON.parse(ev.data); } catch (e) { return; }
        if (m && typeof m === 'object') onMessage(m);
      });
      ws.addEventListener('close', function () { show('off', 'offline'); retry(); });
    }
    function retry() {
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 10000);
    }
    connect();
  };

  // ---- charts (dygraphs with a CSP-safe, escaped legend of our own) ----------------------------

  // dygraphs' own legend builds HTML from the series labels with inline style attributes (blocked
  // by a default-src 'self' CSP, and unsafe for run names): drop the plugin, we draw our own.
  if (window.Dygraph && Array.isArray(Dygraph.PLUGINS) && Dygraph.Plugins && Dygraph.Plugins.Legend) {
    Dygraph.PLUGINS = Dygraph.PLUGINS.filter(function (p) { return p !== Dygraph.Plugins.Legend; });
  }

  // new MW.Chart(plotDiv, legendDiv, {xFormat, yFormat, zoomCallback, onReset, dygraph: {...}})
  // chart.set([{name, color, points, width, dashed, dotted, pointsOnly, legend: bool, mapY}], opts)
  function Chart(plot, legend, opts) {
    this.plot = plot;
    this.legend = legend;
    this.opts = opts || {};
    this.g = null;
    this.series = [];
    this.valueEls = [];
    this.empty = null;
    this.dateWindow = null;
  }

  Chart.prototype.baseOptions = function () {
    var self = this, o = this.opts;
    var xf = o.xFormat || MW.fmtNum, yf = o.yFormat || MW.fmtNum;
    var model = Object.assign({}, Dygraph.defaultInteractionModel, {
      dblclick: function (event) { event.preventDefault(); if (o.onReset) o.onReset(); }
    });
    return Object.assign({
      legend: 'never',
      connectSeparatedPoints: true,
      axisLineColor: '#4a5059',
      gridLineColor: '#2c3138',
      axisLabelFontSize: 11,
      axisLabelWidth: 60,
      xAxisHeight: 22,
      strokeWidth: 1.5,
      highlightCircleSize: 3,
      rightGap: 8,
      interactionModel: model,
      axes: {
        x: { axisLabelFormatter: function (v) { return MW.escapeHTML(xf(v)); }, valueFormatter: xf },
        y: { axisLabelFormatter: function (v) { return MW.escapeHTML(yf(v)); }, valueFormatter: yf,
             axisLabelWidth: 60 }
      },
      zoomCallback: function (minX, maxX) {
        if (o.zoomCallback) o.zoomCallback.call(this, minX, maxX, self);
      },
      highlightCallback: function (ev, x, points) { self.showValues(x, points); },
      unhighlightCallback: function () { self.showValues(null, null); }
    }, o.dygraph || {});
  };

  Chart.prototype.buildLegend = function () {
    var self = this;
    this.valueEls = [];
    if (!this.legend) return;
    MW.clear(this.legend);
    this.xEl = MW.el('span', { className: 'legend-x' });
    this.legend.appendChild(this.xEl);
    this.series.forEach(function (s, i) {
      if (s.legend === false) { self.valueEls.push(null); return; }
      var sw = MW.el('span', { className: 'swatch' + (s.dashed ? ' swatch-dashed' : '') });
      if (s.dashed) sw.style.borderColor = s.color; else sw.style.background = s.color;
      var val = MW.el('span', { className: 'legend-value' });
      self.legend.appendChild(MW.el('span', { className: 'legend-item' }, [sw, MW.el('span', { text: s.name }), val]));
      self.valueEls.push(val);
    });
  };

  Chart.prototype.showValues = function (x, points) {
    if (!this.legend) return;
    var yf = this.opts.legendFormat || this.opts.yFormat || MW.fmtNum;
    var xf = this.opts.xFormat || MW.fmtNum;
    this.xEl.textContent = x === null ? '' : (this.opts.xName || 'x') + ' ' + xf(x);
    var byName = {};
    (points || []).forEach(function (p) { byName[p.name] = p.yval; });
    var self = this;
    this.valueEls.forEach(function (el, i) {
      if (!el) return;
      var lab = 's' + i;
      el.textContent = points && (lab in byName) && isNum(byName[lab]) ? yf(byName[lab]) : '';
    });
  };

  Chart.prototype.set = function (series) {
    this.series = series;
    var rows = MW.merge(series.map(function (s) { return s.points; }));
    var hasData = rows.length > 0 && series.some(function (s) { return s.points && s.points.length; });
    this.buildLegend();
    if (!hasData) {
      if (this.g) { this.g.destroy(); this.g = null; }
      MW.clear(this.plot);
      this.plot.classList.add('chart-empty');
      this.plot.appendChild(MW.el('div', { className: 'empty', text: this.opts.emptyText || 'no data' }));
      return 0;
    }
    this.plot.classList.remove('chart-empty');
    var labels = ['x'], colors = [], per = {};
    series.forEach(function (s, i) {
      var lab = 's' + i;
      labels.push(lab);
      colors.push(s.color);
      var so = { strokeWidth: s.width === undefined ? 1.5 : s.width };
      if (s.dashed) so.strokePattern = [6, 4];
      if (s.dotted) so.strokePattern = [2, 3];
      if (s.pointsOnly) { so.strokeWidth = 0; so.drawPoints = true; so.pointSize = 2.5; so.connectSeparatedPoints = false; }
      if (s.axis) so.axis = s.axis;
      per[lab] = so;
    });
    var o = { file: rows, labels: labels, colors: colors, series: per, dateWindow: this.dateWindow };
    if (!this.g) {
      MW.clear(this.plot);
      this.g = new Dygraph(this.plot, rows, Object.assign(this.baseOptions(), o));
    } else {
      this.g.updateOptions(o);
    }
    return rows.length;
  };

  Chart.prototype.setWindow = function (win) {
    this.dateWindow = win;
    if (this.g) this.g.updateOptions({ dateWindow: win, valueRange: null });
  };

  Chart.prototype.width = function () { return this.plot.clientWidth; };

  MW.Chart = Chart;

  // Wraps a dygraphs zoomCallback: ignores y-only zooms (x range unchanged) and returns [min, max].
  MW.xZoomHandler = function (getCurrent, onZoom) {
    return function (minX, maxX, chart) {
      var g = chart && chart.g;
      var cur = getCurrent();
      if (cur && Math.abs(cur[0] - minX) < 1e-9 && Math.abs(cur[1] - maxX) < 1e-9) return;
      if (!cur && g && !g.isZoomed('x')) return;
      onZoom([minX, maxX]);
    };
  };

  // Re-runs fn after the window's width settles (and only if it changed).
  MW.onResize = function (fn) {
    var t = null, last = window.innerWidth;
    window.addEventListener('resize', function () {
      clearTimeout(t);
      t = setTimeout(function () {
        if (Math.abs(window.innerWidth - last) < 24) return;
        last = window.innerWidth;
        fn();
      }, 300);
    });
  };

  return MW;
})();
