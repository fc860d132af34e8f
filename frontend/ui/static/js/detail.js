// The detail panel of the trace page: the selected event (its changes, snapshot, errors) or row
// (its events, related objects, own trace and the object at any moment).
import { diffTable } from './diff.js';
import { el, fill } from './dom.js';
import { fmtDur, fmtTime, objectLabel, resourceLabel, str, zoneName } from './format.js';
import { historyPanel, momentLine } from './history.js';
import { jsonTree } from './json-tree.js';
import { eventOfLog, logTime, markerClass, normalizeEvent, objectKey, objectNodeOf } from './model.js';
import { modeName } from './modes.js';
import { draw, reveal, select, updateURL } from './timeline.js';
/** @import { EventInfo, RequestPart, TraceNode, TraceView } from './types.js' */

/**
 * redirectURL opens the own trace of row n's object (GET /redirect, anchored at the row's start,
 * in the view's mode); null when the row names no object.
 * @param {TraceNode} n
 * @param {TraceView} v
 * @returns {string | null}
 */
function redirectURL(n, v) {
  const k = objectKey(n);
  if (!k.resource || !k.name) return null;
  const q = new URLSearchParams();
  for (const [key, val] of Object.entries(k)) if (val) q.set(key, val);
  q.set('time', new Date(Math.floor(n.start / 1000)).toISOString());
  if (v.mode) q.set('mode', modeName(v.mode.display, v.mode.link));
  return '/redirect?' + q.toString();
}

/**
 * renderDetail fills the detail panel with the selection, or hides it.
 * @param {TraceView} v
 */
export function renderDetail(v) {
  const n = v.selected;
  const d = v.detail;
  momentLine(v, null);
  if (!n) { d.hidden = true; fill(d); return; }
  d.hidden = false;
  const close = el('button', { class: 'close', text: 'Close', onclick: () => { v.selected = null; v.selectedLog = null; updateURL(v); renderDetail(v); draw(v); } });
  if (n.kind === 'event' || (v.selectedLog !== null && n.logs[v.selectedLog] && eventOfLog(n.logs[v.selectedLog]))) {
    const ev = normalizeEvent(n, n.kind === 'event' ? null : v.selectedLog);
    fill(d, close, eventDetail(v, ev));
  } else {
    fill(d, close, nodeDetail(v, n));
  }
  d.scrollTop = 0;
}

/** @param {string} code an HTTP status */
function codeClass(code) { const c = Number(code); return c >= 400 ? 'code-bad' : c >= 200 ? 'code-ok' : ''; }

/**
 * @param {TraceView} v
 * @param {EventInfo} ev
 * @returns {HTMLDivElement}
 */
