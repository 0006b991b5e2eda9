/* etlens viewer — one graph on one canvas: camera, culling, level of detail, minimap, hit testing.
 *
 * Only items inside the viewport are drawn; text is skipped when it would be too small to read and
 * edges are batched into one path per style, so a frame stays cheap at 50k nodes. */
'use strict';

var ETL = window.ETL || (window.ETL = {});

ETL.View = function (model, host, opts) {
  this.M = model; this.opts = opts || {};
  this.host = host;
  this.canvas = ETL.el('canvas', { cls: 'etl-canvas', tabindex: '0' });
  this.mini = ETL.el('canvas', { cls: 'etl-mini', width: '200', height: '140' });
  host.appendChild(this.canvas);
  host.appendChild(this.mini);
  this.collapsed = new Uint8Array(model.ng);
  this.s = 1; this.tx = 0; this.ty = 0;
  this.sel = -1;            // selected item (node index, or n + group id)
  this.marked = null;       // Set of node indices highlighted by a synchronised selection
  this.matches = null;      // Uint8Array of search matches (null: no active search)
  this.hiddenCats = {};     // category -> true when filtered out
  this.snap = null;         // pass snapshot state (present/status arrays)
  this._raf = 0;
  this.initialCollapse();
  this.relayout();
  var self = this;
  this._bind();
  if (window.ResizeObserver) new ResizeObserver(function () { self.resize(); }).observe(host);
};

/* Start collapsed enough that the first view shows at most ~250 boxes: open the hierarchy one
 * whole level at a time (so siblings look alike), then greedily within the level that no longer fits. */
ETL.View.prototype.initialCollapse = function () {
  var M = this.M, budget = 250;
  if (M.n <= 400) return;
  for (var g = 1; g < M.ng; g++) this.collapsed[g] = 1;
  var count = M.gMembers[0].length + M.gChildren[0].length;
  var level = M.gChildren[0].slice();
  while (level.length) {
    var add = 0, next = [], q;
    for (q = 0; q < level.length; q++) add += M.gMembers[level[q]].length + M.gChildren[level[q]].length - 1;
    if (count + add <= budget) {
      for (q = 0; q < level.length; q++) { this.collapsed[level[q]] = 0; next.push.apply(next, M.gChildren[level[q]]); }
      count += add; level = next; continue;
    }
    if (count >= 12) break;  // a few dozen boxes already make a readable overview
    level.sort(function (a, b) { return M.gFirst[a] - M.gFirst[b]; });
    for (q = 0; q < level.length; q++) {
      g = level[q];
      var more = M.gMembers[g].length + M.gChildren[g].length - 1;
      if (count + more <= budget) { this.collapsed[g] = 0; count += more; }
    }
    break;
  }
};

ETL.View.prototype.relayout = function () {
  this.L = ETL.layoutModel(this.M, this.collapsed);
  this._miniCache = null;
  if (this.onRelayout) this.onRelayout();
  this.redraw();
};

ETL.View.prototype.resize = function () {
  var r = this.canvas.getBoundingClientRect(), dpr = window.devicePixelRatio || 1;
  this.cw = r.width; this.ch = r.height;
  this.canvas.width = Math.max(1, Math.round(r.width * dpr));
  this.canvas.height = Math.max(1, Math.round(r.height * dpr));
  this.dpr = dpr;
  this.redraw();
};

/* First view: fit when text stays readable, else start readable at the top (the minimap shows all). */
ETL.View.prototype.initialView = function () {
  var L = this.L, cw = this.cw || 800, ch = this.ch || 600;
  var s = Math.min(cw / (L.width + 80), ch / (L.height + 80), 1.0);
  if (s >= 0.55) { this.fit(); return; }
  this.s = 0.85;
  this.tx = L.width * this.s < cw ? (cw - L.width * this.s) / 2 : 20;
  this.ty = 20;
  this.redraw();
};

