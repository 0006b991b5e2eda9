/* etlens viewer — reading the embedded payload.
 *
 * The payload's keys are declared once, in payload.schema.json (shipped next to this file; Python
 * mirrors it in etlens.views.html.payload_types). Everything the page knows about the data goes
 * through readPayload() and parseDetails(), so a test can prove the viewer reads only declared keys:
 * when the page starts with a Set in window.etlensKeyTrace, both return recording proxies that add
 * every key path they are asked for ("graphs[].nodes.label", "node_details.delegate.ops" ...) to it.
 * Without that Set they return plain objects (no cost). */

/* Parse the <script type="application/json" id="etlens-data"> block. */
export function readPayload(doc) {
  const data = JSON.parse(doc.getElementById('etlens-data').textContent);
  return traced(data, '');
}

/* A node's click-time details: the JSON text its `details` string id points to (see node_details). */
export function parseDetails(text) {
  let d;
  try { d = JSON.parse(text); } catch (err) { return {}; }
  return traced(d, 'node_details');
}

function traced(value, path) {
  const trace = window.etlensKeyTrace;
  return trace instanceof Set ? recorder(value, path, trace) : value;
}

const ARRAY_MEMBERS = new Set(Object.getOwnPropertyNames(Array.prototype));

function recorder(value, path, trace) {
  if (value === null || typeof value !== 'object') return value;
  const isArray = Array.isArray(value);
  return new Proxy(value, {
    get(target, key) {
      const v = target[key];
      if (typeof key === 'symbol') return v;
      if (isArray) {
        if (ARRAY_MEMBERS.has(key)) return v;  // length, map, slice ...: no data key
        return recorder(v, path + '[]', trace);
      }
      const p = path ? path + '.' + key : key;
      trace.add(p);
      return recorder(v, p, trace);
    },
    has(target, key) {
      if (!isArray && typeof key === 'string') trace.add(path ? path + '.' + key : key);
      return key in target;
    },
    ownKeys(target) {
      if (!isArray) trace.add(path ? path + '.*' : '*');
      return Reflect.ownKeys(target);
    }
  });
}
