/* etlens viewer — the page: owns the one state object and wires toolbar, panes, panels, search,
 * category filter, pass stepping, compare selection sync, export and keyboard.
 *
 * State (createState) is the only mutable data shared between components; Model objects are
 * read-only, Views draw from the state and own only their canvas, PassBar/DetailsPanel/Legend
 * render from it. */

import { el } from './dom.js';
import { Layout } from './layout.js';
import { Model } from './model.js';
import { DetailsPanel, Legend } from './panels.js';
import { readPayload } from './payload.js';
import { download, toSVG } from './svg.js';
import { View } from './view.js';

/* The viewer's whole mutable state. One pane per graph. */
export function createState(models, overlay) {
  return {
    activePane: 0,
    panes: models.map((M) => ({
      collapsed: Layout.initialCollapse(M),   // per group: 1 = drawn as one box
      camera: { scale: 1, x: 0, y: 0 },       // zoom and pan
      selected: -1,                            // node index, n + group id, or -1
      marked: null,                            // Set of nodes matching another pane's selection
      matches: null                            // Uint8Array of search hits, null without a search
    })),
    hiddenCategories: new Set(),               // categories dimmed by the legend filter
    overlay: overlay || null,                  // {label, min, max} colour scale, or null
    snapshot: null,                            // the pass shown (Snapshot), pass pages only
    search: { query: '', hits: [], cursor: -1 }
  };
}

export class App {
  constructor(doc) {
    const t0 = performance.now();
    this.doc = doc;
    this.payload = readPayload(doc);
    this.times = { parsed: performance.now() - t0 };
    const D = this.payload;
    this.mode = D.mode;
    const title = D.title || 'etlens graph';
    doc.title = title;
    this.$('etl-title').textContent = title;
    this.models = D.graphs.map((gp) => new Model(gp, D.strings));
    this.state = createState(this.models, D.overlay);
    this._matches = D.mode === 'compare' ? D.matches : null;
    this._matchCache = new Map();
    this._painted = new Set();
    this.ready = false;
    const viewsHost = this.$('etl-views');
    const callbacks = { onSelect: (view, it) => this.selectItem(view, it), onDraw: (view) => this._firstPaint(view) };
    this.views = this.models.map((M, k) => {
      const host = el('div', { cls: 'etl-stage' });
      viewsHost.appendChild(el('div', { cls: 'etl-pane' },
        this.models.length > 1 ? el('div', { cls: 'etl-pane-title', text: M.name }) : null, host));
      return new View(M, host, this.state, k, callbacks);
    });
    this.times.layout = performance.now() - t0;
    this.details = new DetailsPanel(this.$('etl-details'), this.state, {
      selectNode: (view, i) => this.selectNode(view, i, true),
      toggleGroup: (view, g) => { view.toggleGroup(g); this.details.show(view, view.pane.selected); }
    });
    new Legend(this.$('etl-legend'), this.models, this.state, { toggleCategory: (c) => this.toggleCategory(c) });
    this._bindSearch();
    this._bindToolbar();
    this._bindKeys();
    if (this.mode === 'passes') this._bindPassBar();
    this.details.show(this.activeView, -1);
    for (const v of this.views) {
      v.resize();
      if (this.state.snapshot) v.fitSnapshot(); else v.initialView();
    }
  }

  $(id) { return this.doc.getElementById(id); }
  get activeView() { return this.views[this.state.activePane]; }

  _firstPaint(view) {
    if (this.ready || this._painted.has(view.index)) return;
    this._painted.add(view.index);
    if (this._painted.size === this.views.length) {
      this.times.firstPaint = performance.now();
      this.ready = true;
      window.etlensReady = true;
    }
  }

  redrawAll() { for (const v of this.views) v.redraw(); }

  // ------------------------------------------------------------ selection (+ compare sync)
  /* Nodes of pane b that represent node `it` of pane a (precomputed in Python). */
  matchesFor(a, b) {
    const key = a + ',' + b;
    let m = this._matchCache.get(key);
    if (!m) {
      m = new Map();
      const flat = (this._matches && this._matches[key]) || [];
      for (let q = 0; q < flat.length; q += 2 + flat[q + 1]) m.set(flat[q], flat.slice(q + 2, q + 2 + flat[q + 1]));
      this._matchCache.set(key, m);
    }
    return m;
  }

  selectItem(view, it) {
    const state = this.state;
    state.activePane = view.index;
    state.panes.forEach((p, k) => { if (k !== view.index) p.selected = -1; p.marked = null; });
    view.pane.selected = it;
    this.details.show(view, it);
    if (this.views.length > 1 && it >= 0 && it < view.M.n) {
      for (const v of this.views) {
        if (v === view) continue;
        const hits = this.matchesFor(view.index, v.index).get(it) || [];
        v.pane.marked = new Set(hits);
        if (hits.length) { for (const h of hits) v.reveal(h); v.centerOn(hits[0], true); }
      }
    }
    this.redrawAll();
  }

