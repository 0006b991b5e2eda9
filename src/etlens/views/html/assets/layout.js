/* etlens viewer — layered (Sugiyama-style) layout of the *visible* graph, in the browser.
 *
 * Why in the browser: the module hierarchy collapses and expands, so the laid-out graph changes with
 * every click; laying out only what is visible (a few hundred boxes for a 50k-node model) keeps
 * every re-layout in milliseconds. Compound nodes (expanded modules, QDQ clusters, delegate
 * subgraphs) are laid out bottom-up: each expanded group's children form their own small layered
 * graph, and the group then takes part in its parent's layout as one box of that size.
 *
 * Steps per container: orientation by graph order (acyclic by construction), longest-path layering,
 * sources pulled down next to their first user, barycenter ordering sweeps, then x positions that
 * follow neighbours' centres while never overlapping (average of a left and a right compaction).
 */

import { NODE_H } from './model.js';

/* One container's layered layout: k items with sort keys (graph order) and sizes w/h, edges
 * ea[i] -> eb[i] in local indices. Returns local {x, y, width, height}. */
export function layered(k, key, w, h, ea, eb, opts) {
  var gapX = opts.gapX, gapY = opts.gapY, li, q;
  var order = new Int32Array(k);
  for (var i = 0; i < k; i++) order[i] = i;
  order.sort(function (a, b) { return key[a] - key[b] || a - b; });
  var rank = new Int32Array(k);
  for (i = 0; i < k; i++) rank[order[i]] = i;
  // forward adjacency (by rank orientation)
  var m = ea.length;
  var outDeg = new Int32Array(k), inDeg = new Int32Array(k);
  var fs = new Int32Array(m), fd = new Int32Array(m);
  for (i = 0; i < m; i++) {
    var a = ea[i], b = eb[i];
    if (rank[a] > rank[b]) { var t = a; a = b; b = t; }
    fs[i] = a; fd[i] = b; outDeg[a]++; inDeg[b]++;
  }
  var outStart = new Int32Array(k + 1), inStart = new Int32Array(k + 1);
  for (i = 0; i < k; i++) { outStart[i + 1] = outStart[i] + outDeg[i]; inStart[i + 1] = inStart[i] + inDeg[i]; }
  var outAdj = new Int32Array(m), inAdj = new Int32Array(m);
  var oc = outStart.slice(0, k), ic = inStart.slice(0, k);
  for (i = 0; i < m; i++) { outAdj[oc[fs[i]]++] = fd[i]; inAdj[ic[fd[i]]++] = fs[i]; }
  // longest-path layering in rank order
  var layer = new Int32Array(k);
  for (var r = 0; r < k; r++) {
    var v = order[r], lv = layer[v];
    for (var j = outStart[v]; j < outStart[v + 1]; j++) {
      var u = outAdj[j];
      if (layer[u] < lv + 1) layer[u] = lv + 1;
    }
  }
  // pull sources (weights, inputs) down to just above their first user
  for (r = k - 1; r >= 0; r--) {
    v = order[r];
    if (inDeg[v] === 0 && outDeg[v] > 0) {
      var mn = 1e9;
      for (j = outStart[v]; j < outStart[v + 1]; j++) mn = Math.min(mn, layer[outAdj[j]]);
      layer[v] = Math.max(layer[v], mn - 1);
    }
  }
  // items with no edges at all (unused weights, dead constants) go to rows under the graph
  var isolated = [];
  var L = 0;
  for (i = 0; i < k; i++) if (inDeg[i] + outDeg[i] > 0 || k === 1) { if (layer[i] + 1 > L) L = layer[i] + 1; }
  var layers = [];
  for (i = 0; i < L; i++) layers.push([]);
  for (r = 0; r < k; r++) {
    v = order[r];
    if (inDeg[v] + outDeg[v] > 0 || k === 1) layers[layer[v]].push(v); else isolated.push(v);
  }
  var pos = new Float64Array(k);
  function renumber() {
    for (var li = 0; li < L; li++) {
      var ly = layers[li], n = ly.length;
      for (var q = 0; q < n; q++) pos[ly[q]] = (q + 0.5) / n;
    }
  }
  renumber();
  var bary = new Float64Array(k);
  function sweep(down) {
    for (var s = 0; s < L; s++) {
      var li = down ? s : L - 1 - s;
      var ly = layers[li];
      if (ly.length < 2) continue;
      for (var q = 0; q < ly.length; q++) {
        var x = ly[q], sum = 0, cnt = 0;
        var st = down ? inStart : outStart, adj = down ? inAdj : outAdj;
        for (var z = st[x]; z < st[x + 1]; z++) { sum += pos[adj[z]]; cnt++; }
        bary[x] = cnt ? sum / cnt : pos[x];
      }
      ly.sort(function (p, q2) { return bary[p] - bary[q2] || pos[p] - pos[q2]; });
      for (q = 0; q < ly.length; q++) pos[ly[q]] = (q + 0.5) / ly.length;
    }
  }
  var sweeps = k > 20000 ? 2 : 4;
  for (var it = 0; it < sweeps; it++) sweep(it % 2 === 0);
  // y: stacked layers
  var y = new Float64Array(k), x = new Float64Array(k);
  var top = 0;
  for (li = 0; li < L; li++) {
    var ly2 = layers[li], mh = 0;
    for (q = 0; q < ly2.length; q++) mh = Math.max(mh, h[ly2[q]]);
    for (q = 0; q < ly2.length; q++) y[ly2[q]] = top + (mh - h[ly2[q]]) / 2;
    top += mh + gapY;
  }
  // x: initial packing, then neighbour-following refinement without overlaps
  for (li = 0; li < L; li++) {
    var cx = 0;
    ly2 = layers[li];
    for (q = 0; q < ly2.length; q++) { x[ly2[q]] = cx; cx += w[ly2[q]] + gapX; }
    var shift = -cx / 2;
    for (q = 0; q < ly2.length; q++) x[ly2[q]] += shift;
  }
  var want = new Float64Array(k);
  function place(down) {
    for (var s = 0; s < L; s++) {
      var li = down ? s : L - 1 - s;
      var ly = layers[li], n = ly.length;
      var st = down ? inStart : outStart, adj = down ? inAdj : outAdj;
      for (var q = 0; q < n; q++) {
        var v = ly[q], sum = 0, cnt = 0;
        for (var z = st[v]; z < st[v + 1]; z++) { var u = adj[z]; sum += x[u] + w[u] / 2; cnt++; }
        want[v] = cnt ? sum / cnt - w[v] / 2 : x[v];
      }
      // left and right compactions, averaged: keeps order and gaps, follows the wish
      var lft = new Float64Array(n), rgt = new Float64Array(n);
      for (q = 0; q < n; q++) {
        v = ly[q];
        lft[q] = q ? Math.max(want[v], lft[q - 1] + w[ly[q - 1]] + gapX) : want[v];
      }
      for (q = n - 1; q >= 0; q--) {
        v = ly[q];
        rgt[q] = q < n - 1 ? Math.min(want[v], rgt[q + 1] - gapX - w[v]) : want[v];
      }
      for (q = 0; q < n; q++) x[ly[q]] = (lft[q] + rgt[q]) / 2;
    }
  }
  var passes = k > 20000 ? 2 : 6;
  for (it = 0; it < passes; it++) place(it % 2 === 0);
  var minX = Infinity, maxX = -Infinity;
  for (li = 0; li < L; li++) for (q = 0; q < layers[li].length; q++) { i = layers[li][q]; minX = Math.min(minX, x[i]); maxX = Math.max(maxX, x[i] + w[i]); }
  if (minX === Infinity) { minX = 0; maxX = 0; }
  if (isolated.length) {
    var rowW = Math.max(maxX - minX, 900), px = minX, rowH = 0;
    for (q = 0; q < isolated.length; q++) {
      v = isolated[q];
      if (px > minX && px + w[v] > minX + rowW) { px = minX; top += rowH + gapY / 2; rowH = 0; }
      x[v] = px; y[v] = top; px += w[v] + gapX; rowH = Math.max(rowH, h[v]);
      maxX = Math.max(maxX, x[v] + w[v]);
    }
    top += rowH + gapY;
  }
  for (i = 0; i < k; i++) x[i] -= minX;
  return { x: x, y: y, width: maxX - minX, height: Math.max(0, top - gapY) };
}

