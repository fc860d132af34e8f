// The trace model: the rows of a Jaeger trace (objects, events, groups, omissions, references),
// its time axis, and the events its rows hold (event spans, or logs folded into object rows).
import { str } from './format.js';
/** @import { EventInfo, JaegerLog, JaegerTrace, KeyValue, ObjectRef, RequestPart, TraceModel, TraceNode } from './types.js' */

const MIN_TIME_US = 1e15;     // 2001-09-09: earlier start times are missing data
const MIN_SCALE_US = 1000;    // the shortest timeline scale, 1 ms

/**
 * tagMap is a span's tags by key (the first of each key).
 * @param {KeyValue[] | undefined} list
 * @returns {Map<string, any>}
 */
function tagMap(list) {
  const m = new Map();
  for (const kv of list || []) { if (kv && typeof kv.key === 'string' && !m.has(kv.key)) m.set(kv.key, kv.value); }
  return m;
}

/**
 * buildModel builds the rows of a trace and its time axis. A node is one drawn row: an object,
 * event, group, omission or reference span.
 * @param {JaegerTrace} tr
 * @returns {TraceModel}
 */
export function buildModel(tr) {
  const procs = tr.processes || {};
  const spans = Array.isArray(tr.spans) ? tr.spans : [];
  /** @type {Map<string, TraceNode>} */
  const byId = new Map();
  /** @type {TraceNode[]} */
  const nodes = [];
  for (const s of spans) {
    if (!s || typeof s.spanID !== 'string' || byId.has(s.spanID)) continue;
    const tags = tagMap(s.tags);
    // A missing, zero or pre-2001 start (Go's zero time is year 1) is unknown, not 1970: such a
    // span would stretch the timeline over decades. It is placed at its parent's start below.
    const start = Number(s.startTime);
    const timed = isFinite(start) && start > MIN_TIME_US;
    /** @type {TraceNode} */
    const n = {
      id: s.spanID, span: s, tags, kind: str(tags.get('kelemetry.span.kind')) || 'object',
      service: str(procs[s.processID] && procs[s.processID].serviceName), op: str(s.operationName),
      start: timed ? start : 0, end: timed ? start + Math.max(Number(s.duration) || 0, 0) : 0, timed,
      logs: Array.isArray(s.logs) ? s.logs : [], children: [], parent: null, depth: 0, ref: null, descendants: 0,
    };
    byId.set(n.id, n);
    nodes.push(n);
  }
  /** @type {TraceNode[]} */
  const roots = [];
  for (const n of nodes) {
    for (const r of n.span.references || []) {
      if (!r) continue;
      if (r.refType === 'CHILD_OF' && !n.parent && byId.has(r.spanID) && r.spanID !== n.id) n.parent = byId.get(r.spanID);
      else if (r.refType === 'FOLLOWS_FROM') n.ref = r.spanID;
    }
  }
  // Guard against cycles in malformed data: a node whose ancestry loops becomes a root.
  for (const n of nodes) {
    const seen = new Set([n]);
    for (let p = n.parent; p; p = p.parent) { if (seen.has(p)) { n.parent = null; break; } seen.add(p); }
    if (n.parent) n.parent.children.push(n); else roots.push(n);
  }
  let t0 = Infinity, t1 = -Infinity;
  const visit = (n, depth) => {
    n.depth = depth;
    if (n.timed) { t0 = Math.min(t0, n.start); t1 = Math.max(t1, n.end); }
    for (const l of n.logs) { const ts = Number(l && l.timestamp); if (ts > MIN_TIME_US) { t0 = Math.min(t0, ts); t1 = Math.max(t1, ts); } }
    n.descendants = 0;
    for (const c of n.children) { visit(c, depth + 1); n.descendants += c.descendants + 1; }
  };
  for (const r of roots) visit(r, 0);
  if (!isFinite(t0)) { t0 = 0; t1 = 0; }
  // Untimed spans sit at their nearest timed ancestor's start (parents are in nodes before
  // children only by chance, so walk up).
  for (const n of nodes) {
    if (n.timed) continue;
    let p = n.parent;
    while (p && !p.timed) p = p.parent;
    n.start = n.end = p ? p.start : t0;
  }
  // Children in the order they began, as Jaeger draws them: a rollout reads top down (the old
  // ReplicaSet above the new one). Ties keep the server's order (resource, name).
  for (const n of nodes) if (n.children.length > 1) sortByStart(n.children);
  sortByStart(roots);
  // The scale spans at least MIN_SCALE_US, so that a zero-length trace (one instant, or
  // nothing timed) gets a readable axis instead of 0, +0µs, +0µs...
  const duration = Math.max(t1 - t0, 0);
  t1 = t0 + Math.max(duration, MIN_SCALE_US);
  let objects = 0, events = 0, omitted = 0;
  for (const n of nodes) {
    if (n.kind === 'object') objects++;
    if (n.kind === 'event') events++;
    if (n.kind === 'omitted') omitted += Number(n.tags.get('kelemetry.omitted')) || 0;
    if (n.kind !== 'event') events += n.logs.filter(l => eventOfLog(l)).length;
  }
  return { traceID: str(tr.traceID), nodes, byId, roots, t0, t1, duration, objects, events, omitted, warnings: tr.warnings || [] };
}

