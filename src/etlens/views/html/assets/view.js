/* etlens viewer — one graph on one canvas: camera, culling, level of detail, minimap, hit testing.
 *
 * Only items inside the viewport are drawn; text is skipped when it would be too small to read and
 * edges are batched into one path per style, so a frame stays cheap at 50k nodes.
 *
 * A View draws what the app's state says: its pane (state.panes[index]: collapse mask, camera,
 * selection, lineage marks, search matches), the category filter, the overlay scale and the
 * current pass snapshot. It changes only its own pane's camera and collapse mask (pan, zoom,
 * expand), and reports clicks through the callbacks it was given. */

import { Layout } from './layout.js';
import { catColor, el, fmtNum, groupStyle, scaleColor, trunc } from './dom.js';

export class View {
  /* callbacks: {onSelect(view, item), onDraw(view)}. */
  constructor(model, host, state, index, callbacks) {
    this.M = model;
    this.state = state;
    this.index = index;
    this.callbacks = callbacks || {};
    this.canvas = el('canvas', { cls: 'etl-canvas', tabindex: '0' });
    this.mini = el('canvas', { cls: 'etl-mini', width: '200', height: '140' });
    host.appendChild(this.canvas);
    host.appendChild(this.mini);
    this.cw = 0; this.ch = 0; this.dpr = 1;
    this._raf = 0;
    this._miniCache = null;
    this._miniT = null;
    this._edgeOn = null;      // visible-item edges of the current snapshot
    this._edgeOnKey = null;
    this.relayout();
    this._bind();
    if (window.ResizeObserver) new ResizeObserver(() => this.resize()).observe(host);
  }

  /* This view's slice of the app state. */
  get pane() { return this.state.panes[this.index]; }
  get camera() { return this.pane.camera; }
  /* The pass snapshot shown in this view (pass pages have one view). */
  get snapshot() { return this.index === 0 ? this.state.snapshot : null; }

  relayout() {
    this.L = new Layout(this.M, this.pane.collapsed);
    this._miniCache = null;
    this.redraw();
  }

  resize() {
    const r = this.canvas.getBoundingClientRect(), dpr = window.devicePixelRatio || 1;
    this.cw = r.width; this.ch = r.height;
    this.canvas.width = Math.max(1, Math.round(r.width * dpr));
    this.canvas.height = Math.max(1, Math.round(r.height * dpr));
    this.dpr = dpr;
    this.redraw();
  }

  /* First view: fit when text stays readable, else start readable at the top (the minimap shows all). */
  initialView() {
    const L = this.L, cw = this.cw || 800, ch = this.ch || 600, cam = this.camera;
    const s = Math.min(cw / (L.width + 80), ch / (L.height + 80), 1.0);
    if (s >= 0.55) { this.fit(); return; }
    cam.scale = 0.85;
    cam.x = L.width * cam.scale < cw ? (cw - L.width * cam.scale) / 2 : 20;
    cam.y = 20;
    this.redraw();
  }

  /* Fit the whole layout, or only the given items (e.g. the nodes of the first pass). */
  fit(items) {
    const L = this.L, cw = this.cw || 800, ch = this.ch || 600, cam = this.camera;
    let x0 = 0, y0 = 0, x1 = L.width, y1 = L.height;
    if (items && items.length) {
      x0 = Infinity; y0 = Infinity; x1 = -Infinity; y1 = -Infinity;
      for (const it of items) {
        x0 = Math.min(x0, L.X[it]); y0 = Math.min(y0, L.Y[it]);
        x1 = Math.max(x1, L.X[it] + L.W[it]); y1 = Math.max(y1, L.Y[it] + L.H[it]);
      }
    }
    const w = x1 - x0, h = y1 - y0;
    const s = Math.min(cw / (w + 80), ch / (h + 80), 1.0);
    cam.scale = s; cam.x = (cw - w * s) / 2 - x0 * s; cam.y = (ch - h * s) / 2 - y0 * s;
    this.redraw();
  }