/* Item geometry of a Model under a collapse state. Items 0..n-1 are nodes, n..n+ng-1 groups;
 * vis[item] is 0 hidden, 1 drawn as a box, 2 drawn as a frame (an expanded group); rep[node] is
 * the visible item that stands for it; edges are the visible items' edges, deduplicated. */
export class Layout {
  /* collapsed: Uint8Array over groups (1 = collapsed), owned by the app's state. */
  constructor(M, collapsed) {
    const g = computeLayout(M, collapsed);
    this.vis = g.vis; this.rep = g.rep;
    this.X = g.X; this.Y = g.Y; this.W = g.W; this.H = g.H;
    this.edges = g.edges; this.width = g.width; this.height = g.height;
  }

  /* Number of items drawn as boxes. */
  visibleCount() {
    let c = 0;
    for (let q = 0; q < this.vis.length; q++) if (this.vis[q] === 1) c++;
    return c;
  }

  /* Start collapsed enough that the first view shows at most ~budget boxes: open the hierarchy one
   * whole level at a time (so siblings look alike), then greedily within the level that no longer
   * fits. Returns a fresh collapse mask (Uint8Array over groups). */
  static initialCollapse(M, budget = 250) {
    const collapsed = new Uint8Array(M.ng);
    if (M.n <= 400) return collapsed;
    collapsed.fill(1, 1);
    const size = (g) => M.gMembers[g].length + M.gChildren[g].length - 1;
    let count = M.gMembers[0].length + M.gChildren[0].length;
    let level = M.gChildren[0].slice();
    while (level.length) {
      const add = level.reduce((acc, g) => acc + size(g), 0);
      if (count + add <= budget) {
        const next = [];
        for (const g of level) { collapsed[g] = 0; next.push(...M.gChildren[g]); }
        count += add; level = next; continue;
      }
      if (count >= 12) break;  // a few dozen boxes already make a readable overview
      level.sort((a, b) => M.gFirst[a] - M.gFirst[b]);
      for (const g of level) {
        if (count + size(g) <= budget) { collapsed[g] = 0; count += size(g); }
      }
      break;
    }
    return collapsed;
  }
}