/**
 * sortByStart orders rows by their start, stably.
 * @param {TraceNode[]} list
 */
function sortByStart(list) {
  const at = new Map(list.map((n, i) => [n, i]));
  // "N more objects omitted" stays last among its siblings.
  const last = (/** @type {TraceNode} */ n) => n.kind === 'omitted' ? 1 : 0;
  list.sort((a, b) => (last(a) - last(b)) || (a.start - b.start) || ((at.get(a) || 0) - (at.get(b) || 0)));
}

/**
 * eventOfLog reads a log of an object or group row as a folded event (tracing, grouped): its
 * first field is source=title. Call it only for rows that are not event spans: their logs are
 * raw (event=diff|snapshot|..., message=...).
 * @param {JaegerLog | undefined} l
 * @returns {KeyValue[] | null} the event's fields; null when the log is none
 */
export function eventOfLog(l) {
  const f = l && Array.isArray(l.fields) ? l.fields : [];
  if (!f.length || !f[0] || typeof f[0].key !== 'string') return null;
  return f;
}

/**
 * DIFF_NOTE_OPS are the kelemetry.diff.op values of diff logs that are notes about the diff (no
 * change, none available, more not shown, the request's patch shown instead), not changes.
 */
const DIFF_NOTE_OPS = new Set(['none', 'unavailable', 'truncated', 'request_patch']);

/**
 * normalizeEvent turns a folded log or an event span into one shape for the detail panel.
 * @param {TraceNode} n
 * @param {number | null} [logIndex] the folded log of n; null or undefined: n is an event span
 * @returns {EventInfo}
 */
