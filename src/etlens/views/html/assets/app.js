/* etlens viewer — page wiring: toolbar, details panel, search and filters, legend, pass stepping,
 * side-by-side compare with lineage-synchronised selection, overlays, export, keyboard. */
'use strict';

(function () {
  var ETL = window.ETL, el = ETL.el;
  var t0 = performance.now();
  var D = JSON.parse(document.getElementById('etlens-data').textContent);
  var S = D.S, str = function (i) { return i >= 0 ? S[i] : ''; };
  ETL.times = { parsed: performance.now() - t0 };
  var $ = function (id) { return document.getElementById(id); };
  document.title = D.title || 'etlens graph';
  $('etl-title').textContent = D.title || 'etlens graph';

  var models = D.graphs.map(function (gp) { return new ETL.Model(gp, S); });
  var overlay = D.overlay || null;
  var viewsHost = $('etl-views');
  var views = models.map(function (M, k) {
    var pane = el('div', { cls: 'etl-pane' });
    if (models.length > 1) pane.appendChild(el('div', { cls: 'etl-pane-title', text: M.name }));
    var host = el('div', { cls: 'etl-stage' });
    pane.appendChild(host);
    viewsHost.appendChild(pane);
    var v = new ETL.View(M, host, { overlay: overlay });
    v.index = k;
    return v;
  });
  var active = views[0];
  ETL.times.layout = performance.now() - t0;

  // ---------------------------------------------------------------- details panel
  var details = $('etl-details');
  function row(tbl, k, v) {
    if (v === null || v === undefined || v === '') return;
    tbl.appendChild(el('tr', null, el('th', { text: k }), el('td', null, typeof v === 'string' ? el('span', { text: v }) : v)));
  }
  function nodeButton(view, i) {
    return el('button', { cls: 'etl-link', text: ETL.trunc(view.M.nodeName(i), 60), title: view.M.nodeName(i),
      onclick: function () { selectNode(view, i, true); } });
  }
  function histogram(view, nodes) {
    var counts = new Map(), M = view.M;
    nodes.forEach(function (i) { var t = M.str(M.gp.target[i]) || M.cat[i]; counts.set(t, (counts.get(t) || 0) + 1); });
    var arr = Array.from(counts.entries()).sort(function (a, b) { return b[1] - a[1]; });
    var ul = el('ul', { cls: 'etl-hist' });
    arr.slice(0, 15).forEach(function (p) { ul.appendChild(el('li', { text: p[1] + ' \u00D7 ' + p[0] })); });
    if (arr.length > 15) ul.appendChild(el('li', { text: '\u2026 ' + (arr.length - 15) + ' more kinds' }));
    return ul;
  }
  function descendants(M, g) {
    var out = [], stack = [g];
    while (stack.length) {
      var x = stack.pop();
      out.push.apply(out, M.gMembers[x]);
      stack.push.apply(stack, M.gChildren[x]);
    }
    return out;
  }
  function showDetails(view, it) {
    details.textContent = '';
    var M = view.M;
    if (it < 0) { details.appendChild(el('p', { cls: 'etl-hint', text: 'Click a node or a box. Double-click a box to expand it.' })); return; }
    var tbl = el('table', { cls: 'etl-kv' });
    if (it >= M.n) {
      var g = it - M.n, st = ETL.GROUP_STYLE[M.gKind[g]] || ETL.GROUP_STYLE[1];
      details.appendChild(el('h2', { text: M.gLabel[g] }));
      details.appendChild(tbl);
      row(tbl, 'kind', st.name);
      row(tbl, 'type', M.gType[g]);
      row(tbl, 'nodes', String(M.gCount[g]));
      details.appendChild(el('button', { cls: 'etl-btn', id: 'etl-toggle-group', text: view.collapsed[g] ? 'Expand' : 'Collapse',
        onclick: function () { view.toggleGroup(g); showDetails(view, it); } }));
      if (M.gRep[g] >= 0) {
        details.appendChild(el('h3', { text: 'Representative node' }));
        details.appendChild(nodeButton(view, M.gRep[g]));
      }
      details.appendChild(el('h3', { text: 'Operators inside' }));
      details.appendChild(histogram(view, descendants(M, g)));
      return;
    }
    var i = it, gp = M.gp, x = M.details(i);
    details.appendChild(el('h2', { text: M.str(gp.label[i]) }));
    details.appendChild(tbl);
    row(tbl, 'name', M.nodeName(i));
    row(tbl, 'kind', ETL.KINDS[gp.kind[i]] || '');
    row(tbl, 'op', M.str(gp.target[i]));
    row(tbl, 'category', M.cat[i]);
    row(tbl, 'output', x.o ? x.o.join('\n') : M.str(gp.shape[i]));
    if (view.snap) row(tbl, 'this pass', !view.snap.present[i] ? 'removed' : ['unchanged', 'added', 'rewritten'][view.snap.status[i]]);
    if (M.ov && overlay) row(tbl, overlay.label || 'value', M.ov[i] === null ? 'n/a' : ETL.fmtNum(M.ov[i]));
    var dh = gp.dh[i];
    if (dh) row(tbl, 'debug handles', dh.join(', '));
    var mp = M.modulePath(i);
    if (mp.length) {
      var ul = el('ul', { cls: 'etl-mods' });
      mp.forEach(function (p) { ul.appendChild(el('li', null, el('code', { text: p[0] || '(root)' }), ' ', el('span', { cls: 'etl-dim', text: p[1] }))); });
      row(tbl, 'module', ul);
    }
    var ins = el('div'), outs = el('div');
    M.preds[i].forEach(function (p) { ins.appendChild(nodeButton(view, p)); });
    M.succs[i].forEach(function (p) { outs.appendChild(nodeButton(view, p)); });
    if (M.preds[i].length) row(tbl, 'inputs', ins);
    if (M.succs[i].length) row(tbl, 'users', outs);
    if (x.d) {
      details.appendChild(el('h3', { text: 'Delegate' }));
      var dt = el('table', { cls: 'etl-kv' });
      details.appendChild(dt);
      row(dt, 'backend', x.d.backend);
      if (x.d.size !== null && x.d.size !== undefined) row(dt, 'payload', x.d.size.toLocaleString() + ' bytes');
      if (x.d.index !== null && x.d.index !== undefined) row(dt, 'index', String(x.d.index));
      if (x.d.inner) row(dt, 'inner graph', x.d.inner + ' nodes');
      Object.keys(x.d.specs || {}).forEach(function (k) { row(dt, k, String(x.d.specs[k])); });
      if (x.d.ops && x.d.ops.length) {
        details.appendChild(el('h3', { text: 'Ops inside (' + x.d.ops.length + ')' }));
        var counts = new Map();
        x.d.ops.forEach(function (o) { counts.set(o, (counts.get(o) || 0) + 1); });
        var hl = el('ul', { cls: 'etl-hist' });
        counts.forEach(function (c, o) { hl.appendChild(el('li', { text: c + ' \u00D7 ' + o })); });
        details.appendChild(hl);
      }
    }
    var ln = gp.ln ? gp.ln[i] : 0;
    if (ln && ln.length) {
      details.appendChild(el('h3', { text: 'Lineage (nearest first)' }));
      var ol = el('ol', { cls: 'etl-lineage' });
      for (var q = 0; q < ln.length; q += 3) {
        var lt = [M.str(ln[q + 1]), M.str(ln[q + 2]) ? 'by ' + M.str(ln[q + 2]) : ''].filter(Boolean).join(' \u00B7 ');
        ol.appendChild(el('li', null, el('code', { text: M.str(ln[q]) }), ' ', el('span', { cls: 'etl-dim', text: lt })));
      }
      details.appendChild(ol);
    }
    if (x.a && Object.keys(x.a).length) {
      details.appendChild(el('h3', { text: 'Arguments' }));
      var at = el('table', { cls: 'etl-kv' });
      Object.keys(x.a).forEach(function (k) {
        var v = x.a[k];
        row(at, k, ETL.trunc(typeof v === 'string' ? v : JSON.stringify(v), 400));
      });
      details.appendChild(at);
    }
    var stk = M.str(gp.st[i]);
    if (stk) {
      details.appendChild(el('h3', { text: 'Stack trace' }));
      details.appendChild(el('pre', { cls: 'etl-pre', text: stk }));
    }
  }

  // ---------------------------------------------------------------- selection (+ compare sync)
  var matchCache = {};
  function matchesFor(a, b) {
    var key = a + ',' + b;
    if (matchCache[key]) return matchCache[key];
    var flat = (D.match || {})[key] || [], m = new Map();
    for (var q = 0; q < flat.length;) { var src = flat[q], c = flat[q + 1]; m.set(src, flat.slice(q + 2, q + 2 + c)); q += 2 + c; }
    return (matchCache[key] = m);
  }
  function selectItem(view, it) {
    active = view;
    views.forEach(function (v) { if (v !== view) { v.sel = -1; } v.marked = null; });
    view.sel = it;
    showDetails(view, it);
    if (views.length > 1 && it >= 0 && it < view.M.n) {
      views.forEach(function (v) {
        if (v === view) return;
        var hits = matchesFor(view.index, v.index).get(it) || [];
        v.marked = new Set(hits);
        if (hits.length) { v.reveal(hits[0]); hits.forEach(function (h) { v.reveal(h); }); v.centerOn(hits[0], true); }
      });
    }
    views.forEach(function (v) { v.redraw(); });
  }
  function selectNode(view, i, center) {
    view.reveal(i);
    selectItem(view, i);
    if (center) view.centerOn(i);
  }
  views.forEach(function (v) { v.onSelect = selectItem; });

  // ---------------------------------------------------------------- search and category filter
  var search = $('etl-search'), searchInfo = $('etl-search-info'), matchList = [], cursor = -1, timer = 0;
  function runSearch() {
    var q = search.value;
    matchList = []; cursor = -1;
    views.forEach(function (v) {
      var hits = v.M.search(q);
      if (!hits) { v.matches = null; } else {
        v.matches = new Uint8Array(v.M.n);
        hits.forEach(function (i) { v.matches[i] = 1; });
      }
      if (v === active && hits) matchList = hits;
      v.redraw();
    });
    searchInfo.textContent = q.trim() ? matchList.length + ' match' + (matchList.length === 1 ? '' : 'es') : '';
  }
  function nextMatch(dir) {
    if (!matchList.length) return;
    cursor = (cursor + dir + matchList.length) % matchList.length;
    selectNode(active, matchList[cursor], true);
    searchInfo.textContent = (cursor + 1) + ' / ' + matchList.length;
  }
  search.addEventListener('input', function () { clearTimeout(timer); timer = setTimeout(runSearch, 120); });
  search.addEventListener('keydown', function (ev) {
    if (ev.key === 'Enter') { clearTimeout(timer); if (!matchList.length || cursor < 0) runSearch(); nextMatch(ev.shiftKey ? -1 : 1); ev.preventDefault(); }
    if (ev.key === 'Escape') { search.value = ''; runSearch(); search.blur(); }
  });

  var legend = $('etl-legend'), hidden = {};
  (function buildLegend() {
    var counts = {};
    models.forEach(function (M) { M.cat.forEach(function (c) { counts[c] = (counts[c] || 0) + 1; }); });
    Object.keys(counts).sort().forEach(function (c) {
      var item = el('button', { cls: 'etl-legend-item', title: 'show / hide ' + c },
        el('span', { cls: 'etl-swatch' }), el('span', { text: c + ' ' + counts[c] }));
      item.firstChild.style.background = ETL.catColor(c);
      item.addEventListener('click', function () {
        hidden[c] = !hidden[c];
        item.classList.toggle('etl-off', hidden[c]);
        views.forEach(function (v) { v.hiddenCats = hidden; v.redraw(); });
      });
      legend.appendChild(item);
    });
    var gl = el('div', { cls: 'etl-legend-groups' });
    [1, 2, 3].forEach(function (k) {
      var sw = el('span', { cls: 'etl-swatch etl-swatch-box' });
      sw.style.background = ETL.GROUP_STYLE[k].box; sw.style.borderColor = ETL.GROUP_STYLE[k].stroke;
      gl.appendChild(el('span', { cls: 'etl-legend-item' }, sw, el('span', { text: ETL.GROUP_STYLE[k].name })));
    });
    legend.appendChild(gl);
    if (overlay) {
      var ovBox = el('div', { cls: 'etl-overlay-legend' }, el('div', { cls: 'etl-ov-title', text: overlay.label || 'value' }));
      var bar = el('canvas', { width: '180', height: '12', cls: 'etl-ov-bar' });
      var bctx = bar.getContext('2d');
      for (var px = 0; px < 180; px++) { bctx.fillStyle = ETL.scaleColor(overlay, overlay.min + (overlay.max - overlay.min) * px / 179); bctx.fillRect(px, 0, 1, 12); }
      ovBox.appendChild(bar);
      ovBox.appendChild(el('div', { cls: 'etl-ov-scale' }, el('span', { text: ETL.fmtNum(overlay.min) }), el('span', { text: ETL.fmtNum((overlay.min + overlay.max) / 2) }), el('span', { text: ETL.fmtNum(overlay.max) })));
      legend.appendChild(ovBox);
    }
  })();

  // ---------------------------------------------------------------- pass stepping
  var snaps = D.mode === 'passes' ? D.graphs[0].snaps : null, snapIndex = 0;
  function runs(r, n) {
    var a = new Uint8Array(n);
    for (var q = 0; q < r.length; q += 2) for (var z = r[q]; z < r[q] + r[q + 1]; z++) a[z] = 1;
    return a;
  }
  function liftEdges(view) {
    var snap = view.snap, M = view.M, rep = view.L.rep, E = M.edges, BIG = M.n + M.ng + 1, on = new Set();
    for (var e = 0; e < E.length; e += 2) if (snap.edges[e >> 1]) { var a = rep[E[e]], b = rep[E[e + 1]]; if (a !== b) on.add(a * BIG + b); }
    snap.edgeOn = on;
  }
  function applySnap(k) {
    var view = views[0], M = view.M, rec = snaps[k], n = M.n;
    snapIndex = k;
    if (!M.baseLabel) M.baseLabel = M.label.slice();
    M.label = M.baseLabel.slice();
    var tg = rec.tg || [];
    for (var q = 0; q < tg.length; q += 3) M.label[tg[q]] = ETL.trunc(str(tg[q + 2]), 30);
    var snap = { present: runs(rec.p, n), edges: runs(rec.ep, M.edges.length / 2), status: new Uint8Array(n), removed: new Uint8Array(n),
      groupStatus: new Uint8Array(M.ng), groupPresent: new Uint8Array(M.ng) };
    rec.add.forEach(function (i) { snap.status[i] = 1; });
    rec.rw.forEach(function (i) { snap.status[i] = 2; });
    rec.rm.forEach(function (i) { snap.removed[i] = 1; });
    for (var i = 0; i < n; i++) {
      var st = snap.status[i] || (snap.removed[i] ? 2 : 0), pr = snap.present[i];
      if (!st && !pr) continue;
      for (var g = M.group[i]; g > 0; g = M.gParent[g]) {
        if (pr) snap.groupPresent[g] = 1;
        if (st && (!snap.groupStatus[g] || st === 2)) snap.groupStatus[g] = st;
      }
    }
    view.snap = snap;
    liftEdges(view);
    $('etl-pass-select').value = String(k);
    var parts = [(k + 1) + ' / ' + snaps.length, rec.n + ' nodes'];
    if (rec.dn !== null && rec.dn !== undefined && k > 0) parts.push((rec.dn >= 0 ? '+' : '\u2212') + Math.abs(rec.dn) + ' nodes');
    if (rec.t !== null && rec.t !== undefined) parts.push((rec.t * 1000).toFixed(rec.t < 0.01 ? 2 : 1) + ' ms');
    parts.push(rec.add.length + ' added', rec.rw.length + ' rewritten', rec.nrm + ' removed');
    if (str(rec.stage)) parts.push('stage ' + str(rec.stage));
    $('etl-pass-info').textContent = parts.join(' \u00B7 ');
    var banner = $('etl-banner');
    banner.textContent = '';
    if (rec.err) {
      banner.hidden = false;
      banner.appendChild(el('strong', { text: 'Pass "' + str(rec.name) + '" failed: ' + str(rec.err[0]) + ': ' + str(rec.err[1]) }));
      if (str(rec.err[2])) banner.appendChild(el('details', null, el('summary', { text: 'traceback' }), el('pre', { text: str(rec.err[2]) })));
    } else banner.hidden = true;
    if (view.sel >= 0) showDetails(view, view.sel);
    view._miniCache = null;
    view.redraw();
  }
  function step(d) { if (snaps) applySnap(Math.max(0, Math.min(snaps.length - 1, snapIndex + d))); }
  if (snaps) {
    var sel = $('etl-pass-select');
    snaps.forEach(function (rec, k) {
      sel.appendChild(el('option', { value: String(k), text: (k + 1) + '. ' + str(rec.name) + (rec.err ? '  (failed)' : '') }));
    });
    sel.addEventListener('change', function () { applySnap(parseInt(sel.value, 10)); });
    $('etl-prev').addEventListener('click', function () { step(-1); });
    $('etl-next').addEventListener('click', function () { step(1); });
    $('etl-passbar').hidden = false;
    views[0].onRelayout = function () { if (views[0].snap) liftEdges(views[0]); };
    applySnap(snaps.length - 1 >= 0 ? 0 : 0);
  }

  // ---------------------------------------------------------------- export
  function download(name, href) {
    var a = el('a', { href: href, download: name });
    document.body.appendChild(a); a.click(); a.remove();
  }
  function xml(s) { return String(s).replace(/[&<>"']/g, function (c) { return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]; }); }
  ETL.toSVG = function (view) {
    var L = view.L, M = view.M, n = M.n, s = view.s;
    var x0 = -view.tx / s, y0 = -view.ty / s, w = view.cw / s, h = view.ch / s;
    var inView = function (it) { return L.X[it] < x0 + w && L.X[it] + L.W[it] > x0 && L.Y[it] < y0 + h && L.Y[it] + L.H[it] > y0; };
    var out = ['<svg xmlns="http://www.w3.org/2000/svg" viewBox="' + [x0, y0, w, h].map(function (v) { return v.toFixed(1); }).join(' ') + '" width="' + Math.round(view.cw) + '" height="' + Math.round(view.ch) + '" font-family="sans-serif">',
      '<rect x="' + x0 + '" y="' + y0 + '" width="' + w + '" height="' + h + '" fill="#fff"/>'];
    for (var g = 1; g < M.ng; g++) {
      var it = n + g;
      if (!L.vis[it] || !inView(it)) continue;
      var st = ETL.GROUP_STYLE[M.gKind[g]] || ETL.GROUP_STYLE[1];
      out.push('<rect x="' + L.X[it] + '" y="' + L.Y[it] + '" width="' + L.W[it] + '" height="' + L.H[it] + '" fill="' + (L.vis[it] === 1 ? st.box : 'none') + '" stroke="' + st.stroke + '"/>');
      out.push('<text x="' + (L.X[it] + 8) + '" y="' + (L.Y[it] + 18) + '" font-size="12">' + xml(M.gLabel[g]) + '</text>');
    }
    var E = L.edges;
    for (var e = 0; e < E.length; e += 2) {
      var a = E[e], b = E[e + 1];
      if (!inView(a) && !inView(b)) continue;
      if (view.snap && !view.snap.edgeOn.has(a * (n + M.ng + 1) + b)) continue;
      var ax = L.X[a] + L.W[a] / 2, ay = L.Y[a] + L.H[a], bx = L.X[b] + L.W[b] / 2, by = L.Y[b], dy = Math.max(30, Math.abs(by - ay) / 2);
      out.push('<path d="M' + ax + ' ' + ay + 'C' + ax + ' ' + (ay + dy) + ' ' + bx + ' ' + (by - dy) + ' ' + bx + ' ' + by + '" fill="none" stroke="#90a4ae"/>');
    }
    for (var i = 0; i < n; i++) {
      if (L.vis[i] !== 1 || !inView(i) || (view.snap && !view.snap.present[i])) continue;
      out.push('<rect x="' + L.X[i] + '" y="' + L.Y[i] + '" width="' + L.W[i] + '" height="' + L.H[i] + '" rx="6" fill="' + xml(view.nodeFill(i)) + '" stroke="#555"/>');
      out.push('<text x="' + (L.X[i] + L.W[i] / 2) + '" y="' + (L.Y[i] + 16) + '" font-size="12" text-anchor="middle">' + xml(M.label[i]) + '</text>');
      if (M.shape[i]) out.push('<text x="' + (L.X[i] + L.W[i] / 2) + '" y="' + (L.Y[i] + 31) + '" font-size="10" text-anchor="middle" fill="#455a64">' + xml(M.shape[i]) + '</text>');
    }
    out.push('</svg>');
    return out.join('\n');
  };
  $('etl-png').addEventListener('click', function () { download('etlens-graph.png', active.canvas.toDataURL('image/png')); });
  $('etl-svg').addEventListener('click', function () { download('etlens-graph.svg', 'data:image/svg+xml;charset=utf-8,' + encodeURIComponent(ETL.toSVG(active))); });
  $('etl-fit').addEventListener('click', function () { views.forEach(function (v) { v.fit(); }); });
  $('etl-expand').addEventListener('click', function () { views.forEach(function (v) { v.setAllCollapsed(false); }); });
  $('etl-collapse').addEventListener('click', function () { views.forEach(function (v) { v.setAllCollapsed(true); }); });
  $('etl-help-btn').addEventListener('click', function () { var hp = $('etl-help'); hp.hidden = !hp.hidden; });

  // ---------------------------------------------------------------- keyboard
  function neighbour(view, dir) {
    var M = view.M, i = view.sel;
    if (i < 0 || i >= M.n) return;
    var list = dir > 0 ? M.succs[i] : M.preds[i];
    if (list.length) selectNode(view, list[0], true);
  }
  function sibling(view, dir) {
    var L = view.L, it = view.sel;
    if (it < 0) return;
    var best = -1, bd = Infinity;
    for (var q = 0; q < L.vis.length; q++) {
      if (L.vis[q] !== 1 || Math.abs(L.Y[q] - L.Y[it]) > 20) continue;
      var d = (L.X[q] - L.X[it]) * dir;
      if (d > 0 && d < bd) { bd = d; best = q; }
    }
    if (best >= 0) { selectItem(view, best); view.centerOn(best, true); }
  }
  document.addEventListener('keydown', function (ev) {
    var tag = (ev.target && ev.target.tagName) || '';
    if (tag === 'INPUT' || tag === 'SELECT' || tag === 'TEXTAREA') return;
    var v = active, k = ev.key, handled = true;
    if (k === 'ArrowRight' || k === 'ArrowLeft') {
      var d = k === 'ArrowRight' ? 1 : -1;
      if (snaps && !ev.altKey) step(d); else sibling(v, d);
    } else if (k === 'ArrowDown') neighbour(v, 1);
    else if (k === 'ArrowUp') neighbour(v, -1);
    else if (k === 'PageDown' || k === ']') step(1);
    else if (k === 'PageUp' || k === '[') step(-1);
    else if (k === 'f') views.forEach(function (x) { x.fit(); });
    else if (k === '/') { search.focus(); }
    else if (k === '+' || k === '=') v.zoomAt(1.25, v.cw / 2, v.ch / 2);
    else if (k === '-') v.zoomAt(0.8, v.cw / 2, v.ch / 2);
    else if (k === 'n') nextMatch(ev.shiftKey ? -1 : 1);
    else if (k === 'N') nextMatch(-1);
    else if (k === 'Enter' && v.sel >= 0) {
      if (v.sel >= v.M.n) { v.toggleGroup(v.sel - v.M.n); showDetails(v, v.sel); }
      else if (v.M.group[v.sel] > 0) { var g = v.M.group[v.sel]; v.toggleGroup(g, false); selectItem(v, v.M.n + g); }
    } else if (k === 'Escape') { selectItem(v, -1); }
    else if (k === '?') { var hp = $('etl-help'); hp.hidden = !hp.hidden; }
    else handled = false;
    if (handled) ev.preventDefault();
  });

  // ---------------------------------------------------------------- start
  showDetails(active, -1);
  var painted = 0;
  views.forEach(function (v) {
    v.resize();
    v.initialView();
    v.onDraw = function () {
      if (v._painted) return;
      v._painted = true;
      if (++painted === views.length) {
        ETL.times.firstPaint = performance.now();
        window.etlensReady = true;
      }
    };
  });
  // the hooks tests and scripts use (no model data is evaluated as code)
  window.etlens = {
    views: views, mode: D.mode, times: ETL.times,
    find: function (name, vi) { return views[vi || 0].M.byName.get(name); },
    select: function (name, vi) { var v = views[vi || 0], i = v.M.byName.get(name); if (i === undefined) return false; selectNode(v, i, true); return true; },
    screenPos: function (name, vi) {
      var v = views[vi || 0], i = v.M.byName.get(name);
      if (i === undefined) return null;
      v.reveal(i); v.centerOn(i); v.draw();
      return v.screenPos(i);
    },
    step: function (k) { if (snaps) applySnap(k); return snapIndex; },
    snapIndex: function () { return snapIndex; },
    visibleCount: function (vi) { var L = views[vi || 0].L, c = 0; for (var q = 0; q < L.vis.length; q++) if (L.vis[q] === 1) c++; return c; },
    svg: function (vi) { return ETL.toSVG(views[vi || 0]); }
  };
})();