  /* Fit the visible items that exist in the current pass snapshot. */
  fitSnapshot() {
    const snap = this.snapshot, L = this.L, n = this.M.n;
    if (!snap) { this.fit(); return; }
    const items = new Set();
    for (let i = 0; i < n; i++) if (snap.present[i]) items.add(L.rep[i]);
    this.fit(Array.from(items).filter((it) => L.vis[it] === 1));
  }

  zoomAt(f, sx, sy) {
    const cam = this.camera, ns = Math.min(4, Math.max(0.005, cam.scale * f));
    f = ns / cam.scale;
    cam.x = sx - (sx - cam.x) * f; cam.y = sy - (sy - cam.y) * f; cam.scale = ns;
    this.redraw();
  }

  panBy(dx, dy) { this.camera.x += dx; this.camera.y += dy; this.redraw(); }

  centerOn(item, keepScale) {
    const L = this.L, cam = this.camera;
    if (!keepScale && cam.scale < 0.6) cam.scale = 0.9;
    cam.x = this.cw / 2 - (L.X[item] + L.W[item] / 2) * cam.scale;
    cam.y = this.ch / 2 - (L.Y[item] + L.H[item] / 2) * cam.scale;
    this.redraw();
  }

  /* Expand every group that hides node i (re-layout if needed); returns i. */
  reveal(i) {
    const collapsed = this.pane.collapsed;
    let changed = false;
    for (const g of this.M.ancestors(i)) if (collapsed[g]) { collapsed[g] = 0; changed = true; }
    if (changed) this.relayout();
    return i;
  }

  isCollapsed(g) { return this.pane.collapsed[g] === 1; }

  /* Expand/collapse group g (toggle when open is undefined), keeping its box where it was on screen. */
  toggleGroup(g, open) {
    const it = this.M.n + g, cam = this.camera, collapsed = this.pane.collapsed;
    const before = [this.L.X[it] * cam.scale + cam.x, this.L.Y[it] * cam.scale + cam.y];
    collapsed[g] = open === undefined ? (collapsed[g] ? 0 : 1) : (open ? 0 : 1);
    this.relayout();
    cam.x = before[0] - this.L.X[it] * cam.scale; cam.y = before[1] - this.L.Y[it] * cam.scale;
    this.redraw();
  }

  setAllCollapsed(c) {
    this.pane.collapsed.fill(c ? 1 : 0, 1);
    this.relayout(); this.fit();
  }

  /* The layout changed outside this view's own input (a new pass): drop cached drawings. */
  invalidate() { this._miniCache = null; this.redraw(); }

  redraw() {
    if (this._raf) return;
    this._raf = requestAnimationFrame(() => { this._raf = 0; this.draw(); });
  }

  nodeFill(i) {
    const M = this.M, scale = this.state.overlay;
    if (M.overlay && scale) {
      const v = M.overlayValue(i);
      return v === null || v === undefined ? '#f2f2f2' : scaleColor(scale, v);
    }
    return catColor(M.cat[i]);
  }

  nodeLabel(i) {
    const snap = this.snapshot, lb = snap && snap.labels.get(i);
    return lb === undefined || lb === null ? this.M.label[i] : lb;
  }

  /* Visible-item edges that exist in the current snapshot, as a Set of a * BIG + b (null: all). */
  snapshotEdges() {
    const snap = this.snapshot;
    if (!snap) return null;
    if (this._edgeOnKey && this._edgeOnKey[0] === snap && this._edgeOnKey[1] === this.L) return this._edgeOn;
    const M = this.M, rep = this.L.rep, E = M.edges, BIG = M.n + M.ng + 1, on = new Set();
    for (let e = 0; e < E.length; e += 2) {
      if (!snap.edges[e >> 1]) continue;
      const a = rep[E[e]], b = rep[E[e + 1]];
      if (a !== b) on.add(a * BIG + b);
    }
    this._edgeOn = on; this._edgeOnKey = [snap, this.L];
    return on;
  }