ETL.View.prototype.fit = function () {
  var L = this.L, cw = this.cw || 800, ch = this.ch || 600;
  var s = Math.min(cw / (L.width + 80), ch / (L.height + 80), 1.0);
  this.s = s; this.tx = (cw - L.width * s) / 2; this.ty = (ch - L.height * s) / 2;
  this.redraw();
};

ETL.View.prototype.zoomAt = function (f, sx, sy) {
  var ns = Math.min(4, Math.max(0.005, this.s * f));
  f = ns / this.s;
  this.tx = sx - (sx - this.tx) * f; this.ty = sy - (sy - this.ty) * f; this.s = ns;
  this.redraw();
};

ETL.View.prototype.centerOn = function (item, keepScale) {
  var L = this.L;
  if (!keepScale && this.s < 0.6) this.s = 0.9;
  this.tx = this.cw / 2 - (L.X[item] + L.W[item] / 2) * this.s;
  this.ty = this.ch / 2 - (L.Y[item] + L.H[item] / 2) * this.s;
  this.redraw();
};

/* Expand every group that hides node i, re-layout if needed; returns the node's visible item. */
ETL.View.prototype.reveal = function (i) {
  var anc = this.M.ancestors(i), changed = false;
  for (var q = 0; q < anc.length; q++) if (this.collapsed[anc[q]]) { this.collapsed[anc[q]] = 0; changed = true; }
  if (changed) this.relayout();
  return i;
};

ETL.View.prototype.toggleGroup = function (g, open) {
  var L = this.L, n = this.M.n, it = n + g;
  var before = [L.X[it] * this.s + this.tx, L.Y[it] * this.s + this.ty];
  this.collapsed[g] = open === undefined ? (this.collapsed[g] ? 0 : 1) : (open ? 0 : 1);
  this.relayout();
  // keep the toggled box where it was on screen
  this.tx = before[0] - this.L.X[it] * this.s; this.ty = before[1] - this.L.Y[it] * this.s;
  this.redraw();
};

ETL.View.prototype.setAllCollapsed = function (c) {
  for (var g = 1; g < this.M.ng; g++) this.collapsed[g] = c ? 1 : 0;
  this.relayout(); this.fit();
};

ETL.View.prototype.redraw = function () {
  if (this._raf) return;
  var self = this;
  this._raf = requestAnimationFrame(function () { self._raf = 0; self.draw(); });
};

ETL.View.prototype.isPresent = function (i) { return !this.snap || this.snap.present[i] === 1; };

ETL.View.prototype.nodeFill = function (i) {
  var M = this.M;
  if (M.ov && this.opts.overlay) {
    var v = M.ov[i];
    return v === null || v === undefined ? '#f2f2f2' : ETL.scaleColor(this.opts.overlay, v);
  }
  return ETL.catColor(M.cat[i]);
};