  selectNode(view, i, center) {
    view.reveal(i);
    this.selectItem(view, i);
    if (center) view.centerOn(i);
  }

  selectByName(name, paneIndex) {
    const v = this.views[paneIndex || 0], i = v.M.byName.get(name);
    if (i === undefined) return false;
    this.selectNode(v, i, true);
    return true;
  }

  toggleCategory(cat) {
    const hidden = this.state.hiddenCategories;
    if (hidden.has(cat)) hidden.delete(cat); else hidden.add(cat);
    this.redrawAll();
    return hidden.has(cat);
  }

  // ------------------------------------------------------------ search
  runSearch(query) {
    const search = this.state.search;
    search.query = query; search.hits = []; search.cursor = -1;
    this.views.forEach((v) => {
      const hits = v.M.search(query);
      v.pane.matches = hits ? new Uint8Array(v.M.n) : null;
      if (hits) for (const i of hits) v.pane.matches[i] = 1;
      if (v === this.activeView && hits) search.hits = hits;
    });
    this.redrawAll();
    const n = search.hits.length;
    this.$('etl-search-info').textContent = query.trim() ? n + ' match' + (n === 1 ? '' : 'es') : '';
  }

  nextMatch(dir) {
    const search = this.state.search, hits = search.hits;
    if (!hits.length) return;
    search.cursor = (search.cursor + dir + hits.length) % hits.length;
    this.selectNode(this.activeView, hits[search.cursor], true);
    this.$('etl-search-info').textContent = (search.cursor + 1) + ' / ' + hits.length;
  }

