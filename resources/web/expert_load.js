/* The run page's expert load (mixtures of experts): for one sparse layer (the layer picker), a heat
 * map of experts (rows) by steps (columns) from /api/runs/ID/expert-load, drawn as the workbench's
 * Monitor draws it (ui/expert_load_view.cpp): each cell is the expert's tokens over the step's mean,
 * blue below 1, the expert colour above, on a log2 scale clamped at 1/4 and 4; under it a strip of
 * each column's max/mean; a legend; the aux loss. run.js hands every frame to
 * MW.expertLoad.onFrame(): the card stays hidden while the frame's moe_layers is empty (a dense run). */
'use strict';

(function () {
  var id = MW.param('id');
  // ui/expert_load_view.cpp's colours, dark theme (the page is dark): under, even, over (the
  // expert colour of ui/axis_colors.cpp).
  var UNDER = '#56B4E9', EVEN = '#3A3F47', OVER = '#E17AA0';
  var LABEL_W = 44, LEGEND_W = 64, STRIP_H = 46, AXIS_H = 18, CLAMP = 2;
  var st = { layer: -1, data: null, layers: '', pixels: 0, zoom: null };

  function rgb(hex) { return [1, 3, 5].map(function (i) { return parseInt(hex.substr(i, 2), 16); }); }
  function mix(a, b, t) {
    t = Math.max(0, Math.min(1, t));
    var x = rgb(a), y = rgb(b);
    return 'rgb(' + x.map(function (v, i) { return Math.round(v + (y[i] - v) * t); }).join(', ') + ')';
  }
  function ratioColor(r) {
    var l = r > 0 ? Math.max(-CLAMP, Math.min(CLAMP, Math.log2(r))) : -CLAMP;
    return l < 0 ? mix(EVEN, UNDER, -l / CLAMP) : mix(EVEN, OVER, l / CLAMP);
  }
  function ratios(tokens) {
    var sum = 0;
    tokens.forEach(function (t) { sum += t; });
    var mean = sum / Math.max(1, tokens.length);
    return tokens.map(function (t) { return sum > 0 ? t / mean : 0; });
  }
  function stepsText(c) { return c.first_step === c.last_step ? 'step ' + c.first_step : 'steps ' + c.first_step + '–' + c.last_step; }

  // Geometry in CSS pixels of the canvas.
  function geom(canvas, d) {
    var w = canvas.clientWidth, h = canvas.clientHeight;
    var area = { x: LABEL_W, y: 2, w: Math.max(1, w - LABEL_W - LEGEND_W), h: Math.max(1, h - 2 - STRIP_H - AXIS_H) };
    var cols = d.columns.length, rows = d.experts;
    return {
      area: area, cols: cols, rows: rows,
      cell: function (c, e) {
        var x0 = area.x + Math.floor(c * area.w / cols), x1 = area.x + Math.floor((c + 1) * area.w / cols);
        var y0 = area.y + Math.floor(e * area.h / rows), y1 = area.y + Math.floor((e + 1) * area.h / rows);
        return { x: x0, y: y0, w: Math.max(1, x1 - x0), h: Math.max(1, y1 - y0) };
      }
    };
  }

  function draw() {
    var d = st.data, canvas = MW.$('expert-map');
    if (!d || !canvas) return;
    var dpr = window.devicePixelRatio || 1;
    canvas.width = Math.round(canvas.clientWidth * dpr);
    canvas.height = Math.round(canvas.clientHeight * dpr);
    var ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, canvas.clientWidth, canvas.clientHeight);
    ctx.font = '11px sans-serif';
    var muted = getComputedStyle(MW.$('expert-card')).getPropertyValue('--muted').trim() || '#9aa4b2';
    if (!d.columns.length || !d.experts) {
      ctx.fillStyle = muted;
      ctx.fillText('No expert load stored yet', 10, 20);
      return;
    }
    var g = geom(canvas, d);
    d.columns.forEach(function (col, c) {
      var r = ratios(col.tokens);
      for (var e = 0; e < d.experts; ++e) {
        var box = g.cell(c, e);
        ctx.fillStyle = ratioColor(e < r.length ? r[e] : 0);
        ctx.fillRect(box.x, box.y, box.w, box.h);
      }
    });
    ctx.fillStyle = muted;
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    var every = Math.max(1, Math.ceil(14 / Math.max(1, g.area.h / d.experts)));
    for (var e = 0; e < d.experts; e += every) {
      var b = g.cell(0, e);
      ctx.fillText('e' + e, LABEL_W - 6, b.y + b.h / 2);
    }
    // max/mean per column: 1 at the strip's bottom.
    var s = { x: g.area.x, y: g.area.y + g.area.h + 6, w: g.area.w, h: STRIP_H - 8 };
    var top = 2;
    d.columns.forEach(function (c) { top = Math.max(top, c.imbalance); });
    top = Math.ceil(top);
    var yOf = function (v) { return s.y + s.h - (Math.max(1, v) - 1) / (top - 1) * s.h; };
    ctx.strokeStyle = OVER;
    ctx.lineWidth = 1.6;
    ctx.beginPath();
    d.columns.forEach(function (c, i) {
      var b = g.cell(i, 0), x = b.x + b.w / 2;
      if (i === 0) ctx.moveTo(x, yOf(c.imbalance)); else ctx.lineTo(x, yOf(c.imbalance));
    });
    ctx.stroke();
    ctx.fillText(top + '×', LABEL_W - 6, s.y);
    ctx.fillText('1×', LABEL_W - 6, s.y + s.h);
    ctx.textAlign = 'left';
    ctx.fillText('max/mean', s.x + s.w + 6, s.y + s.h / 2);
    ctx.textBaseline = 'top';
    ctx.fillText('step ' + d.columns[0].first_step, s.x, s.y + s.h + 3);
    ctx.textAlign = 'right';
    ctx.fillText('step ' + d.columns[d.columns.length - 1].last_step, s.x + s.w, s.y + s.h + 3);
    // Legend: 4x at the top, 1/4x at the bottom.
    var bar = { x: g.area.x + g.area.w + 10, y: g.area.y + 6, w: 10, h: Math.max(20, g.area.h - 12) };
    var grad = ctx.createLinearGradient(0, bar.y, 0, bar.y + bar.h);
    for (var i = 0; i <= 8; ++i) grad.addColorStop(i / 8, ratioColor(Math.pow(2, CLAMP - i * CLAMP / 4)));
    ctx.fillStyle = grad;
    ctx.fillRect(bar.x, bar.y, bar.w, bar.h);
    ctx.fillStyle = muted;
    ctx.textAlign = 'left';
    ctx.textBaseline = 'middle';
    [[2, '4×'], [1, '2×'], [0, 'mean'], [-1, '½×'], [-2, '¼×']].forEach(function (t) {
      ctx.fillText(t[1], bar.x + bar.w + 4, bar.y + (CLAMP - t[0]) / (2 * CLAMP) * bar.h);
    });
    MW.setState({ expertLayer: d.layer, expertColumns: d.columns.length, expertExperts: d.experts,
                  expertDrawn: (window.meshwork.expertDrawn || 0) + 1 });
  }

  function cellText(c, e) {
    var d = st.data, col = d.columns[c], r = ratios(col.tokens);
    var t = stepsText(col) + ' · layer ' + d.layer + ' · expert ' + e + ': ' +
      (col.first_step === col.last_step ? String(Math.round(col.tokens[e])) : col.tokens[e].toFixed(1) + ' (mean)') +
      ' tokens, ' + r[e].toFixed(2) + ' × mean · max/mean of the step ' + col.imbalance.toFixed(2);
    if (MW.isNum(col.aux_loss)) t += ' · aux loss ' + col.aux_loss.toFixed(4);
    return t;
  }

  function render(d) {
    st.data = d;
    var sel = MW.$('expert-layer');
    var names = JSON.stringify(d.layers);
    if (names !== st.layers) {
      st.layers = names;
      MW.clear(sel);
      d.layers.forEach(function (l) { sel.appendChild(MW.el('option', { value: String(l), text: 'layer ' + l })); });
    }
    if (d.layer !== null) sel.value = String(d.layer);
    var last = d.columns.length ? d.columns[d.columns.length - 1] : null;
    MW.$('expert-imbalance').textContent = last ? 'max/mean ' + last.imbalance.toFixed(2) + ' now · worst ' +
      d.max_imbalance.toFixed(2) + ' at step ' + d.max_imbalance_step : 'no routing stored yet';
    MW.$('expert-aux').textContent = last && MW.isNum(last.aux_loss) ? 'aux loss ' + last.aux_loss.toFixed(4) + ' (' + stepsText(last) + ')' : '';
    draw();
  }

  function url() {
    var canvas = MW.$('expert-map');
    var q = '/api/runs/' + id + '/expert-load?columns=' + Math.max(8, Math.floor((canvas.clientWidth || 800) / 4));
    if (st.layer >= 0) q += '&layer=' + st.layer;
    if (st.zoom) q += '&x_min=' + st.zoom[0] + '&x_max=' + st.zoom[1];
    return q;
  }
  var refresh = MW.coalesce(function () { return MW.fetchJSON(url(), 'expert-load').then(render); });

  if (MW.$('expert-layer')) {
    MW.$('expert-layer').addEventListener('change', function () {
      st.layer = parseInt(MW.$('expert-layer').value, 10);
      refresh();
    });
    MW.$('expert-map').addEventListener('mousemove', function (ev) {
      var d = st.data, canvas = MW.$('expert-map');
      if (!d || !d.columns.length) return;
      var g = geom(canvas, d), rect = canvas.getBoundingClientRect();
      var x = ev.clientX - rect.left - g.area.x, y = ev.clientY - rect.top - g.area.y;
      var inside = x >= 0 && y >= 0 && x < g.area.w && y < g.area.h;
      MW.$('expert-hover').textContent = inside
        ? cellText(Math.min(g.cols - 1, Math.floor(x * g.cols / g.area.w)), Math.min(g.rows - 1, Math.floor(y * g.rows / g.area.h))) : '';
    });
  }

  MW.expertLoad = {
    // Every frame: shown (and re-read) for a mixture of experts only.
    onFrame: function (f, zoom) {
      var card = MW.$('expert-card');
      var moe = f && Array.isArray(f.moe_layers) && f.moe_layers.length > 0;
      card.hidden = !moe;
      MW.setState({ expertShown: moe });
      if (!moe) return;
      st.zoom = zoom || null;
      refresh();
    },
    // For tests: a cell's centre in canvas pixels, its colour as drawn, and its hover text.
    cellCenter: function (c, e) {
      var canvas = MW.$('expert-map'), b = geom(canvas, st.data).cell(c, e), dpr = window.devicePixelRatio || 1;
      return [Math.floor((b.x + b.w / 2) * dpr), Math.floor((b.y + b.h / 2) * dpr)];
    },
    ratioColor: ratioColor,
    cellText: cellText
  };
})();
