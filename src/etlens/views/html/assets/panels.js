/* etlens viewer — the side panels: node/group details and the legend (category filter, group
 * kinds, overlay scale). Panels render the app state and report clicks through callbacks; every
 * model string is set with textContent. */

import { GROUP_STYLE, KIND_NAMES, catColor, el, fmtNum, groupStyle, scaleColor, trunc } from './dom.js';

export class DetailsPanel {
  /* callbacks: {selectNode(view, i), toggleGroup(view, g)}. */
  constructor(host, state, callbacks) {
    this.host = host;
    this.state = state;
    this.callbacks = callbacks;
  }

  /* Show item `it` (node index, or n + group id, or -1 for the hint) of `view`. */
  show(view, it) {
    const host = this.host, M = view.M;
    host.textContent = '';
    if (it < 0) {
      host.appendChild(el('p', { cls: 'etl-hint', text: 'Click a node or a box. Double-click a box to expand it.' }));
      return;
    }
    if (it >= M.n) this._group(view, it - M.n);
    else this._node(view, it);
  }

  _nodeButton(view, i) {
    const name = view.M.nodeName(i);
    return el('button', { cls: 'etl-link', text: trunc(name, 60), title: name,
      onclick: () => this.callbacks.selectNode(view, i) });
  }

  _group(view, g) {
    const host = this.host, M = view.M, tbl = el('table', { cls: 'etl-kv' });
    host.appendChild(el('h2', { text: M.gLabel[g] }));
    host.appendChild(tbl);
    row(tbl, 'kind', groupStyle(M.gKind[g]).name);
    row(tbl, 'type', M.gType[g]);
    row(tbl, 'nodes', String(M.gCount[g]));
    host.appendChild(el('button', { cls: 'etl-btn', id: 'etl-toggle-group', text: view.isCollapsed(g) ? 'Expand' : 'Collapse',
      onclick: () => this.callbacks.toggleGroup(view, g) }));
    if (M.gRep[g] >= 0) {
      host.appendChild(el('h3', { text: 'Representative node' }));
      host.appendChild(this._nodeButton(view, M.gRep[g]));
    }
    host.appendChild(el('h3', { text: 'Operators inside' }));
    const counts = new Map();
    for (const i of M.descendants(g)) {
      const t = M.target(i) || M.cat[i];
      counts.set(t, (counts.get(t) || 0) + 1);
    }
    host.appendChild(histogram(Array.from(counts.entries()).sort((a, b) => b[1] - a[1])));
  }

  _node(view, i) {
    const host = this.host, M = view.M, x = M.details(i), snap = view.snapshot, scale = this.state.overlay;
    const tbl = el('table', { cls: 'etl-kv' });
    host.appendChild(el('h2', { text: M.fullLabel(i) }));
    host.appendChild(tbl);
    row(tbl, 'name', M.nodeName(i));
    row(tbl, 'kind', KIND_NAMES[M.kind[i]] || '');
    row(tbl, 'op', M.target(i));
    row(tbl, 'category', M.cat[i]);
    row(tbl, 'output', x.outputs ? x.outputs.join('\n') : M.shapeText(i));
    if (snap) row(tbl, 'this pass', snap.statusName(i));
    if (M.overlay && scale) {
      const v = M.overlayValue(i);
      row(tbl, scale.label || 'value', v === null ? 'n/a' : fmtNum(v));
    }
    const dh = M.debugHandles(i);
    if (dh.length) row(tbl, 'debug handles', dh.join(', '));
    const mp = M.modulePath(i);
    if (mp.length) {
      const ul = el('ul', { cls: 'etl-mods' });
      for (const [path, type] of mp) ul.appendChild(el('li', null, el('code', { text: path || '(root)' }), ' ', el('span', { cls: 'etl-dim', text: type })));
      row(tbl, 'module', ul);
    }
    if (M.preds[i].length) row(tbl, 'inputs', el('div', null, ...M.preds[i].map((p) => this._nodeButton(view, p))));
    if (M.succs[i].length) row(tbl, 'users', el('div', null, ...M.succs[i].map((p) => this._nodeButton(view, p))));
    if (x.delegate) this._delegate(x.delegate);
    const lineage = M.lineage(i);
    if (lineage.length) {
      host.appendChild(el('h3', { text: 'Lineage (nearest first)' }));
      const ol = el('ol', { cls: 'etl-lineage' });
      for (const step of lineage) {
        const lt = [step.target, step.pass ? 'by ' + step.pass : ''].filter(Boolean).join(' \u00B7 ');
        ol.appendChild(el('li', null, el('code', { text: step.name }), ' ', el('span', { cls: 'etl-dim', text: lt })));
      }
      host.appendChild(ol);
    }
    const attrs = x.attrs;
    if (attrs && Object.keys(attrs).length) {
      host.appendChild(el('h3', { text: 'Arguments' }));
      const at = el('table', { cls: 'etl-kv' });
      for (const [k, v] of Object.entries(attrs)) row(at, k, trunc(typeof v === 'string' ? v : JSON.stringify(v), 400));
      host.appendChild(at);
    }
    const stk = M.stackTrace(i);
    if (stk) {
      host.appendChild(el('h3', { text: 'Stack trace' }));
      host.appendChild(el('pre', { cls: 'etl-pre', text: stk }));
    }
  }