function eventDetail(v, ev) {
  const obj = objectNodeOf(ev.owner);
  const back = obj ? el('a', { href: '#', class: 'back', text: `← ${obj.service} ${obj.op}`,
    onclick: e => { e.preventDefault(); select(v, obj, null); } }) : null;
  const meta = [
    ['Source', ev.source], ['Time', `${fmtTime(ev.time)} ${zoneName()} (+${fmtDur(ev.time - v.model.t0)})`],
    ev.end > ev.time ? ['End', `${fmtTime(ev.end)} ${zoneName()} (took ${fmtDur(ev.end - ev.time)})`] : null,
    ['User', ev.user], ['User agent', ev.userAgent], ['Response code', ev.code, codeClass(ev.code)], ['Source IP', ev.sourceIP],
    ['Action', ev.action], ev.warning ? ['Type', 'Warning', 'code-bad'] : null,
    ev.k8s ? ['Reason', ev.k8s.reason] : null,
    ev.k8s ? ['Count', ev.k8s.count] : null,
    ev.k8s ? ['First seen', ev.k8s.firstSeen] : null,
    ev.k8s ? ['Last seen', ev.k8s.lastSeen] : null,
    ev.k8s ? ['Reported by', ev.k8s.reportingController] : null,
    ['Audit level', ev.auditLevel],
  ].filter(x => x && x[1]);
  const link = obj ? redirectURL(obj, v) : null;
  return el('div', { class: 'event-detail' },
    back,
    el('h3', { class: 'event-title', text: ev.title || '(untitled event)' }),
    el('dl', {}, meta.map(([k, val, cls]) => [el('dt', { text: k }), el('dd', { class: cls || '', text: val })])),
    requestWaterfall(ev.request),
    ev.errors.length ? [el('h3', { text: 'Errors' }), ev.errors.map(t => el('div', { class: 'box error', text: t }))] : null,
    ev.messages.length ? [el('h3', { text: 'Messages' }), ev.messages.map(t => el('div', { class: 'box message', text: t }))] : null,
    el('h3', { text: 'Changes' }),
    ev.diffNotes.map(t => el('div', { class: 'note-inline diff-note', text: t })),
    ev.diff.length ? diffTable(ev.diff) : ev.diffNotes.length ? null : el('div', { class: 'note-inline no-changes', text: noChanges(ev) }),
    ev.verboseDiff.length ? el('details', {}, el('summary', { text: `Bookkeeping changes (${ev.verboseDiff.length})` }), diffTable(ev.verboseDiff)) : null,
    ev.snapshot ? el('details', { class: 'snapshot' }, el('summary', { text: `Snapshot (${ev.snapshot.length} bytes)` }), jsonTree(ev.snapshot)) : null,
    ev.other.length ? [el('h3', { text: 'Other fields' }), kvTable(ev.other)] : null,
    ev.attrs.length ? el('details', {}, el('summary', { text: `All attributes (${ev.attrs.length})` }), kvTable(ev.attrs)) : null,
    link ? el('p', {}, el('a', { href: link, class: 'own-trace', text: `Open the trace of ${objectLabel(objectKey(obj))} (anchored at it)` })) : null);
}

/**
 * partLabel names a part of a request for people: the webhook or etcd call it was, or its name.
 * @param {RequestPart} p
 * @returns {string}
 */
export function partLabel(p) {
  if (p.name === 'Call validating webhook') return `validating webhook ${p.detail || ''}`.trim();
  if (p.name === 'Call mutating webhook') return `mutating webhook ${p.detail || ''}`.trim();
  if (p.name.endsWith(' etcd3')) return `etcd ${p.name.slice(0, -' etcd3'.length)} ${p.detail || ''}`.trim();
  return p.name;
}

/**
 * whole reports a part that counts whole as a part of a request: an admission webhook or etcd
 * call (its HTTP client span belongs to it).
 * @param {RequestPart} p
 * @returns {boolean}
 */
function whole(p) { return p.name === 'Call validating webhook' || p.name === 'Call mutating webhook' || p.name.endsWith(' etcd3'); }

/**
 * slowPartIndex finds the part that held a request longest by itself, as the critical path
 * names it: below the request's entry, each part's duration less its children's, where an
 * admission webhook or etcd call counts whole. -1 without such a part.
 * @param {RequestPart[]} parts depth first
 * @returns {number}
 */
export function slowPartIndex(parts) {
  /** @type {number[]} */
  const parent = [];
  /** @type {number[]} */
  const stack = [];
  parts.forEach((p, i) => {
    while (stack.length > p.depth) stack.pop();
    parent[i] = stack.length ? stack[stack.length - 1] : -1;
    stack.push(i);
  });
  const covered = parts.map(() => 0);
  parts.forEach((p, i) => { const q = parent[i]; if (q >= 0 && !whole(parts[q])) covered[q] += p.duration; });
  const inWhole = (/** @type {number} */ i) => { for (let q = parent[i]; q >= 0; q = parent[q]) if (whole(parts[q])) return true; return false; };
  let best = -1, bestSelf = -Infinity;
  parts.forEach((p, i) => {
    if (p.depth === 0 || inWhole(i)) return;
    const self = whole(p) ? p.duration : p.duration - covered[i];
    if (self > bestSelf) { best = i; bestSelf = self; }
  });
  return best;
}

