// The critical path (GET /api/critical-path/{id}): the panel above the chart (where the time
// went, the controllers' reaction times, the steps) and the steps outlined on the chart. A merged
// view's path runs over its members as one graph.
import { apiGet } from './api.js';
import { el, fill } from './dom.js';
import { fmtDur, plural, resourceLabel, str } from './format.js';
import { eventOfLog, logTime, objectKey, objectNodeOf } from './model.js';
import { draw, reveal, select } from './timeline.js';
import { view } from './trace.js';
/** @import { ApiResponse, CriticalMarks, CriticalPath, CriticalStep, ObjectRef, TraceNode, TraceView } from './types.js' */

/**
 * stepKey names a critical step's event as a folded log: its object and its time.
 * @param {ObjectRef} o
 * @param {number | string} micros
 * @returns {string}
 */
function stepKey(o, micros) { return `${str(o.cluster)}/${str(o.group)}/${str(o.resource)}/${str(o.namespace)}/${str(o.name)}|${micros}`; }

/**
 * loadCritical fetches the trace's critical path and controller times, highlights the path's
 * events on the chart and fills the panel above it.
 * @param {TraceView} v
 * @returns {Promise<void>}
 */
export async function loadCritical(v) {
  /** @type {ApiResponse<CriticalPath>} */
  let body;
  try {
    body = await apiGet('/api/critical-path/' + encodeURIComponent(v.id));
  } catch (e) {
    if (view !== v) return;
    fill(v.criticalEl, el('summary', { text: 'Critical path: not available' }), el('div', { class: 'note', text: str(e && e.message) }));
    return;
  }
  if (view !== v) return;
  /** @type {Partial<CriticalPath>} */
  const cp = body && body.data && typeof body.data === 'object' ? body.data : {};
  const steps = Array.isArray(cp.steps) ? cp.steps : [];
  /** @type {CriticalMarks} */
  const crit = { spans: new Set(), logs: new Set(), objects: new Set(), steps };
  for (const s of steps) {
    if (!s) continue;
    crit.spans.add(str(s.spanID));
    crit.logs.add(stepKey(s.object || {}, Number(s.timeMicros)));
    crit.objects.add(stepKey(s.object || {}, ''));
  }
  v.critical = crit;
  const secs = x => fmtDur((Number(x) || 0) * 1e6);
  const waits = (Array.isArray(cp.waits) ? cp.waits : []).slice(0, 5);
  const ctrls = Array.isArray(cp.controllers) ? cp.controllers : [];
  const t0 = steps.length ? Number(steps[0].timeMicros) : 0;
  const maxWait = Math.max(0, ...steps.map(s => Number(s.waitSeconds) || 0));
  const list = el('ol', { class: 'critical-steps' }, steps.map(s => {
    const o = s.object || {};
    const a = el('a', { href: '#', text: `${resourceLabel(o)} ${o.namespace ? o.namespace + '/' : ''}${str(o.name)}`,
      onclick: e => { e.preventDefault(); showStep(v, s); } });
    const wait = Number(s.waitSeconds) || 0;
    return el('li', { class: (wait > 0 ? '' : 'nowait') + (s.person ? ' person' : '') },
      el('span', { class: 'at', text: '+' + fmtDur(Number(s.timeMicros) - t0) }),
      el('span', { class: 'wbar', attrs: { 'aria-hidden': 'true' } },
        el('span', { style: { width: `${maxWait > 0 ? Math.max(wait / maxWait * 100, wait > 0 ? 1 : 0) : 0}%` } })),
      el('span', { class: 'wait', text: s.person ? `waiting for a person ${secs(wait)}` : `waited ${secs(wait)}` }),
      el('span', { class: 'who', text: str(s.controller), title: str(s.user) }),
      el('span', { class: 'what', text: `${str(s.verb)}${s.subresource ? ' ' + s.subresource : ''}` }), a,
      el('span', { class: 'rule', text: ruleText(s), title: 'How this step was tied to the one before it' }),
      s.slowPart ? el('span', { class: 'slow-part', text: `inside: ${str(s.slowPart)} ${secs(s.slowPartSeconds)}`, title: 'The slowest part of this request inside the API server, from its own spans' }) : null);
  }));
  const table = (cls, head, rows) => el('table', { class: cls }, el('tr', {}, head.map(h => el('th', { text: h }))),
    rows.map(r => el('tr', {}, r.map(c => el('td', { text: c })))));
  const slow = cp.slowest;
  const slowReq = cp.slowestRequest;
  const person = Number(cp.personWaitSeconds) || 0;
  const unexplained = Number(cp.unexplainedWaitSeconds) || 0;
  fill(v.criticalEl,
    el('summary', { text: cp.noPath ? `No critical path: ${str(cp.noPath)}` : `Critical path: ${plural(steps.length, 'step')} over ${secs(cp.durationSeconds)}` +
      (slow ? ` · slowest reaction: ${str(slow.controller)} ${str(slow.verb)}${slow.subresource ? ' ' + slow.subresource : ''} ${resourceLabel(slow.object || {})} (waited ${secs(slow.waitSeconds)})` : '') +
      (slowReq ? ` · slowest request: ${str(slowReq.controller)} ${str(slowReq.verb)} ${resourceLabel(slowReq.object || {})} took ${secs(slowReq.actSeconds)}, ${str(slowReq.slowPart)}: ${secs(slowReq.slowPartSeconds)}` : '') +
      (person > 0 ? ` · waiting for a person: ${secs(person)}` : '') +
      (unexplained > 0 ? ` · gaps no rule explains: ${secs(unexplained)}` : '') }),
    cp.truncated ? el('div', { class: 'msg', text: str(cp.truncated) }) : null,
    el('div', { class: 'critical-body' },
      el('div', { class: 'critical-col' }, el('h3', { text: 'Where the time went' }),
        table('where', ['Controller', 'Steps', 'Waited', 'Acting'], waits.map(w => [str(w.controller) + (w.person ? ' (a person)' : ''), String(w.steps), secs(w.waitSeconds), secs(w.actSeconds)])),
        el('h3', { text: 'Controller reaction times' }),
        table('reactions', ['Controller', 'Writes', 'Mean wait', 'Max wait', 'Total wait', 'Acting'],
          ctrls.map(c => [str(c.controller), String(c.writes), secs(c.meanWaitSeconds), secs(c.maxWaitSeconds), secs(c.waitSeconds), secs(c.actSeconds)]))),
      el('div', { class: 'critical-col' }, el('h3', { text: 'Steps' }), list)));
  draw(v);
}