  _delegate(d) {
    const host = this.host, dt = el('table', { cls: 'etl-kv' });
    host.appendChild(el('h3', { text: 'Delegate' }));
    host.appendChild(dt);
    row(dt, 'backend', d.backend);
    if (d.payload_size !== null && d.payload_size !== undefined) row(dt, 'payload', d.payload_size.toLocaleString() + ' bytes');
    if (d.index !== null && d.index !== undefined) row(dt, 'index', String(d.index));
    if (d.inner_nodes) row(dt, 'inner graph', d.inner_nodes + ' nodes');
    const specs = d.compile_specs || {};
    for (const k of Object.keys(specs)) row(dt, k, String(specs[k]));
    if (d.ops && d.ops.length) {
      host.appendChild(el('h3', { text: 'Ops inside (' + d.ops.length + ')' }));
      const counts = new Map();
      for (const o of d.ops) counts.set(o, (counts.get(o) || 0) + 1);
      host.appendChild(histogram(Array.from(counts.entries()), Infinity));
    }
  }
}

/* The legend: category counts (click to dim a category), group kinds and the overlay scale. */
export class Legend {
  /* callbacks: {toggleCategory(cat) -> hidden?}. */
  constructor(host, models, state, callbacks) {
    const counts = {};
    for (const M of models) for (const c of M.cat) counts[c] = (counts[c] || 0) + 1;
    for (const c of Object.keys(counts).sort()) {
      const item = el('button', { cls: 'etl-legend-item', title: 'show / hide ' + c },
        el('span', { cls: 'etl-swatch' }), el('span', { text: c + ' ' + counts[c] }));
      item.firstChild.style.background = catColor(c);
      item.addEventListener('click', () => item.classList.toggle('etl-off', callbacks.toggleCategory(c)));
      host.appendChild(item);
    }
    const gl = el('div', { cls: 'etl-legend-groups' });
    for (const k of [1, 2, 3]) {
      const sw = el('span', { cls: 'etl-swatch etl-swatch-box' });
      sw.style.background = GROUP_STYLE[k].box; sw.style.borderColor = GROUP_STYLE[k].stroke;
      gl.appendChild(el('span', { cls: 'etl-legend-item' }, sw, el('span', { text: GROUP_STYLE[k].name })));
    }
    host.appendChild(gl);
    const scale = state.overlay;
    if (scale) {
      const box = el('div', { cls: 'etl-overlay-legend' }, el('div', { cls: 'etl-ov-title', text: scale.label || 'value' }));
      const bar = el('canvas', { width: '180', height: '12', cls: 'etl-ov-bar' });
      const bctx = bar.getContext('2d');
      for (let px = 0; px < 180; px++) {
        bctx.fillStyle = scaleColor(scale, scale.min + (scale.max - scale.min) * px / 179);
        bctx.fillRect(px, 0, 1, 12);
      }
      box.appendChild(bar);
      box.appendChild(el('div', { cls: 'etl-ov-scale' }, el('span', { text: fmtNum(scale.min) }),
        el('span', { text: fmtNum((scale.min + scale.max) / 2) }), el('span', { text: fmtNum(scale.max) })));
      host.appendChild(box);
    }
  }
}

function row(tbl, k, v) {
  if (v === null || v === undefined || v === '') return;
  tbl.appendChild(el('tr', null, el('th', { text: k }), el('td', null, typeof v === 'string' ? el('span', { text: v }) : v)));
}

/* [[label, count], ...] as a "count × label" list, first `limit` entries. */
function histogram(entries, limit = 15) {
  const ul = el('ul', { cls: 'etl-hist' });
  for (const [label, count] of entries.slice(0, limit)) ul.appendChild(el('li', { text: count + ' \u00D7 ' + label }));
  if (entries.length > limit) ul.appendChild(el('li', { text: '\u2026 ' + (entries.length - limit) + ' more kinds' }));
  return ul;
}