  draw() {
    if (!this.cw) { const r = this.canvas.getBoundingClientRect(); if (!r.width) return; this.resize(); return; }
    const ctx = this.canvas.getContext('2d'), L = this.L, M = this.M, n = M.n;
    const cam = this.camera, s = cam.scale, dpr = this.dpr, pane = this.pane, sel = pane.selected;
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(0, 0, this.canvas.width, this.canvas.height);
    ctx.setTransform(s * dpr, 0, 0, s * dpr, cam.x * dpr, cam.y * dpr);
    const x0 = -cam.x / s, y0 = -cam.y / s, x1 = x0 + this.cw / s, y1 = y0 + this.ch / s;
    const X = L.X, Y = L.Y, W = L.W, H = L.H, vis = L.vis;
    const inView = (it) => X[it] < x1 && X[it] + W[it] > x0 && Y[it] < y1 && Y[it] + H[it] > y0;
    const snap = this.snapshot, matches = pane.matches, hidden = this.state.hiddenCategories;
    // group frames (expanded), outer first
    for (let g = 1; g < M.ng; g++) {
      const it = n + g;
      if (vis[it] !== 2 || !inView(it)) continue;
      if (snap && !snap.groupPresent[g]) continue;  // nothing of this box exists in this pass
      const st = groupStyle(M.gKind[g]);
      ctx.fillStyle = st.fill; ctx.strokeStyle = sel === it ? '#1a237e' : st.stroke;
      ctx.lineWidth = (sel === it ? 2.5 : 1) / Math.min(1, s);
      ctx.setLineDash(M.gKind[g] === 1 ? [] : [6, 4]);
      ctx.beginPath(); ctx.rect(X[it], Y[it], W[it], H[it]); ctx.fill(); ctx.stroke();
      ctx.setLineDash([]);
      if (s > 0.3) {
        ctx.fillStyle = '#37474f'; ctx.font = '600 12px system-ui, sans-serif'; ctx.textBaseline = 'middle';
        const head = '\u25BE ' + M.gLabel[g] + (M.gType[g] ? '  \u00B7 ' + trunc(M.gType[g], 40) : '');
        ctx.fillText(head, X[it] + 8, Y[it] + 14);
      }
    }
    this._drawEdges(ctx, x0, y0, x1, y1, sel);
    // collapsed group boxes
    const text = s > 0.38, detail = s > 0.7;
    ctx.textBaseline = 'middle';
    for (let g = 1; g < M.ng; g++) {
      const it = n + g;
      if (vis[it] !== 1 || !inView(it)) continue;
      const st = groupStyle(M.gKind[g]);
      const gs = snap ? snap.groupStatus[g] : 0;
      ctx.fillStyle = st.box;
      ctx.globalAlpha = (snap && !snap.groupPresent[g]) ? 0.25 : 1;
      ctx.fillRect(X[it], Y[it], W[it], H[it]);
      ctx.lineWidth = (sel === it ? 3 : gs ? 2.5 : 1.2) / Math.min(1, s);
      ctx.strokeStyle = sel === it ? '#1a237e' : gs === 1 ? '#2e7d32' : gs === 2 ? '#ef6c00' : st.stroke;
      ctx.strokeRect(X[it], Y[it], W[it], H[it]);
      // a second offset edge says "there is more inside"
      ctx.strokeStyle = st.stroke; ctx.lineWidth = 1 / Math.min(1, s);
      ctx.strokeRect(X[it] + 3, Y[it] + 3, W[it], H[it]);
      if (s > 0.25) {
        ctx.fillStyle = '#263238'; ctx.font = '600 13px system-ui, sans-serif';
        ctx.fillText('\u25B8 ' + M.gLabel[g], X[it] + 8, Y[it] + 15);
        ctx.font = '11px system-ui, sans-serif'; ctx.fillStyle = '#546e7a';
        const sub = M.gCount[g] + ' nodes \u00B7 ' + (M.gKind[g] === 3 ? 'delegate ' : '') + trunc(M.gType[g] || st.name, 28);
        ctx.fillText(sub, X[it] + 8, Y[it] + 33);
      }
      ctx.globalAlpha = 1;
    }
    // nodes
    const dim = (i) => (matches && !matches[i]) || hidden.has(M.cat[i]);
    const overlayOn = M.overlay && this.state.overlay;
    for (let i = 0; i < n; i++) {
      if (vis[i] !== 1 || !inView(i)) continue;
      let ghost = false, status = 0;
      if (snap) {
        if (!snap.present[i]) { if (!snap.removed[i]) continue; ghost = true; }
        status = snap.status[i];
      }
      ctx.globalAlpha = ghost ? 0.35 : dim(i) ? 0.2 : 1;
      ctx.fillStyle = ghost ? '#ffebee' : this.nodeFill(i);
      const op = M.kind[i] === 2 || M.kind[i] === 3;
      ctx.beginPath();
      if (s > 0.25 && ctx.roundRect) ctx.roundRect(X[i], Y[i], W[i], H[i], op ? 6 : 14); else ctx.rect(X[i], Y[i], W[i], H[i]);
      ctx.fill();
      let lw = 1, sc = 'rgba(0,0,0,0.35)';
      if (ghost) { sc = '#c62828'; lw = 2; ctx.setLineDash([5, 4]); }
      else if (status === 1) { sc = '#2e7d32'; lw = 3; }
      else if (status === 2) { sc = '#ef6c00'; lw = 3; }
      if (matches && matches[i]) { sc = '#f9a825'; lw = 3.5; }
      if (pane.marked && pane.marked.has(i)) { sc = '#d500f9'; lw = 4; }
      if (sel === i) { sc = '#1a237e'; lw = 4; }
      if (lw > 1 || s > 0.25) { ctx.lineWidth = lw / Math.min(1, Math.max(s, 0.3)); ctx.strokeStyle = sc; ctx.stroke(); }
      ctx.setLineDash([]);
      if (text) {
        ctx.fillStyle = '#102027'; ctx.font = (M.kind[i] === 2 ? '600 ' : '') + '12px system-ui, sans-serif';
        ctx.textAlign = 'center';
        const cy = detail && M.shape[i] ? Y[i] + 13 : Y[i] + H[i] / 2;
        ctx.fillText(this.nodeLabel(i), X[i] + W[i] / 2, cy);
        const v = overlayOn ? M.overlayValue(i) : null, hasV = v !== null && v !== undefined;
        if (detail && (M.shape[i] || hasV)) {
          ctx.font = '10px ui-monospace, monospace'; ctx.fillStyle = '#455a64';
          const sub = M.shape[i] ? (hasV ? fmtNum(v) + ' \u00B7 ' : '') + M.shape[i] : fmtNum(v);
          ctx.fillText(trunc(sub, 34), X[i] + W[i] / 2, Y[i] + 28);
        }
        ctx.textAlign = 'start';
      }
    }
    ctx.globalAlpha = 1;
    this._drawMini();
    if (this.callbacks.onDraw) this.callbacks.onDraw(this);
  }