/**
 * ruleText says how a step was tied to the one before it.
 * @param {CriticalStep} s
 * @returns {string}
 */
function ruleText(s) {
  switch (str(s.rule)) {
    case 'start': return 'start';
    case 'linked': return 'after a linked object\'s write';
    case 'unexplained': return 'no rule explains it';
    default: return `rule ${str(s.rule)}`;
  }
}

/**
 * showStep selects a critical step's event on the chart: its own row (tree, timeline) or its
 * marker on its object's row (tracing, grouped).
 * @param {TraceView} v
 * @param {CriticalStep} s
 */
function showStep(v, s) {
  const byID = v.model.byId.get(str(s.spanID));
  if (byID && byID.kind === 'event') { select(v, byID, null); reveal(v, byID); return; }
  const want = stepKey(s.object || {}, Number(s.timeMicros));
  for (const n of v.model.nodes) {
    if (n.kind === 'event') continue;
    const obj = objectNodeOf(n);
    if (!obj) continue;
    const i = n.logs.findIndex(l => eventOfLog(l) && stepKey(objectKey(obj), logTime(l, n)) === want);
    if (i >= 0) { select(v, n, i); reveal(v, n); return; }
  }
}

/**
 * onPath tells whether a row's event, or a folded event at ts on an object row, is a step of the
 * critical path.
 * @param {TraceView} v
 * @param {TraceNode} n
 * @param {number} [ts] the folded event's time; not for event rows
 * @returns {boolean}
 */
export function onPath(v, n, ts) {
  const c = v.critical;
  if (!c) return false;
  if (n.kind === 'event') return c.spans.has(n.id);
  const obj = objectNodeOf(n);
  return !!obj && c.logs.has(stepKey(objectKey(obj), ts));
}
