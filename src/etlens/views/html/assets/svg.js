/* etlens viewer — export of what a view shows: SVG text (every string XML-escaped) and downloads. */

import { el, groupStyle } from './dom.js';

function xml(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}

/* The part of the graph on screen in `view`, as an SVG document. */
export function toSVG(view) {
  const L = view.L, M = view.M, n = M.n, vp = view.viewport(), snap = view.snapshot;
  const x0 = vp.x, y0 = vp.y, w = vp.w, h = vp.h;
  const inView = (it) => L.X[it] < x0 + w && L.X[it] + L.W[it] > x0 && L.Y[it] < y0 + h && L.Y[it] + L.H[it] > y0;
  const out = ['<svg xmlns="http://www.w3.org/2000/svg" viewBox="' + [x0, y0, w, h].map((v) => v.toFixed(1)).join(' ') +
    '" width="' + Math.round(view.cw) + '" height="' + Math.round(view.ch) + '" font-family="sans-serif">',
  '<rect x="' + x0 + '" y="' + y0 + '" width="' + w + '" height="' + h + '" fill="#fff"/>'];
  for (let g = 1; g < M.ng; g++) {
    const it = n + g;
    if (!L.vis[it] || !inView(it)) continue;
    const st = groupStyle(M.gKind[g]);
    out.push('<rect x="' + L.X[it] + '" y="' + L.Y[it] + '" width="' + L.W[it] + '" height="' + L.H[it] + '" fill="' +
      (L.vis[it] === 1 ? st.box : 'none') + '" stroke="' + st.stroke + '"/>');
    out.push('<text x="' + (L.X[it] + 8) + '" y="' + (L.Y[it] + 18) + '" font-size="12">' + xml(M.gLabel[g]) + '</text>');
  }
  const E = L.edges, present = view.snapshotEdges(), BIG = n + M.ng + 1;
  for (let e = 0; e < E.length; e += 2) {
    const a = E[e], b = E[e + 1];
    if (!inView(a) && !inView(b)) continue;
    if (present && !present.has(a * BIG + b)) continue;
    const ax = L.X[a] + L.W[a] / 2, ay = L.Y[a] + L.H[a], bx = L.X[b] + L.W[b] / 2, by = L.Y[b], dy = Math.max(30, Math.abs(by - ay) / 2);
    out.push('<path d="M' + ax + ' ' + ay + 'C' + ax + ' ' + (ay + dy) + ' ' + bx + ' ' + (by - dy) + ' ' + bx + ' ' + by +
      '" fill="none" stroke="#90a4ae"/>');
  }
  for (let i = 0; i < n; i++) {
    if (L.vis[i] !== 1 || !inView(i) || (snap && !snap.present[i])) continue;
    out.push('<rect x="' + L.X[i] + '" y="' + L.Y[i] + '" width="' + L.W[i] + '" height="' + L.H[i] + '" rx="6" fill="' +
      xml(view.nodeFill(i)) + '" stroke="#555"/>');
    out.push('<text x="' + (L.X[i] + L.W[i] / 2) + '" y="' + (L.Y[i] + 16) + '" font-size="12" text-anchor="middle">' +
      xml(view.nodeLabel(i)) + '</text>');
    if (M.shape[i]) {
      out.push('<text x="' + (L.X[i] + L.W[i] / 2) + '" y="' + (L.Y[i] + 31) + '" font-size="10" text-anchor="middle" fill="#455a64">' +
        xml(M.shape[i]) + '</text>');
    }
  }
  out.push('</svg>');
  return out.join('\n');
}

export function download(name, href) {
  const a = el('a', { href: href, download: name });
  document.body.appendChild(a);
  a.click();
  a.remove();
}