export function normalizeEvent(n, logIndex) {
  /** @type {EventInfo} */
  const ev = { title: '', source: '', time: 0, end: 0, user: '', userAgent: '', code: '', sourceIP: '', action: '',
    diff: [], verboseDiff: [], diffNotes: [], snapshot: '', errors: [], messages: [], other: [], attrs: [], owner: n, warning: false,
    auditLevel: '', k8s: null, request: [] };
  const k8s = () => ev.k8s || (ev.k8s = { reason: '', count: '', reportingController: '', firstSeen: '', lastSeen: '' });
  let failed = false;
  const addDiff = (into, text) => { for (const line of str(text).split('\n')) if (line.trim()) into.push(line); };
  if (logIndex !== undefined && logIndex !== null) {
    const l = n.logs[logIndex];
    const f = eventOfLog(l) || [];
    ev.time = ev.end = logTime(l, n);
    ev.warning = isWarningEvent(f, f[0] && f[0].key);
    f.forEach((kv, i) => {
      if (!kv) return;
      const k = str(kv.key), v = kv.value;
      if (i === 0) { ev.source = k; ev.title = str(v); return; }
      switch (k) {
        case 'user': ev.user = str(v); break;
        case 'userAgent': ev.userAgent = str(v); break;
        case 'responseCode': ev.code = str(v); break;
        case 'sourceIP': ev.sourceIP = str(v); break;
        case 'action': ev.action = str(v); break;
        case 'auditLevel': ev.auditLevel = str(v); break;
        case 'type': break; // a Kubernetes Event's type: Warning sets ev.warning
        case 'reason': case 'count': case 'reportingController': case 'firstSeen': case 'lastSeen': k8s()[k] = str(v); break;
        case 'diff': addDiff(ev.diff, v); break;
        case 'verbose diff': addDiff(ev.verboseDiff, v); break;
        case 'diff note': addDiff(ev.diffNotes, v); break;
        case 'snapshot': ev.snapshot = str(v); break;
        case 'error': if (v !== true) ev.errors.push(str(v)); else failed = true; break;
        case 'message': ev.messages.push(str(v)); break;
        case 'request': ev.request = parseRequest(v); break;
        default: ev.other.push([k, str(v)]);
      }
    });
    return finishErrors(ev, failed);
  }
  // An event span (tree, timeline).
  ev.title = n.op; ev.source = n.service; ev.time = n.start; ev.end = n.end;
  const t = n.tags;
  ev.user = str(t.get('user.name')); ev.userAgent = str(t.get('user_agent.original'));
  ev.code = str(t.get('http.response.status_code')); ev.sourceIP = str(t.get('client.address'));
  ev.action = str(t.get('kelemetry.event.action'));
  ev.auditLevel = str(t.get('kelemetry.audit.level'));
  if (t.has('kelemetry.event.reason')) {
    Object.assign(k8s(), { reason: str(t.get('kelemetry.event.reason')), count: str(t.get('kelemetry.event.count')),
      reportingController: str(t.get('kelemetry.event.reporting_controller')),
      firstSeen: str(t.get('kelemetry.event.first_timestamp')), lastSeen: str(t.get('kelemetry.event.last_timestamp')) });
  }
  for (const [k, v] of t) if (k !== 'kelemetry.span.kind') ev.attrs.push([k, str(v)]);
  ev.warning = isWarningEvent(n.span.tags, n.service);
  ev.request = requestRows(n);
  failed = t.get('error') === true;
  for (const l of n.logs) {
    const f = tagMap(l && l.fields);
    const type = str(f.get('event')), msg = str(f.get('message'));
    if (type === 'diff' && DIFF_NOTE_OPS.has(str(f.get('kelemetry.diff.op')))) {
      addDiff(ev.diffNotes, msg);
    } else if (type === 'diff') {
      for (const line of msg.split('\n')) {
        if (!line.trim()) continue;
        const path = line.split(' ')[0];
        if (path.startsWith('metadata.managedFields')) continue;
        if (path === 'metadata.resourceVersion' || path === 'metadata.generation') ev.verboseDiff.push(line); else ev.diff.push(line);
      }
    } else if (type === 'snapshot') ev.snapshot = msg;
    else if (type === 'error' || type === 'cause') ev.errors.push(msg);
    else if (type === 'message') ev.messages.push(msg);
    else ev.other.push([type || 'log', msg]);
  }
  return finishErrors(ev, failed);
}

/**
 * finishErrors explains an event's error flag: a Kubernetes Warning Event's message is its
 * error; a failed request without an error text says so.
 * @param {EventInfo} ev
 * @param {boolean} failed
 * @returns {EventInfo}
 */
function finishErrors(ev, failed) {
  if (ev.warning) {
    ev.errors.push(...ev.messages);
    ev.messages = [];
    if (!ev.errors.length) ev.errors.push('Kubernetes Warning Event');
  } else if (failed && !ev.errors.length) {
    ev.errors.push('the request failed');
  }
  return ev;
}

/**
 * logTime is a log's time, or its row's start when the log has none.
 * @param {JaegerLog | undefined} l
 * @param {TraceNode} n
 * @returns {number} Unix microseconds
 */
export function logTime(l, n) {
  const ts = Number(l && l.timestamp);
  return isFinite(ts) && ts > MIN_TIME_US ? ts : n.start;
}

/**
 * objectNodeOf returns the nearest object row at or above n.
 * @param {TraceNode | null} n
 * @returns {TraceNode | null}
 */
export function objectNodeOf(n) {
  for (let p = n; p; p = p.parent) if (p.kind === 'object') return p;
  return null;
}

/**
 * objectKey names a row's object by its tags.
 * @param {TraceNode} n
 * @returns {Required<ObjectRef>}
 */
export function objectKey(n) {
  const t = n.tags;
  return { cluster: str(t.get('cluster')), group: str(t.get('group')), resource: str(t.get('resource')),
    namespace: str(t.get('namespace')), name: str(t.get('name')) };
}

/**
 * isWarningEvent tells a Kubernetes Warning Event: the event package sets the error flag and
 * kelemetry.event.type=Warning (folded logs keep only the flag, under the source "event").
 * @param {KeyValue[] | undefined} fields
 * @param {string | undefined} source
 * @returns {boolean}
 */