/**
 * requestWaterfall draws kube-apiserver's own spans of a request (its handler, admission
 * webhooks, etcd calls) as a small waterfall; null without them.
 * @param {RequestPart[]} parts depth first
 * @returns {HTMLElement[] | null}
 */
function requestWaterfall(parts) {
  if (!parts.length) return null;
  const t0 = Math.min(...parts.map(p => p.start));
  const t1 = Math.max(...parts.map(p => p.start + p.duration));
  const span = Math.max(t1 - t0, 1);
  const slow = slowPartIndex(parts);
  return [
    el('h3', { text: 'Inside the API server' }),
    el('div', { class: 'note-inline', text: `kube-apiserver's own spans of this request: ${parts.length}, ${fmtDur(span)} in all.` }),
    el('table', { class: 'waterfall' }, el('tbody', {}, parts.map((p, i) => el('tr', { class: (p.error ? 'error' : '') + (i === slow ? ' slow' : '') },
      el('td', { class: 'wf-name', style: { paddingLeft: `${4 + p.depth * 12}px` }, text: partLabel(p), title: p.detail || p.name }),
      el('td', { class: 'wf-bar' }, el('span', { style: { left: `${(p.start - t0) / span * 100}%`, width: `${Math.max(p.duration / span * 100, 0.5)}%` } })),
      el('td', { class: 'wf-dur mono', text: fmtDur(p.duration) })))))];
}

/**
 * noChanges says why an event shows no field changes.
 * @param {EventInfo} ev
 * @returns {string}
 */
export function noChanges(ev) {
  if (ev.k8s || ev.source === 'event') return 'A Kubernetes Event reports what a component saw or did; it changes no field of the object.';
  if (ev.auditLevel === 'Metadata' && !ev.snapshot) {
    return 'The audit policy records this request at Metadata level: its request and response bodies were not recorded, ' +
      'so its changes are not known from it. Informer diffs fill them in for the resources Kelemetry watches; ' +
      'a higher level in the audit policy (Request or RequestResponse) records them.';
  }
  return ev.snapshot ? 'No field changes recorded for this event; the snapshot below holds the object.' : 'No field changes recorded for this event.';
}

/**
 * @param {[string, string][]} pairs
 * @returns {HTMLTableElement}
 */
function kvTable(pairs) {
  return el('table', { class: 'kv mono' }, el('tbody', {}, pairs.map(([k, val]) => el('tr', {}, el('td', { text: k }), el('td', { text: val })))));
}

/**
 * @param {TraceView} v
 * @param {TraceNode} n a row that is not an event
 * @returns {HTMLDivElement}
 */