  _drawEdges(ctx, x0, y0, x1, y1, sel) {
    const L = this.L, M = this.M, s = this.camera.scale;
    const X = L.X, Y = L.Y, W = L.W, H = L.H, E = L.edges, selEdges = [];
    const present = this.snapshotEdges(), BIG = M.n + M.ng + 1;
    ctx.lineWidth = Math.max(1, 1.2 / s) * (s < 0.2 ? 0.6 : 1);
    ctx.strokeStyle = s < 0.2 ? 'rgba(96,125,139,0.55)' : '#90a4ae';
    ctx.beginPath();
    const arrows = s > 0.35, arrowPts = [];
    for (let e = 0; e < E.length; e += 2) {
      const a = E[e], b = E[e + 1];
      if (present && !present.has(a * BIG + b)) continue;
      const ax = X[a] + W[a] / 2, ay = Y[a] + H[a], bx = X[b] + W[b] / 2, by = Y[b];
      if (Math.max(ax, bx) < x0 || Math.min(ax, bx) > x1 || Math.max(ay, by) < y0 || Math.min(ay, by) > y1) continue;
      if (a === sel || b === sel) { selEdges.push(ax, ay, bx, by); continue; }
      const dy = Math.max(30, Math.abs(by - ay) / 2);
      ctx.moveTo(ax, ay);
      if (by - ay > 240 && Math.abs(bx - ax) < 60) {
        // a long skip edge (residual) bows out to the side instead of running through the chain
        const bow = Math.min(220, 40 + (by - ay) * 0.12) + W[a] / 2;
        ctx.bezierCurveTo(ax + bow, ay + 60, bx + bow, by - 60, bx, by);
      } else ctx.bezierCurveTo(ax, ay + dy, bx, by - dy, bx, by);
      if (arrows) arrowPts.push(bx, by);
    }
    ctx.stroke();
    if (arrows) {
      ctx.fillStyle = '#90a4ae'; ctx.beginPath();
      for (let e = 0; e < arrowPts.length; e += 2) {
        ctx.moveTo(arrowPts[e], arrowPts[e + 1]);
        ctx.lineTo(arrowPts[e] - 4, arrowPts[e + 1] - 7); ctx.lineTo(arrowPts[e] + 4, arrowPts[e + 1] - 7);
      }
      ctx.fill();
    }
    if (selEdges.length) {
      ctx.strokeStyle = '#1a237e'; ctx.lineWidth = Math.max(2, 2.5 / s); ctx.beginPath();
      for (let e = 0; e < selEdges.length; e += 4) {
        const dy = Math.max(30, Math.abs(selEdges[e + 3] - selEdges[e + 1]) / 2);
        ctx.moveTo(selEdges[e], selEdges[e + 1]);
        ctx.bezierCurveTo(selEdges[e], selEdges[e + 1] + dy, selEdges[e + 2], selEdges[e + 3] - dy, selEdges[e + 2], selEdges[e + 3]);
      }
      ctx.stroke();
    }
  }

