/* etlens viewer — one graph of the payload, decoded into typed arrays and answering questions about
 * its nodes and groups. The model is read-only after construction: views, panels and the app ask
 * it through methods; per-pass differences come back as Snapshot objects (see snapshot()). */

import { trunc } from './dom.js';
import { parseDetails } from './payload.js';

export const NODE_H = 38;

export class Model {
  /* gp: one entry of payload.graphs; strings: payload.strings. */
  constructor(gp, strings) {
    this.strings = strings;
    const nodes = gp.nodes, groups = gp.groups;
    const n = this.n = nodes.name.length;
    this.name = this.str(gp.name);
    this.edges = Int32Array.from(gp.edges);
    this.group = Int32Array.from(nodes.group);
    this.kind = Uint8Array.from(nodes.kind);
    this._cols = {
      name: nodes.name, label: nodes.label, target: nodes.target, shape: nodes.shape,
      moduleStack: nodes.module_stack, stackTrace: nodes.stack_trace, debugHandles: nodes.debug_handles,
      details: nodes.details, lineage: nodes.lineage
    };
    this._moduleStacks = gp.module_stacks;
    this._snapshots = gp.snapshots || null;
    this.overlay = nodes.overlay || null;
    const ng = this.ng = groups.parent.length;
    this.gParent = Int32Array.from(groups.parent);
    this.gKind = Uint8Array.from(groups.kind);
    this.gRep = Int32Array.from(groups.representative);
    this.gLabel = groups.label.map((i) => trunc(this.str(i), 40));
    this.gType = groups.type.map((i) => this.str(i));
    this.gDepth = new Int32Array(ng);
    for (let g = 1; g < ng; g++) this.gDepth[g] = this.gDepth[this.gParent[g]] + 1;
    this.gMembers = Array.from({ length: ng }, () => []);
    this.gChildren = Array.from({ length: ng }, () => []);
    for (let g = 1; g < ng; g++) this.gChildren[this.gParent[g]].push(g);
    for (let i = 0; i < n; i++) this.gMembers[this.group[i]].push(i);
    // a group's place in graph order is its first *operator* (its weights are declared up front)
    this.gFirst = new Float64Array(ng).fill(Infinity);
    const firstAny = new Float64Array(ng).fill(Infinity);
    this.gCount = new Int32Array(ng);
    for (let i = 0; i < n; i++) {
      const src = this.kind[i] <= 1;
      for (let g = this.group[i]; g >= 0; g = g ? this.gParent[g] : -1) {
        if (!src && i < this.gFirst[g]) this.gFirst[g] = i;
        if (i < firstAny[g]) firstAny[g] = i;
        this.gCount[g]++;
      }
    }
    for (let g = 0; g < ng; g++) if (this.gFirst[g] === Infinity) this.gFirst[g] = firstAny[g];
    this.label = new Array(n); this.shape = new Array(n); this.cat = new Array(n);
    this.nodeW = new Float64Array(n); this.nodeH = NODE_H;
    for (let i = 0; i < n; i++) {
      const lb = trunc(this.str(nodes.label[i]), 30), sh = trunc(this.str(nodes.shape[i]), 34);
      this.label[i] = lb; this.shape[i] = sh; this.cat[i] = this.str(nodes.category[i]);
      this.nodeW[i] = Math.max(56, Math.max(lb.length * 7.2, sh.length * 6) + 18);
    }
    this.groupW = new Float64Array(ng);
    for (let g = 1; g < ng; g++) {
      const subtitle = String(this.gCount[g]).length + 18 + Math.min(28, this.gType[g].length);
      this.groupW[g] = Math.max(90, this.gLabel[g].length * 7.6 + 30, subtitle * 6.2 + 16);
    }
    // adjacency for keyboard navigation and the details panel
    this.preds = Array.from({ length: n }, () => []);
    this.succs = Array.from({ length: n }, () => []);
    for (let e = 0; e < this.edges.length; e += 2) {
      this.succs[this.edges[e]].push(this.edges[e + 1]);
      this.preds[this.edges[e + 1]].push(this.edges[e]);
    }
    this.byName = new Map();
    for (let i = 0; i < n; i++) this.byName.set(this.nodeName(i), i);
    this._search = null;
  }

  str(i) { return i >= 0 ? this.strings[i] : ''; }
  nodeName(i) { return this.str(this._cols.name[i]); }
  fullLabel(i) { return this.str(this._cols.label[i]); }
  target(i) { return this.str(this._cols.target[i]); }
  shapeText(i) { return this.str(this._cols.shape[i]); }
  stackTrace(i) { return this.str(this._cols.stackTrace[i]); }
  debugHandles(i) { return this._cols.debugHandles[i] || []; }
  overlayValue(i) { return this.overlay ? this.overlay[i] : undefined; }

  /* [[path, type], ...] from the outermost module in. */
  modulePath(i) {
    const m = this._cols.moduleStack[i];
    if (m < 0) return [];
    const flat = this._moduleStacks[m], out = [];
    for (let q = 0; q < flat.length; q += 2) out.push([this.str(flat[q]), this.str(flat[q + 1])]);
    return out;
  }