function nodeDetail(v, n) {
  /** @type {HTMLElement[]} */
  const parts = [el('h3', { class: 'node-title', text: `${n.service} ${n.op}`.trim() })];
  if (n.kind === 'request') {
    // One of kube-apiserver's own spans of a request, under its event (tree, timeline).
    parts.push(el('dl', {}, [['Part', partLabel({ name: n.op, detail: str(n.tags.get('webhook')) || (n.op.endsWith(' etcd3') ? str(n.tags.get('key')) : ''), start: n.start, duration: n.end - n.start, depth: 0 })],
      ['Start', `${fmtTime(n.start)} ${zoneName()} (+${fmtDur(n.start - v.model.t0)})`], ['Took', fmtDur(n.end - n.start)]]
      .map(([a, b]) => [el('dt', { text: a }), el('dd', { text: b })])));
    const attrs = [...n.tags].filter(([k]) => k !== 'kelemetry.span.kind').map(([k, val]) => /** @type {[string, string]} */ ([k, str(val)]));
    if (attrs.length) parts.push(el('h3', { text: 'Attributes' }), kvTable(attrs));
    const logs = n.logs.map(l => { const f = new Map((l.fields || []).map(kv => [kv.key, kv.value])); return /** @type {[string, string]} */ (['+' + fmtDur(Number(l.timestamp) - n.start), str(f.get('message'))]); });
    if (logs.length) parts.push(el('h3', { text: 'Steps' }), kvTable(logs));
    return el('div', { class: 'node-detail' }, parts);
  }
  if (n.kind === 'omitted') {
    parts.push(el('div', { class: 'box message', text: 'Link following stopped here: a budget (objects per level, objects in total) or the depth limit was reached. Search for these objects directly, or pick a narrower link mode.' }));
    return el('div', {}, parts);
  }
  const k = objectKey(n);
  parts.push(el('dl', {},
    [['Kind', n.kind], ['Cluster', k.cluster], ['Resource', resourceLabel(k)], ['Namespace', k.namespace], ['Name', k.name],
      ['Start', fmtTime(n.start) + ' ' + zoneName()], ['End', fmtTime(n.end) + ' ' + zoneName()], ['UID', str(n.tags.get('kelemetry.object.uid'))],
      ['Link class', str(n.tags.get('kelemetry.link.class'))]]
      .filter(x => x[1]).map(([a, b]) => [el('dt', { text: a }), el('dd', { text: b })])));
  for (const w of n.span.warnings || []) parts.push(el('div', { class: 'box message', text: w }));
  const link = n.kind === 'object' || n.kind === 'reference' ? redirectURL(n, v) : null;
  if (link) parts.push(el('p', {}, el('a', { href: link, class: 'own-trace', text: 'Open this object\'s own trace' })));
  if (n.kind === 'object' && k.resource && k.name) parts.push(historyPanel(v, k));
  const rel = n.children.filter(c => c.kind === 'object');
  if (n.parent && objectNodeOf(n.parent)) rel.unshift(objectNodeOf(n.parent));
  // Events: folded logs, or event child spans.
  const events = [];
  n.logs.forEach((l, i) => { const f = eventOfLog(l); if (f) events.push({ time: logTime(l, n), title: str(f[0].value), fields: f, source: f[0].key, open: () => select(v, n, i) }); });
  for (const c of n.children) if (c.kind === 'event') events.push({ time: c.start, title: c.op, fields: c.span.tags, source: c.service, open: () => { select(v, c, null); reveal(v, c); } });
  parts.push(el('h3', { text: `Events (${events.length})` }));
  if (!events.length) parts.push(el('div', { class: 'note-inline', text: 'No events in this range.' }));
  else {
    const fieldOf = (fs, keys) => { for (const kv of fs || []) if (kv && keys.includes(kv.key)) return str(kv.value); return ''; };
    parts.push(el('table', { class: 'events' }, el('tbody', {}, events.map(e => {
      const code = fieldOf(e.fields, ['responseCode', 'http.response.status_code']);
      const bad = markerClass(e.fields, e.title, e.source) === 'error';
      return el('tr', { class: 'event-row' + (bad ? ' error' : ''), onclick: e.open, tabIndex: 0,
        onkeydown: k => { if (k.key === 'Enter' || k.key === ' ') { k.preventDefault(); e.open(); } } },
        el('td', { class: 't mono', text: '+' + fmtDur(e.time - v.model.t0) }),
        el('td', { class: 'title', text: e.title }),
        el('td', { class: codeClass(code), text: code }));
    }))));
  }
  if (rel.length) {
    parts.push(el('h3', { text: 'Related objects' }));
    parts.push(el('ul', {}, rel.slice(0, 200).map(r => el('li', {}, el('a', { href: '#', text: `${r.service} ${r.op}`, onclick: e => { e.preventDefault(); select(v, r, null); reveal(v, r); } }),
      ' · ', redirectURL(r, v) ? el('a', { href: redirectURL(r, v), text: 'own trace' }) : null))));
  }
  return el('div', { class: 'node-detail' }, parts);
}