function isWarningEvent(fields, source) {
  let err = false;
  for (const kv of fields || []) {
    if (!kv) continue;
    if (kv.key === 'kelemetry.event.type' && kv.value === 'Warning') return true;
    if (kv.key === 'error' && kv.value !== false && kv.value !== 'false') err = true;
  }
  return err && source === 'event';
}

/** WRITE_VERBS are the verbs of the writes an event title can start with (after its user). */
const WRITE_VERBS = new Set(['create', 'update', 'patch', 'delete', 'deletecollection']);

/**
 * markerClass picks a marker colour from the event's title and fields. Red is for what failed for
 * the user: failed requests (error flag, response code >= 400) and Kubernetes Warning Events, but
 * not routine controller behaviour: a 409 Conflict on update or patch from a controller (anything
 * but kubectl) is optimistic concurrency, retried at once ('conflict'); a delete answered 404 is of
 * an object already gone, e.g. removed by the garbage collector or its node agent first
 * ('routine').
 * @param {KeyValue[] | undefined} fields
 * @param {any} title
 * @param {string} source
 * @returns {'error' | 'conflict' | 'routine' | 'create' | 'delete' | 'status' | 'event' | ''}
 */
export function markerClass(fields, title, source) {
  let failed = false, code = 0, agent = '';
  for (const kv of fields || []) {
    if (!kv) continue;
    if (kv.key === 'error' && kv.value !== false && kv.value !== 'false') failed = true;
    if (kv.key === 'responseCode' || kv.key === 'http.response.status_code') code = Number(kv.value) || 0;
    if (kv.key === 'userAgent' || kv.key === 'user_agent.original') agent = str(kv.value);
    if (kv.key === 'kelemetry.event.type' && kv.value === 'Warning') return 'error';
  }
  const name = str(title).trim();
  // The title is "[user ]verb[ subresource][ (Reason)]" (folded logs name the user first).
  const verb = name.split(/[\s(]+/).find(w => WRITE_VERBS.has(w)) || '';
  if (code === 409 && (verb === 'update' || verb === 'patch') && !/^kubectl\b/.test(agent)) return 'conflict';
  if (code === 404 && (verb === 'delete' || verb === 'deletecollection')) return 'routine';
  if (failed || code >= 400 || /\(\w[^)]*\)\s*$/.test(name)) return 'error';
  const t = ' ' + name + ' ';
  if (/ create /.test(t)) return 'create';
  if (/ delete /.test(t)) return 'delete';
  if (/ status /.test(t)) return 'status';
  if (source === 'event') return 'event';
  return '';
}

/** MARKER_LEGEND names each marker colour and outline, for the legend of the trace page. */
export const MARKER_LEGEND = [
  ['create', 'create'],
  ['', 'update, patch'],
  ['status', 'status update'],
  ['delete', 'delete'],
  ['event', 'Kubernetes Event'],
  ['error', 'failed request or Warning Event'],
  ['conflict', 'conflict, retried (409 from a controller)'],
  ['routine', 'delete of an object already gone (404)'],
  ['critical', 'on the critical path'],
];

/**
 * parseRequest reads a folded event's "request" field: its request's parts, or none when the
 * field is not what the API writes.
 * @param {unknown} v
 * @returns {RequestPart[]}
 */
export function parseRequest(v) {
  let list;
  try { list = JSON.parse(str(v)); } catch { return []; }
  if (!Array.isArray(list)) return [];
  return list.filter(p => p && typeof p === 'object').map(p => ({
    name: str(p.name), detail: str(p.detail), start: Number(p.start) || 0, duration: Math.max(Number(p.duration) || 0, 0),
    depth: Math.max(Number(p.depth) || 0, 0), error: p.error === true,
  }));
}

/**
 * requestRows are the request rows under an event row (tree, timeline), depth first, as parts.
 * @param {TraceNode} n
 * @returns {RequestPart[]}
 */
function requestRows(n) {
  /** @type {RequestPart[]} */
  const out = [];
  const visit = (/** @type {TraceNode} */ c, /** @type {number} */ depth) => {
    out.push({ name: c.op, detail: str(c.tags.get('webhook')) || (c.op.endsWith(' etcd3') ? str(c.tags.get('key')) : ''),
      start: c.start, duration: Math.max(c.end - c.start, 0), depth, error: c.tags.get('error') === true });
    for (const k of c.children) if (k.kind === 'request') visit(k, depth + 1);
  };
  for (const c of n.children) if (c.kind === 'request') visit(c, 0);
  return out;
}
