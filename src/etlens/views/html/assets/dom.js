/* etlens viewer — DOM functions and the colour vocabulary shared by every component.
 *
 * Every string that comes from the model reaches the page through textContent (see el), never
 * innerHTML: node names are user data. */

export const CAT_COLORS = {
  placeholder: '#a5d6a7', param: '#dcdcdc', aten_compute: '#90caf9', quantize: '#ffcc80',
  memory: '#d1b3e0', backend: '#f48fb1', delegate: '#ef9a9a', output: '#fff59d'
};

/* Compound-node styles by group kind (1 module, 2 QDQ cluster, 3 delegate subgraph). */
export const GROUP_STYLE = {
  1: { fill: 'rgba(120,144,156,0.07)', stroke: '#90a4ae', box: '#e3eaee', name: 'module' },
  2: { fill: 'rgba(255,167,38,0.10)', stroke: '#fb8c00', box: '#ffe0b2', name: 'QDQ cluster' },
  3: { fill: 'rgba(229,57,53,0.07)', stroke: '#e53935', box: '#ffcdd2', name: 'delegate' }
};

export const KIND_NAMES = ['input', 'param', 'op', 'delegate', 'output'];

/* Create an element: attrs.text -> textContent, attrs.cls -> className, attrs.onX -> listener. */
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'text') e.textContent = v;
    else if (k === 'cls') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
  }
  return e;
}

export function trunc(s, n) { return s.length > n ? s.slice(0, n - 1) + '\u2026' : s; }

export function groupStyle(kind) { return GROUP_STYLE[kind] || GROUP_STYLE[1]; }

export function catColor(cat) {
  const c = CAT_COLORS[cat];
  if (c) return c;
  let hsh = 0;
  for (let i = 0; i < cat.length; i++) hsh = (hsh * 31 + cat.charCodeAt(i)) | 0;
  return 'hsl(' + (Math.abs(hsh) % 360) + ',55%,78%)';
}

export function fmtNum(v) {
  if (v === null || v === undefined) return '';
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(2);
  return (Math.round(v * 1000) / 1000).toString();
}

/* Overlay colour scale: a light blue -> yellow -> red ramp (dark text stays readable) over [min, max]. */
const RAMP = [[116, 173, 209], [171, 217, 233], [224, 243, 248], [254, 224, 144], [253, 174, 97], [244, 109, 67]];

export function scaleColor(scale, v) {
  let t = scale.max > scale.min ? (v - scale.min) / (scale.max - scale.min) : 0.5;
  t = Math.max(0, Math.min(1, t)) * (RAMP.length - 1);
  const i = Math.min(RAMP.length - 2, Math.floor(t)), f = t - i, a = RAMP[i], b = RAMP[i + 1];
  const mix = (q) => Math.round(a[q] + (b[q] - a[q]) * f);
  return 'rgb(' + mix(0) + ',' + mix(1) + ',' + mix(2) + ')';
}
