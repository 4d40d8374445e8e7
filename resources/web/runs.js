/* The runs list: GET /api/runs, live on /api/live ({"type":"runs"} -> re-fetch). */
'use strict';

(function () {
  var selected = new Set();   // run ids (numbers), kept across live re-fetches
  var shownIds = [];
  var lastVersion = null;
  var body = MW.$('runs-body');
  var compareBtn = MW.$('compare');
  var selInfo = MW.$('selection');
  var selectAll = MW.$('select-all');

  function updateSelection() {
    // Forget selected runs that disappeared from the store.
    selected.forEach(function (id) { if (shownIds.indexOf(id) < 0) selected.delete(id); });
    var n = selected.size;
    compareBtn.disabled = n < 2 || n > 10;
    selInfo.textContent = n === 0 ? 'select 2–10 runs to compare'
      : n + ' selected' + (n < 2 ? ' (select at least 2)' : n > 10 ? ' (at most 10)' : '');
    selectAll.checked = n > 0 && n === Math.min(10, shownIds.length);
    selectAll.indeterminate = n > 0 && !selectAll.checked;
  }

  function cell(text, cls) { return MW.el('td', { className: cls, text: text }); }

  function render(data) {
    var runs = Array.isArray(data.runs) ? data.runs : [];
    shownIds = runs.map(function (r) { return r.id; });
    MW.clear(body);
    if (runs.length === 0) {
      body.appendChild(MW.el('tr', null, [MW.el('td', { colSpan: 10, className: 'empty',
        text: 'No runs in the store yet.' })]));
    }
    runs.forEach(function (r) {
      var box = MW.el('input', { type: 'checkbox', checked: selected.has(r.id), title: 'select for compare' });
      box.addEventListener('change', function () {
        if (box.checked) selected.add(r.id); else selected.delete(r.id);
        updateSelection();
      });
      var link = MW.el('a', { href: '/run?id=' + encodeURIComponent(r.id), text: r.name || ('run ' + r.id) });
      var tr = MW.el('tr', null, [
        MW.el('td', { className: 'check' }, [box]),
        cell(String(r.id), 'num'),
        MW.el('td', { className: 'name' }, [link]),
        cell(MW.fmtTime(r.created), 'mono'),
        cell(MW.shapeText(r), 'mono'),
        cell(r.model || '—'),
        MW.el('td', null, [MW.statusBadge(r.status, r.exit_reason || undefined)]),
        cell(MW.fmtNum(r.steps), 'num'),
        cell(MW.fmtLoss(r.final_loss), 'num'),
        cell(MW.fmtRate(r.tokens_per_s), 'num')
      ]);
      body.appendChild(tr);
    });
    lastVersion = data.version;
    updateSelection();
    MW.setState({ ready: true, points: runs.length, runs: runs.length, version: data.version });
  }

  var refresh = MW.coalesce(function () {
    return MW.fetchJSON('/api/runs', 'runs').then(render);
  });

  selectAll.addEventListener('change', function () {
    if (selectAll.checked) shownIds.slice(0, 10).forEach(function (id) { selected.add(id); });
    else selected.clear();
    Array.prototype.forEach.call(body.querySelectorAll('input[type=checkbox]'), function (b, i) {
      b.checked = selected.has(shownIds[i]);
    });
    updateSelection();
  });

  compareBtn.addEventListener('click', function () {
    var ids = shownIds.filter(function (id) { return selected.has(id); });
    if (ids.length < 2 || ids.length > 10) return;
    location.href = '/compare?runs=' + ids.map(encodeURIComponent).join(',');
  });

  MW.live('/api/live', function (m) {
    if (m.type === 'runs') refresh();
  }, refresh);
  refresh();
})();