ETL.View.prototype.draw = function () {
  if (!this.cw) { var r = this.canvas.getBoundingClientRect(); if (!r.width) return; this.resize(); return; }
  var ctx = this.canvas.getContext('2d'), L = this.L, M = this.M, n = M.n, s = this.s;
  var dpr = this.dpr;
  ctx.setTransform(1, 0, 0, 1, 0, 0);
  ctx.fillStyle = '#ffffff';
  ctx.fillRect(0, 0, this.canvas.width, this.canvas.height);
  ctx.setTransform(s * dpr, 0, 0, s * dpr, this.tx * dpr, this.ty * dpr);
  var x0 = -this.tx / s, y0 = -this.ty / s, x1 = x0 + this.cw / s, y1 = y0 + this.ch / s;
  var X = L.X, Y = L.Y, W = L.W, H = L.H, vis = L.vis;
  var inView = function (it) { return X[it] < x1 && X[it] + W[it] > x0 && Y[it] < y1 && Y[it] + H[it] > y0; };
  var snap = this.snap, matches = this.matches, hc = this.hiddenCats;
  // group frames (expanded), outer first
  var g, it;
  for (g = 1; g < M.ng; g++) {
    it = n + g;
    if (vis[it] !== 2 || !inView(it)) continue;
    if (snap && !snap.groupPresent[g]) continue;  // nothing of this box exists in this pass
    var st = ETL.GROUP_STYLE[M.gKind[g]] || ETL.GROUP_STYLE[1];
    ctx.fillStyle = st.fill; ctx.strokeStyle = this.sel === it ? '#1a237e' : st.stroke;
    ctx.lineWidth = (this.sel === it ? 2.5 : 1) / Math.min(1, s);
    ctx.setLineDash(M.gKind[g] === 1 ? [] : [6, 4]);
    ctx.beginPath(); ctx.rect(X[it], Y[it], W[it], H[it]); ctx.fill(); ctx.stroke();
    ctx.setLineDash([]);
    if (s > 0.3) {
      ctx.fillStyle = '#37474f'; ctx.font = '600 12px system-ui, sans-serif'; ctx.textBaseline = 'middle';
      var head = '\u25BE ' + M.gLabel[g] + (M.gType[g] ? '  \u00B7 ' + ETL.trunc(M.gType[g], 40) : '');
      ctx.fillText(head, X[it] + 8, Y[it] + 14);
    }
  }
  // edges
  var E = L.edges, rep = L.rep, selEdges = [];
  var present = snap ? snap.edgeOn : null;
  ctx.lineWidth = Math.max(1, 1.2 / s) * (s < 0.2 ? 0.6 : 1);
  ctx.strokeStyle = s < 0.2 ? 'rgba(96,125,139,0.55)' : '#90a4ae';
  ctx.beginPath();
  var arrows = s > 0.35;
  var arrowPts = [];
  for (var e = 0; e < E.length; e += 2) {
    var a = E[e], b = E[e + 1];
    if (present && !present.has(a * (n + M.ng + 1) + b)) continue;
    var ax = X[a] + W[a] / 2, ay = Y[a] + H[a], bx = X[b] + W[b] / 2, by = Y[b];
    if (Math.max(ax, bx) < x0 || Math.min(ax, bx) > x1 || Math.max(ay, by) < y0 || Math.min(ay, by) > y1) continue;
    if (a === this.sel || b === this.sel) { selEdges.push(ax, ay, bx, by); continue; }
    var dy = Math.max(30, Math.abs(by - ay) / 2);
    ctx.moveTo(ax, ay);
    if (by - ay > 240 && Math.abs(bx - ax) < 60) {
      // a long skip edge (residual) bows out to the side instead of running through the chain
      var bow = Math.min(220, 40 + (by - ay) * 0.12) + W[a] / 2;
      ctx.bezierCurveTo(ax + bow, ay + 60, bx + bow, by - 60, bx, by);
    } else ctx.bezierCurveTo(ax, ay + dy, bx, by - dy, bx, by);
    if (arrows) arrowPts.push(bx, by);
  }
  ctx.stroke();
  if (arrows) {
    ctx.fillStyle = '#90a4ae'; ctx.beginPath();
    for (e = 0; e < arrowPts.length; e += 2) {
      ctx.moveTo(arrowPts[e], arrowPts[e + 1]); ctx.lineTo(arrowPts[e] - 4, arrowPts[e + 1] - 7); ctx.lineTo(arrowPts[e] + 4, arrowPts[e + 1] - 7);
    }
    ctx.fill();
  }
  if (selEdges.length) {
    ctx.strokeStyle = '#1a237e'; ctx.lineWidth = Math.max(2, 2.5 / s); ctx.beginPath();
    for (e = 0; e < selEdges.length; e += 4) {
      dy = Math.max(30, Math.abs(selEdges[e + 3] - selEdges[e + 1]) / 2);
      ctx.moveTo(selEdges[e], selEdges[e + 1]);
      ctx.bezierCurveTo(selEdges[e], selEdges[e + 1] + dy, selEdges[e + 2], selEdges[e + 3] - dy, selEdges[e + 2], selEdges[e + 3]);
    }
    ctx.stroke();
  }
  // collapsed group boxes
  var text = s > 0.38, detail = s > 0.7;
  ctx.textBaseline = 'middle';
  for (g = 1; g < M.ng; g++) {
    it = n + g;
    if (vis[it] !== 1 || !inView(it)) continue;
    st = ETL.GROUP_STYLE[M.gKind[g]] || ETL.GROUP_STYLE[1];
    var gs = snap ? snap.groupStatus[g] : 0;
    ctx.fillStyle = st.box;
    ctx.globalAlpha = (snap && !snap.groupPresent[g]) ? 0.25 : 1;
    ctx.fillRect(X[it], Y[it], W[it], H[it]);
    ctx.lineWidth = (this.sel === it ? 3 : gs ? 2.5 : 1.2) / Math.min(1, s);
    ctx.strokeStyle = this.sel === it ? '#1a237e' : gs === 1 ? '#2e7d32' : gs === 2 ? '#ef6c00' : st.stroke;
    ctx.strokeRect(X[it], Y[it], W[it], H[it]);
    // a second offset edge says "there is more inside"
    ctx.strokeStyle = st.stroke; ctx.lineWidth = 1 / Math.min(1, s);
    ctx.strokeRect(X[it] + 3, Y[it] + 3, W[it], H[it]);
    if (s > 0.25) {
      ctx.fillStyle = '#263238'; ctx.font = '600 13px system-ui, sans-serif';
      ctx.fillText('\u25B8 ' + M.gLabel[g], X[it] + 8, Y[it] + 15);
      ctx.font = '11px system-ui, sans-serif'; ctx.fillStyle = '#546e7a';
      ctx.fillText(M.gCount[g] + ' nodes \u00B7 ' + (M.gKind[g] === 3 ? 'delegate ' : '') + ETL.trunc(M.gType[g] || st.name, 28), X[it] + 8, Y[it] + 33);
    }
    ctx.globalAlpha = 1;
  }
  // nodes
  var dim = function (i) { return (matches && !matches[i]) || hc[M.cat[i]]; };
  for (var i = 0; i < n; i++) {
    if (vis[i] !== 1 || !inView(i)) continue;
    var ghost = false, status = 0;
    if (snap) {
      if (!snap.present[i]) { if (!snap.removed[i]) continue; ghost = true; }
      status = snap.status[i];
    }
    ctx.globalAlpha = ghost ? 0.35 : dim(i) ? 0.2 : 1;
    ctx.fillStyle = ghost ? '#ffebee' : this.nodeFill(i);
    var r = M.gp.kind[i] === 2 || M.gp.kind[i] === 3 ? 6 : 14;
    ctx.beginPath();
    if (s > 0.25 && ctx.roundRect) ctx.roundRect(X[i], Y[i], W[i], H[i], r); else ctx.rect(X[i], Y[i], W[i], H[i]);
    ctx.fill();
    var lw = 1, sc = 'rgba(0,0,0,0.35)';
    if (ghost) { sc = '#c62828'; lw = 2; ctx.setLineDash([5, 4]); }
    else if (status === 1) { sc = '#2e7d32'; lw = 3; }
    else if (status === 2) { sc = '#ef6c00'; lw = 3; }
    if (matches && matches[i]) { sc = '#f9a825'; lw = 3.5; }
    if (this.marked && this.marked.has(i)) { sc = '#d500f9'; lw = 4; }
    if (this.sel === i) { sc = '#1a237e'; lw = 4; }
    if (lw > 1 || s > 0.25) { ctx.lineWidth = lw / Math.min(1, Math.max(s, 0.3)); ctx.strokeStyle = sc; ctx.stroke(); }
    ctx.setLineDash([]);
    if (text) {
      ctx.fillStyle = '#102027'; ctx.font = (M.gp.kind[i] === 2 ? '600 ' : '') + '12px system-ui, sans-serif';
      ctx.textAlign = 'center';
      var cy = detail && M.shape[i] ? Y[i] + 13 : Y[i] + H[i] / 2;
      ctx.fillText(M.label[i], X[i] + W[i] / 2, cy);
      if (detail && M.shape[i]) {
        ctx.font = '10px ui-monospace, monospace'; ctx.fillStyle = '#455a64';
        var sub = M.shape[i];
        if (M.ov && this.opts.overlay && M.ov[i] !== null && M.ov[i] !== undefined) sub = ETL.fmtNum(M.ov[i]) + ' \u00B7 ' + sub;
        ctx.fillText(ETL.trunc(sub, 34), X[i] + W[i] / 2, Y[i] + 28);
      } else if (detail && M.ov && this.opts.overlay && M.ov[i] !== null && M.ov[i] !== undefined) {
        ctx.font = '10px ui-monospace, monospace'; ctx.fillStyle = '#455a64';
        ctx.fillText(ETL.fmtNum(M.ov[i]), X[i] + W[i] / 2, Y[i] + 28);
      }
      ctx.textAlign = 'start';
    }
  }
  ctx.globalAlpha = 1;
  this.drawMini();
  if (this.onDraw) this.onDraw();
};