  _bindSearch() {
    const input = this.$('etl-search');
    let timer = 0;
    input.addEventListener('input', () => { clearTimeout(timer); timer = setTimeout(() => this.runSearch(input.value), 120); });
    input.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter') {
        clearTimeout(timer);
        if (!this.state.search.hits.length || this.state.search.cursor < 0) this.runSearch(input.value);
        this.nextMatch(ev.shiftKey ? -1 : 1);
        ev.preventDefault();
      }
      if (ev.key === 'Escape') { input.value = ''; this.runSearch(''); input.blur(); }
    });
  }

  // ------------------------------------------------------------ pass stepping
  get snapshotIndex() { return this.state.snapshot ? this.state.snapshot.index : 0; }

  /* Show pass k (clamped) of a pass-trace page. */
  showSnapshot(k) {
    const view = this.views[0], M = view.M;
    k = Math.max(0, Math.min(M.snapshotCount - 1, k));
    const snap = M.snapshot(k);
    this.state.snapshot = snap;
    this.$('etl-pass-select').value = String(k);
    const parts = [(k + 1) + ' / ' + M.snapshotCount, snap.nodeCount + ' nodes'];
    const dn = snap.nodesDelta;
    if (dn !== null && dn !== undefined && k > 0) parts.push((dn >= 0 ? '+' : '\u2212') + Math.abs(dn) + ' nodes');
    const t = snap.wallTimeS;
    if (t !== null && t !== undefined) parts.push((t * 1000).toFixed(t < 0.01 ? 2 : 1) + ' ms');
    parts.push(snap.addedCount + ' added', snap.rewrittenCount + ' rewritten', snap.removedCount + ' removed');
    if (snap.stage) parts.push('stage ' + snap.stage);
    this.$('etl-pass-info').textContent = parts.join(' \u00B7 ');
    const banner = this.$('etl-banner');
    banner.textContent = '';
    banner.hidden = !snap.error;
    if (snap.error) {
      const err = snap.error;
      banner.appendChild(el('strong', { text: 'Pass "' + snap.name + '" failed: ' + err.type + ': ' + err.message }));
      if (err.traceback) banner.appendChild(el('details', null, el('summary', { text: 'traceback' }), el('pre', { text: err.traceback })));
    }
    if (view.pane.selected >= 0) this.details.show(view, view.pane.selected);
    view.invalidate();
    return k;
  }

  step(d) { if (this.state.snapshot) this.showSnapshot(this.snapshotIndex + d); }

  _bindPassBar() {
    const M = this.models[0], select = this.$('etl-pass-select');
    for (let k = 0; k < M.snapshotCount; k++) {
      const snap = M.snapshot(k);
      select.appendChild(el('option', { value: String(k), text: (k + 1) + '. ' + snap.name + (snap.error ? '  (failed)' : '') }));
    }
    select.addEventListener('change', () => this.showSnapshot(parseInt(select.value, 10)));
    this.$('etl-prev').addEventListener('click', () => this.step(-1));
    this.$('etl-next').addEventListener('click', () => this.step(1));
    this.$('etl-passbar').hidden = false;
    this.showSnapshot(0);
  }

  // ------------------------------------------------------------ toolbar and keyboard
  _bindToolbar() {
    const help = this.$('etl-help');
    this.$('etl-png').addEventListener('click', () => download('etlens-graph.png', this.activeView.canvas.toDataURL('image/png')));
    this.$('etl-svg').addEventListener('click', () => download('etlens-graph.svg',
      'data:image/svg+xml;charset=utf-8,' + encodeURIComponent(toSVG(this.activeView))));
    this.$('etl-fit').addEventListener('click', () => { for (const v of this.views) v.fit(); });
    this.$('etl-expand').addEventListener('click', () => { for (const v of this.views) v.setAllCollapsed(false); });
    this.$('etl-collapse').addEventListener('click', () => { for (const v of this.views) v.setAllCollapsed(true); });
    this.$('etl-help-btn').addEventListener('click', () => { help.hidden = !help.hidden; });
  }

  /* Select the producer (dir < 0) or user (dir > 0) of the selected node. */
  neighbour(view, dir) {
    const M = view.M, i = view.pane.selected;
    if (i < 0 || i >= M.n) return;
    const list = dir > 0 ? M.succs[i] : M.preds[i];
    if (list.length) this.selectNode(view, list[0], true);
  }

  /* Select the nearest visible box left (dir < 0) or right (dir > 0) in the same row. */
  sibling(view, dir) {
    const L = view.L, it = view.pane.selected;
    if (it < 0) return;
    let best = -1, bd = Infinity;
    for (let q = 0; q < L.vis.length; q++) {
      if (L.vis[q] !== 1 || Math.abs(L.Y[q] - L.Y[it]) > 20) continue;
      const d = (L.X[q] - L.X[it]) * dir;
      if (d > 0 && d < bd) { bd = d; best = q; }
    }
    if (best >= 0) { this.selectItem(view, best); view.centerOn(best, true); }
  }

  _bindKeys() {
    this.doc.addEventListener('keydown', (ev) => {
      const tag = (ev.target && ev.target.tagName) || '';
      if (tag === 'INPUT' || tag === 'SELECT' || tag === 'TEXTAREA') return;
      const v = this.activeView, k = ev.key, sel = v.pane.selected, passes = !!this.state.snapshot;
      let handled = true;
      if (k === 'ArrowRight' || k === 'ArrowLeft') {
        const d = k === 'ArrowRight' ? 1 : -1;
        if (passes && !ev.altKey) this.step(d); else this.sibling(v, d);
      } else if (k === 'ArrowDown') this.neighbour(v, 1);
      else if (k === 'ArrowUp') this.neighbour(v, -1);
      else if (k === 'PageDown' || k === ']') this.step(1);
      else if (k === 'PageUp' || k === '[') this.step(-1);
      else if (k === 'f') { for (const x of this.views) x.fit(); }
      else if (k === '/') this.$('etl-search').focus();
      else if (k === '+' || k === '=') v.zoomAt(1.25, v.cw / 2, v.ch / 2);
      else if (k === '-') v.zoomAt(0.8, v.cw / 2, v.ch / 2);
      else if (k === 'n') this.nextMatch(ev.shiftKey ? -1 : 1);
      else if (k === 'N') this.nextMatch(-1);
      else if (k === 'Enter' && sel >= 0) {
        if (sel >= v.M.n) { v.toggleGroup(sel - v.M.n); this.details.show(v, sel); }
        else if (v.M.group[sel] > 0) { const g = v.M.group[sel]; v.toggleGroup(g, false); this.selectItem(v, v.M.n + g); }
      } else if (k === 'Escape') this.selectItem(v, -1);
      else if (k === '?') { const help = this.$('etl-help'); help.hidden = !help.hidden; }
      else handled = false;
      if (handled) ev.preventDefault();
    });
  }

  /* The hooks tests and scripts use (window.etlens; no model data is evaluated as code). */
  hooks() {
    const view = (vi) => this.views[vi || 0];
    return {
      mode: this.mode,
      times: this.times,
      state: this.state,
      views: this.views,
      find: (name, vi) => view(vi).M.byName.get(name),
      nodeName: (i, vi) => view(vi).M.nodeName(i),
      marked: (vi) => Array.from(this.state.panes[vi || 0].marked || []),
      select: (name, vi) => this.selectByName(name, vi),
      screenPos: (name, vi) => {
        const v = view(vi), i = v.M.byName.get(name);
        if (i === undefined) return null;
        v.reveal(i); v.centerOn(i); v.draw();
        return v.screenPos(i);
      },
      step: (k) => (this.state.snapshot ? this.showSnapshot(k) : this.snapshotIndex),
      snapIndex: () => this.snapshotIndex,
      snapshotCount: () => this.models[0].snapshotCount,
      visibleCount: (vi) => view(vi).L.visibleCount(),
      visibleBounds: (vi) => view(vi).viewport(),
      nodeRect: (name, vi) => {  // layout rectangle of the box showing node `name` (camera unchanged)
        const v = view(vi), i = v.M.byName.get(name);
        if (i === undefined) return null;
        const L = v.L, it = L.rep[i];
        return { x: L.X[it], y: L.Y[it], w: L.W[it], h: L.H[it] };
      },
      svg: (vi) => toSVG(view(vi))
    };
  }
}