  /* [{name, target, pass}], nearest first. */
  lineage(i) {
    const ln = this._cols.lineage[i], out = [];
    for (let q = 0; ln && q < ln.length; q += 3) {
      out.push({ name: this.str(ln[q]), target: this.str(ln[q + 1]), pass: this.str(ln[q + 2]) });
    }
    return out;
  }

  /* Click-time details: {outputs?, attrs?, delegate?} (see node_details in the schema). */
  details(i) {
    const x = this._cols.details[i];
    return x >= 0 ? parseDetails(this.strings[x]) : {};
  }

  /* Lower-cased [name, target, category, module] per node, built on first search. */
  searchText() {
    if (!this._search) {
      this._search = Array.from({ length: this.n }, (_, i) => {
        const mp = this.modulePath(i), last = mp.length ? mp[mp.length - 1][0] + ' ' + mp[mp.length - 1][1] : '';
        return [this.nodeName(i), this.target(i), this.cat[i], last].map((s) => s.toLowerCase());
      });
    }
    return this._search;
  }

  /* Nodes matching a query: plain text matches any field; op:, cat:, mod:, name: pick one field. */
  search(query) {
    let q = query.trim().toLowerCase();
    if (!q) return null;
    let field = -1;
    const m = /^(name|op|cat|mod|module|category|target):(.*)$/.exec(q);
    if (m) {
      field = { name: 0, op: 1, target: 1, cat: 2, category: 2, mod: 3, module: 3 }[m[1]];
      q = m[2].trim();
    }
    const out = [];
    this.searchText().forEach((t, i) => {
      if (field >= 0 ? t[field].includes(q) : t.some((s) => s.includes(q))) out.push(i);
    });
    return out;
  }

  /* Group ids from the root down to node i's own group. */
  ancestors(i) {
    const out = [];
    for (let g = this.group[i]; g > 0; g = this.gParent[g]) out.push(g);
    return out.reverse();
  }

  /* Every node inside group g, at any depth. */
  descendants(g) {
    const out = [], stack = [g];
    while (stack.length) {
      const x = stack.pop();
      out.push(...this.gMembers[x]);
      stack.push(...this.gChildren[x]);
    }
    return out;
  }

  get snapshotCount() { return this._snapshots ? this._snapshots.length : 0; }

  /* Pass k of a pass-trace page, decoded (see Snapshot). */
  snapshot(k) { return new Snapshot(this, k, this._snapshots[k]); }
}

/* One pass over the union graph: which nodes/edges exist, which were added (status 1), rewritten
 * (status 2) or removed (ghosts), per-group roll-ups, and labels that differ from the union's. */
export class Snapshot {
  constructor(M, index, rec) {
    const n = M.n;
    this.index = index;
    this.name = M.str(rec.name);
    this.stage = M.str(rec.stage);
    this.wallTimeS = rec.wall_time_s;
    this.nodesDelta = rec.nodes_delta;
    this.nodeCount = rec.node_count;
    this.removedCount = rec.removed_count;
    this.addedCount = rec.added.length;
    this.rewrittenCount = rec.rewritten.length;
    const err = rec.error;
    this.error = err ? { type: M.str(err.type), message: M.str(err.message), traceback: M.str(err.traceback) } : null;
    this.present = runsToMask(rec.present_runs, n);
    this.edges = runsToMask(rec.edge_runs, M.edges.length / 2);
    this.status = new Uint8Array(n);
    this.removed = new Uint8Array(n);
    for (const i of rec.added) this.status[i] = 1;
    for (const i of rec.rewritten) this.status[i] = 2;
    for (const i of rec.removed) this.removed[i] = 1;
    this.labels = new Map();
    const tg = rec.target_overrides || [];
    for (let q = 0; q < tg.length; q += 3) this.labels.set(tg[q], trunc(M.str(tg[q + 2]), 30));
    this.groupStatus = new Uint8Array(M.ng);
    this.groupPresent = new Uint8Array(M.ng);
    for (let i = 0; i < n; i++) {
      const st = this.status[i] || (this.removed[i] ? 2 : 0), pr = this.present[i];
      if (!st && !pr) continue;
      for (let g = M.group[i]; g > 0; g = M.gParent[g]) {
        if (pr) this.groupPresent[g] = 1;
        if (st && (!this.groupStatus[g] || st === 2)) this.groupStatus[g] = st;
      }
    }
  }

  /* 'added' | 'rewritten' | 'unchanged' | 'removed' for node i. */
  statusName(i) { return !this.present[i] ? 'removed' : ['unchanged', 'added', 'rewritten'][this.status[i]]; }
}

function runsToMask(runs, n) {
  const a = new Uint8Array(n);
  for (let q = 0; q < runs.length; q += 2) a.fill(1, runs[q], runs[q] + runs[q + 1]);
  return a;
}