ETL.View.prototype.drawMini = function () {
  var L = this.L, M = this.M, n = M.n, mc = this.mini, ctx = mc.getContext('2d');
  var mw = mc.width, mh = mc.height;
  var sc = Math.min((mw - 8) / Math.max(1, L.width), (mh - 8) / Math.max(1, L.height));
  var ox = (mw - L.width * sc) / 2, oy = (mh - L.height * sc) / 2;
  this._miniT = [sc, ox, oy];
  if (!this._miniCache) {
    var off = document.createElement('canvas');
    off.width = mw; off.height = mh;
    var c2 = off.getContext('2d');
    c2.fillStyle = '#fafafa'; c2.fillRect(0, 0, mw, mh);
    for (var it = 0; it < L.vis.length; it++) {
      if (L.vis[it] !== 1) continue;
      c2.fillStyle = it < n ? ETL.catColor(M.cat[it]) : '#b0bec5';
      c2.fillRect(ox + L.X[it] * sc, oy + L.Y[it] * sc, Math.max(1, L.W[it] * sc), Math.max(1, L.H[it] * sc));
    }
    this._miniCache = off;
  }
  ctx.drawImage(this._miniCache, 0, 0);
  ctx.strokeStyle = '#d32f2f'; ctx.lineWidth = 1.5;
  var vx = (-this.tx / this.s) * sc + ox, vy = (-this.ty / this.s) * sc + oy;
  ctx.strokeRect(vx, vy, (this.cw / this.s) * sc, (this.ch / this.s) * sc);
};