  _drawMini() {
    const L = this.L, M = this.M, n = M.n, mc = this.mini, ctx = mc.getContext('2d'), cam = this.camera;
    const mw = mc.width, mh = mc.height;
    const sc = Math.min((mw - 8) / Math.max(1, L.width), (mh - 8) / Math.max(1, L.height));
    const ox = (mw - L.width * sc) / 2, oy = (mh - L.height * sc) / 2;
    this._miniT = [sc, ox, oy];
    if (!this._miniCache) {
      const off = document.createElement('canvas');
      off.width = mw; off.height = mh;
      const c2 = off.getContext('2d');
      c2.fillStyle = '#fafafa'; c2.fillRect(0, 0, mw, mh);
      for (let it = 0; it < L.vis.length; it++) {
        if (L.vis[it] !== 1) continue;
        c2.fillStyle = it < n ? catColor(M.cat[it]) : '#b0bec5';
        c2.fillRect(ox + L.X[it] * sc, oy + L.Y[it] * sc, Math.max(1, L.W[it] * sc), Math.max(1, L.H[it] * sc));
      }
      this._miniCache = off;
    }
    ctx.drawImage(this._miniCache, 0, 0);
    ctx.strokeStyle = '#d32f2f'; ctx.lineWidth = 1.5;
    const vx = (-cam.x / cam.scale) * sc + ox, vy = (-cam.y / cam.scale) * sc + oy;
    ctx.strokeRect(vx, vy, (this.cw / cam.scale) * sc, (this.ch / cam.scale) * sc);
  }

