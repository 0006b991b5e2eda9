/* etlens viewer — the graph model decoded from the columnar payload, plus small DOM helpers.
 * Every string from the model reaches the page through textContent (see ETL.el), never innerHTML. */
'use strict';

var ETL = window.ETL || (window.ETL = {});

ETL.el = function (tag, attrs) {
  var e = document.createElement(tag);
  if (attrs) {
    for (var k in attrs) {
      if (!Object.prototype.hasOwnProperty.call(attrs, k)) continue;
      var v = attrs[k];
      if (k === 'text') e.textContent = v;
      else if (k === 'cls') e.className = v;
      else if (k.slice(0, 2) === 'on') e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
  }
  for (var i = 2; i < arguments.length; i++) {
    var c = arguments[i];
    if (c === null || c === undefined) continue;
    e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
  }
  return e;
};

ETL.CAT_COLORS = {
  placeholder: '#a5d6a7', param: '#dcdcdc', aten_compute: '#90caf9', quantize: '#ffcc80',
  memory: '#d1b3e0', backend: '#f48fb1', delegate: '#ef9a9a', output: '#fff59d'
};
ETL.GROUP_STYLE = {
  1: { fill: 'rgba(120,144,156,0.07)', stroke: '#90a4ae', box: '#e3eaee', name: 'module' },
  2: { fill: 'rgba(255,167,38,0.10)', stroke: '#fb8c00', box: '#ffe0b2', name: 'QDQ cluster' },
  3: { fill: 'rgba(229,57,53,0.07)', stroke: '#e53935', box: '#ffcdd2', name: 'delegate' }
};
ETL.catColor = function (cat) {
  var c = ETL.CAT_COLORS[cat];
  if (c) return c;
  var hsh = 0;
  for (var i = 0; i < cat.length; i++) hsh = (hsh * 31 + cat.charCodeAt(i)) | 0;
  return 'hsl(' + (Math.abs(hsh) % 360) + ',55%,78%)';
};
ETL.KINDS = ['input', 'param', 'op', 'delegate', 'output'];

ETL.trunc = function (s, n) { return s.length > n ? s.slice(0, n - 1) + '\u2026' : s; };

ETL.Model = function (gp, S) {
  var str = function (i) { return i >= 0 ? S[i] : ''; };
  this.S = S; this.str = str; this.gp = gp;
  var n = this.n = gp.id.length;
  this.name = str(gp.name);
  this.edges = Int32Array.from(gp.e);
  this.group = Int32Array.from(gp.group);
  var G = gp.g, ng = this.ng = G.parent.length;
  this.gParent = Int32Array.from(G.parent);
  this.gKind = G.kind; this.gRep = G.rep;
  this.gLabel = G.label.map(str); this.gType = G.type.map(str);
  this.gDepth = new Int32Array(ng);
  for (var g = 1; g < ng; g++) this.gDepth[g] = this.gDepth[this.gParent[g]] + 1;
  this.gMembers = []; this.gChildren = [];
  for (g = 0; g < ng; g++) { this.gMembers.push([]); this.gChildren.push([]); }
  for (g = 1; g < ng; g++) this.gChildren[this.gParent[g]].push(g);
  for (var i = 0; i < n; i++) this.gMembers[this.group[i]].push(i);
  // a group's place in graph order is its first *operator* (its weights are declared up front)
  this.gFirst = new Float64Array(ng).fill(Infinity);
  var firstAny = new Float64Array(ng).fill(Infinity);
  this.gCount = new Int32Array(ng);
  for (i = 0; i < n; i++) {
    g = this.group[i];
    var src = gp.kind[i] <= 1;
    while (g >= 0) {
      if (!src && i < this.gFirst[g]) this.gFirst[g] = i;
      if (i < firstAny[g]) firstAny[g] = i;
      this.gCount[g]++;
      g = g ? this.gParent[g] : -1;
    }
  }
  for (g = 0; g < ng; g++) if (this.gFirst[g] === Infinity) this.gFirst[g] = firstAny[g];
  this.label = new Array(n); this.shape = new Array(n); this.cat = new Array(n);
  this.nodeW = new Float64Array(n); this.nodeH = 38;
  for (i = 0; i < n; i++) {
    var lb = ETL.trunc(str(gp.label[i]), 30), sh = ETL.trunc(str(gp.shape[i]), 34);
    this.label[i] = lb; this.shape[i] = sh; this.cat[i] = str(gp.cat[i]);
    this.nodeW[i] = Math.max(56, Math.max(lb.length * 7.2, sh.length * 6) + 18);
  }
  this.groupW = new Float64Array(ng);
  for (g = 1; g < ng; g++) {
    this.gLabel[g] = ETL.trunc(this.gLabel[g], 40);
    var subtitle = String(this.gCount[g]).length + 18 + Math.min(28, this.gType[g].length);
    this.groupW[g] = Math.max(90, this.gLabel[g].length * 7.6 + 30, subtitle * 6.2 + 16);
  }
  // adjacency for keyboard navigation and the details panel
  var preds = [], succs = [];
  for (i = 0; i < n; i++) { preds.push([]); succs.push([]); }
  for (var e = 0; e < this.edges.length; e += 2) { succs[this.edges[e]].push(this.edges[e + 1]); preds[this.edges[e + 1]].push(this.edges[e]); }
  this.preds = preds; this.succs = succs;
  this.byName = new Map();
  for (i = 0; i < n; i++) this.byName.set(str(gp.id[i]), i);
  this.ov = gp.ov || null;
  this._search = null;
};

ETL.Model.prototype.nodeName = function (i) { return this.str(this.gp.id[i]); };
ETL.Model.prototype.modulePath = function (i) {
  var m = this.gp.mod[i];
  if (m < 0) return [];
  var flat = this.gp.mods[m], out = [];
  for (var q = 0; q < flat.length; q += 2) out.push([this.str(flat[q]), this.str(flat[q + 1])]);
  return out;
};
ETL.Model.prototype.details = function (i) {
  var x = this.gp.x[i];
  if (x < 0) return {};
  try { return JSON.parse(this.S[x]); } catch (err) { return {}; }
};
/* Lower-cased "name target category module" per node, built on first search. */
ETL.Model.prototype.searchText = function () {
  if (this._search) return this._search;
  var out = new Array(this.n);
  for (var i = 0; i < this.n; i++) {
    var mp = this.modulePath(i);
    out[i] = [this.nodeName(i), this.str(this.gp.target[i]), this.cat[i],
      mp.length ? mp[mp.length - 1][0] + ' ' + mp[mp.length - 1][1] : ''].map(function (s) { return s.toLowerCase(); });
  }
  this._search = out;
  return out;
};
/* Nodes matching a query: plain text matches any field; op:, cat:, mod:, name: pick one field. */
ETL.Model.prototype.search = function (query) {
  var q = query.trim().toLowerCase();
  if (!q) return null;
  var field = -1, m = /^(name|op|cat|mod|module|category|target):(.*)$/.exec(q);
  if (m) { field = { name: 0, op: 1, target: 1, cat: 2, category: 2, mod: 3, module: 3 }[m[1]]; q = m[2].trim(); }
  var txt = this.searchText(), out = [];
  for (var i = 0; i < this.n; i++) {
    var t = txt[i];
    if (field >= 0 ? t[field].indexOf(q) >= 0 : (t[0].indexOf(q) >= 0 || t[1].indexOf(q) >= 0 || t[2].indexOf(q) >= 0 || t[3].indexOf(q) >= 0)) out.push(i);
  }
  return out;
};
/* Group ids from the root down to node i's own group. */
ETL.Model.prototype.ancestors = function (i) {
  var out = [], g = this.group[i];
  while (g > 0) { out.push(g); g = this.gParent[g]; }
  return out.reverse();
};