/* Item under screen point (node first, then box, then a frame's header), or -1. */
ETL.View.prototype.hit = function (sx, sy) {
  var L = this.L, M = this.M, n = M.n;
  var wx = (sx - this.tx) / this.s, wy = (sy - this.ty) / this.s;
  var inside = function (it) { return wx >= L.X[it] && wx <= L.X[it] + L.W[it] && wy >= L.Y[it] && wy <= L.Y[it] + L.H[it]; };
  for (var i = 0; i < n; i++) {
    if (L.vis[i] === 1 && inside(i) && (!this.snap || this.snap.present[i] || this.snap.removed[i])) return i;
  }
  var best = -1;
  for (var g = 1; g < M.ng; g++) {
    var it = n + g;
    if (L.vis[it] === 1 && inside(it)) return it;
    if (L.vis[it] === 2 && inside(it) && wy <= L.Y[it] + 26) {
      if (best < 0 || M.gDepth[g] > M.gDepth[best - n]) best = it;
    }
  }
  return best;
};

ETL.View.prototype.screenPos = function (it) {
  var L = this.L, r = this.canvas.getBoundingClientRect();
  return { x: r.left + (L.X[it] + L.W[it] / 2) * this.s + this.tx, y: r.top + (L.Y[it] + L.H[it] / 2) * this.s + this.ty };
};