function computeLayout(M, collapsed) {
    var n = M.n, ng = M.ng, T = n + ng;
    var hiddenBy = new Int32Array(ng).fill(-1);
    for (var g = 1; g < ng; g++) {
      var p = M.gParent[g];
      hiddenBy[g] = hiddenBy[p] >= 0 ? hiddenBy[p] : (p > 0 && collapsed[p] ? p : -1);
    }
    var vis = new Uint8Array(T);
    var rep = new Int32Array(n);
    for (var i = 0; i < n; i++) {
      var gi = M.group[i];
      var hb = hiddenBy[gi] >= 0 ? hiddenBy[gi] : (gi > 0 && collapsed[gi] ? gi : -1);
      rep[i] = hb >= 0 ? n + hb : i;
      if (hb < 0) vis[i] = 1;
    }
    for (g = 1; g < ng; g++) if (hiddenBy[g] < 0) vis[n + g] = collapsed[g] ? 1 : 2;
    vis[n] = 2;
    var W = new Float64Array(T), H = new Float64Array(T), X = new Float64Array(T), Y = new Float64Array(T);
    for (i = 0; i < n; i++) if (vis[i]) { W[i] = M.nodeW[i]; H[i] = NODE_H; }
    for (g = 1; g < ng; g++) if (vis[n + g] === 1) { W[n + g] = M.groupW[g]; H[n + g] = 46; }
    function container(item) { return item < n ? M.group[item] : M.gParent[item - n]; }
    // lift every edge to the visible items, then to the children of their lowest common container
    var seen = new Set(), local = new Map(), ve = [];
    var E = M.edges, BIG = T + 1;
    for (var e = 0; e < E.length; e += 2) {
      var a = rep[E[e]], b = rep[E[e + 1]];
      if (a === b) continue;
      var kk = a * BIG + b;
      if (seen.has(kk)) continue;
      seen.add(kk);
      ve.push(a, b);
      var ca = container(a), cb = container(b);
      var la = a, lb = b;
      while (ca !== cb) {
        if (M.gDepth[ca] >= M.gDepth[cb]) { la = n + ca; ca = M.gParent[ca]; }
        else { lb = n + cb; cb = M.gParent[cb]; }
      }
      if (la === lb) continue;
      var lst = local.get(ca);
      if (!lst) { lst = []; local.set(ca, lst); }
      lst.push(la, lb);
    }
    // expanded visible groups, deepest first
    var conts = [];
    for (g = 0; g < ng; g++) if (vis[n + g] === 2) conts.push(g);
    conts.sort(function (p1, p2) { return M.gDepth[p2] - M.gDepth[p1]; });
    var PAD = 14, HEAD = 24;
    var kids = new Array(ng);
    for (var ci = 0; ci < conts.length; ci++) {
      g = conts[ci];
      var items = [];
      var mem = M.gMembers[g];
      for (var q = 0; q < mem.length; q++) items.push(mem[q]);
      var ch = M.gChildren[g];
      for (q = 0; q < ch.length; q++) if (vis[n + ch[q]]) items.push(n + ch[q]);
      var k = items.length, idx = new Map();
      var key = new Float64Array(k), w = new Float64Array(k), h = new Float64Array(k);
      for (q = 0; q < k; q++) {
        var it = items[q];
        idx.set(it, q);
        key[q] = it < n ? it : M.gFirst[it - n];
        w[q] = W[it]; h[q] = H[it];
      }
      var le = local.get(g) || [], ea = [], eb = [];
      for (q = 0; q < le.length; q += 2) {
        var x1 = idx.get(le[q]), x2 = idx.get(le[q + 1]);
        if (x1 !== undefined && x2 !== undefined) { ea.push(x1); eb.push(x2); }
      }
      var res = layered(k, key, w, h, ea, eb, { gapX: 18, gapY: 34 });
      for (q = 0; q < k; q++) { X[items[q]] = res.x[q]; Y[items[q]] = res.y[q]; }
      kids[g] = items;
      if (g === 0) { W[n] = res.width; H[n] = res.height; }
      else { W[n + g] = Math.max(res.width + 2 * PAD, M.groupW[g]); H[n + g] = res.height + 2 * PAD + HEAD; }
    }
    // absolute positions, outermost first
    X[n] = 0; Y[n] = 0;
    for (ci = conts.length - 1; ci >= 0; ci--) {
      g = conts[ci];
      var ox = X[n + g] + (g ? PAD : 0), oy = Y[n + g] + (g ? PAD + HEAD : 0);
      if (g) ox += (W[n + g] - 2 * PAD - (kids[g].length ? contentWidth(kids[g], X, W) : 0)) / 2;
      var its = kids[g];
      for (q = 0; q < its.length; q++) { X[its[q]] += ox; Y[its[q]] += oy; }
    }
    return { vis: vis, rep: rep, X: X, Y: Y, W: W, H: H, edges: ve, width: W[n], height: H[n] };
}

function contentWidth(items, X, W) {
  let mx = 0;
  for (let q = 0; q < items.length; q++) mx = Math.max(mx, X[items[q]] + W[items[q]]);
  return mx;
}