  /* Item under screen point (node first, then box, then a frame's header), or -1. */
  hit(sx, sy) {
    const L = this.L, M = this.M, n = M.n, cam = this.camera, snap = this.snapshot;
    const wx = (sx - cam.x) / cam.scale, wy = (sy - cam.y) / cam.scale;
    const inside = (it) => wx >= L.X[it] && wx <= L.X[it] + L.W[it] && wy >= L.Y[it] && wy <= L.Y[it] + L.H[it];
    for (let i = 0; i < n; i++) {
      if (L.vis[i] === 1 && inside(i) && (!snap || snap.present[i] || snap.removed[i])) return i;
    }
    let best = -1;
    for (let g = 1; g < M.ng; g++) {
      const it = n + g;
      if (L.vis[it] === 1 && inside(it)) return it;
      if (L.vis[it] === 2 && inside(it) && wy <= L.Y[it] + 26) {
        if (best < 0 || M.gDepth[g] > M.gDepth[best - n]) best = it;
      }
    }
    return best;
  }

  /* Page coordinates of an item's centre. */
  screenPos(it) {
    const L = this.L, r = this.canvas.getBoundingClientRect(), cam = this.camera;
    return { x: r.left + (L.X[it] + L.W[it] / 2) * cam.scale + cam.x, y: r.top + (L.Y[it] + L.H[it] / 2) * cam.scale + cam.y };
  }

  /* The part of the layout on screen, in layout coordinates. */
  viewport() {
    const cam = this.camera;
    return { x: -cam.x / cam.scale, y: -cam.y / cam.scale, w: this.cw / cam.scale, h: this.ch / cam.scale };
  }

  _bind() {
    const c = this.canvas;
    let drag = null, miniDrag = false;
    c.addEventListener('wheel', (ev) => {
      ev.preventDefault();
      const r = c.getBoundingClientRect();
      if (ev.ctrlKey || ev.metaKey || !ev.shiftKey) this.zoomAt(Math.exp(-ev.deltaY * 0.0015), ev.clientX - r.left, ev.clientY - r.top);
      else this.panBy(-(ev.deltaX || ev.deltaY), 0);
    }, { passive: false });
    c.addEventListener('mousedown', (ev) => {
      drag = { x: ev.clientX, y: ev.clientY, cx: this.camera.x, cy: this.camera.y, moved: false };
      c.focus();
    });
    window.addEventListener('mousemove', (ev) => {
      if (!drag) return;
      const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
      if (drag.moved) { this.camera.x = drag.cx + dx; this.camera.y = drag.cy + dy; this.redraw(); }
    });
    window.addEventListener('mouseup', (ev) => {
      if (!drag) return;
      const moved = drag.moved;
      drag = null;
      if (!moved && this.callbacks.onSelect) {
        const r = c.getBoundingClientRect();
        this.callbacks.onSelect(this, this.hit(ev.clientX - r.left, ev.clientY - r.top));
      }
    });
    c.addEventListener('dblclick', (ev) => {
      const r = c.getBoundingClientRect(), it = this.hit(ev.clientX - r.left, ev.clientY - r.top), M = this.M;
      if (it >= M.n) this.toggleGroup(it - M.n);
      else if (it >= 0 && M.group[it] > 0) this.toggleGroup(M.group[it], false);
    });
    const miniMove = (ev) => {
      const r = this.mini.getBoundingClientRect(), t = this._miniT, cam = this.camera;
      if (!t) return;
      const wx = (ev.clientX - r.left - t[1]) / t[0], wy = (ev.clientY - r.top - t[2]) / t[0];
      cam.x = this.cw / 2 - wx * cam.scale; cam.y = this.ch / 2 - wy * cam.scale; this.redraw();
    };
    this.mini.addEventListener('mousedown', (ev) => { miniDrag = true; miniMove(ev); ev.stopPropagation(); });
    window.addEventListener('mousemove', (ev) => { if (miniDrag) miniMove(ev); });
    window.addEventListener('mouseup', () => { miniDrag = false; });
  }
}