ETL.View.prototype._bind = function () {
  var self = this, c = this.canvas, drag = null;
  c.addEventListener('wheel', function (ev) {
    ev.preventDefault();
    var r = c.getBoundingClientRect();
    if (ev.ctrlKey || ev.metaKey || !ev.shiftKey) self.zoomAt(Math.exp(-ev.deltaY * 0.0015), ev.clientX - r.left, ev.clientY - r.top);
    else { self.tx -= ev.deltaX || ev.deltaY; self.redraw(); }
  }, { passive: false });
  c.addEventListener('mousedown', function (ev) {
    drag = { x: ev.clientX, y: ev.clientY, tx: self.tx, ty: self.ty, moved: false };
    c.focus();
  });
  window.addEventListener('mousemove', function (ev) {
    if (!drag) return;
    var dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
    if (drag.moved) { self.tx = drag.tx + dx; self.ty = drag.ty + dy; self.redraw(); }
  });
  window.addEventListener('mouseup', function (ev) {
    if (!drag) return;
    var moved = drag.moved; drag = null;
    if (!moved) {
      var r = c.getBoundingClientRect();
      var it = self.hit(ev.clientX - r.left, ev.clientY - r.top);
      if (self.onSelect) self.onSelect(self, it);
    }
  });
  c.addEventListener('dblclick', function (ev) {
    var r = c.getBoundingClientRect();
    var it = self.hit(ev.clientX - r.left, ev.clientY - r.top);
    if (it >= self.M.n) self.toggleGroup(it - self.M.n);
    else if (it >= 0 && self.M.group[it] > 0) self.toggleGroup(self.M.group[it], false);
  });
  var miniDrag = false;
  var miniMove = function (ev) {
    var r = self.mini.getBoundingClientRect(), t = self._miniT;
    if (!t) return;
    var wx = (ev.clientX - r.left - t[1]) / t[0], wy = (ev.clientY - r.top - t[2]) / t[0];
    self.tx = self.cw / 2 - wx * self.s; self.ty = self.ch / 2 - wy * self.s; self.redraw();
  };
  this.mini.addEventListener('mousedown', function (ev) { miniDrag = true; miniMove(ev); ev.stopPropagation(); });
  window.addEventListener('mousemove', function (ev) { if (miniDrag) miniMove(ev); });
  window.addEventListener('mouseup', function () { miniDrag = false; });
};

ETL.fmtNum = function (v) {
  if (v === null || v === undefined) return '';
  var a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(2);
  return (Math.round(v * 1000) / 1000).toString();
};

/* Overlay colour scale: a light blue -> yellow -> red ramp (dark text stays readable) over [min, max]. */
ETL.RAMP = [[116, 173, 209], [171, 217, 233], [224, 243, 248], [254, 224, 144], [253, 174, 97], [244, 109, 67]];
ETL.scaleColor = function (ov, v) {
  var t = ov.max > ov.min ? (v - ov.min) / (ov.max - ov.min) : 0.5;
  t = Math.max(0, Math.min(1, t)) * (ETL.RAMP.length - 1);
  var i = Math.min(ETL.RAMP.length - 2, Math.floor(t)), f = t - i, a = ETL.RAMP[i], b = ETL.RAMP[i + 1];
  return 'rgb(' + Math.round(a[0] + (b[0] - a[0]) * f) + ',' + Math.round(a[1] + (b[1] - a[1]) * f) + ',' + Math.round(a[2] + (b[2] - a[2]) * f) + ')';
};
