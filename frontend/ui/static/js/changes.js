// The Changes page (/changes): what changed across the cluster, newest first, from GET
// /api/changes. Filters show as chips, a controller's burst folds into one row, each row opens
// its diff, a chart of the change rate can be brushed to narrow the range, and the live switch
// tails new writes. The URL holds every state of the page.
import { apiGet } from './api.js';
import { authHeaders, needSignIn } from './auth.js';
import { app, el, errorBox, fill } from './dom.js';
import { fmtTime, plural, resourceLabel, str, zoneName } from './format.js';
import { navigate, pageToken } from './nav.js';
import { parseResource } from './search.js';
/** @import { FeedChange } from './types.js' */

/** @type {[key: string, label: string][]} the filters the URL and the form share */
const FILTERS = [['namespace', 'Namespace'], ['resource', 'Resource'], ['name', 'Name'], ['user', 'User'],
  ['userKind', 'Kind of user'], ['verb', 'Verb'], ['outcome', 'Outcome']];

/** @type {[key: string, label: string][]} the ranges back from now */
const SINCE = [['5m', 'Last 5 minutes'], ['15m', 'Last 15 minutes'], ['1h', 'Last hour'], ['6h', 'Last 6 hours'], ['24h', 'Last 24 hours'], ['7d', 'Last 7 days']];

/** BURST_GAP_MS is the longest pause inside a burst of one user's writes of one kind. */
const BURST_GAP_MS = 10_000;

/** LIST_LIMIT is how many changes one listing reads (the chart counts them too). */
const LIST_LIMIT = 1000;

/** @type {AbortController | null} the live tail of the page shown, if any */
let tail = null;

/** stopTail ends the live tail (when the page changes). */
export function stopTail() {
  if (tail) tail.abort();
  tail = null;
}

/**
 * sinceSeconds reads a duration such as 15m, 6h or 7d.
 * @param {string} s
 * @returns {number} seconds; 0 when s is none
 */
function sinceSeconds(s) {
  const m = /^(\d+)(s|m|h|d)$/.exec(s);
  if (!m) return 0;
  return Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86400 }[m[2]];
}

/**
 * apiParams turns the page's URL parameters into GET /api/changes's.
 * @param {URLSearchParams} params
 * @returns {URLSearchParams}
 */
export function apiParams(params) {
  const q = new URLSearchParams();
  for (const [k] of FILTERS) {
    const v = params.get(k);
    if (!v) continue;
    if (k === 'resource') {
      const r = parseResource(v);
      q.set('resource', r.resource);
      if (r.group) q.set('group', r.group);
    } else q.set(k, v);
  }
  if (params.get('cluster')) q.set('cluster', params.get('cluster') || '');
  const from = params.get('from'), to = params.get('to');
  if (from) {
    q.set('since', from);
    if (to) q.set('until', to);
  } else q.set('since', params.get('since') || '15m');
  return q;
}

/**
 * groupBursts folds the writes (newest first) of one controller or node with one verb on one
 * resource in one namespace, each within BURST_GAP_MS of the next of them, into one group, even
 * when other writes come between; a person's writes stay one per row. Groups keep the place of
 * their newest write.
 * @param {FeedChange[]} changes
 * @returns {FeedChange[][]}
 */
export function groupBursts(changes) {
  /** @type {FeedChange[][]} */
  const out = [];
  /** @type {Map<string, FeedChange[]>} the groups still taking writes, by kind of write */
  const open = new Map();
  for (const c of changes) {
    const key = [c.user, c.verb, c.subresource || '', c.object.group, c.object.resource, c.object.namespace].join('\u0000');
    const g = c.userKind === 'person' ? undefined : open.get(key);
    if (g && Date.parse(g[g.length - 1].time) - Date.parse(c.time) <= BURST_GAP_MS) {
      g.push(c);
      continue;
    }
    const ng = [c];
    out.push(ng);
    if (c.userKind !== 'person') open.set(key, ng);
  }
  return out;
}

/** @type {Record<string, string>} past tenses of the verbs */
const PAST = { create: 'created', update: 'updated', patch: 'patched', delete: 'deleted', deletecollection: 'deleted' };

/**
 * shortUser names a user as people say it: a service account by its name, a control-plane
 * component (system:kube-scheduler) without the system: prefix.
 * @param {string} u
 * @returns {string}
 */
function shortUser(u) {
  const m = /^system:serviceaccount:[^:]+:(.+)$/.exec(u);
  if (m) return m[1];
  if (/^system:kube-[a-z-]+$/.test(u)) return u.slice('system:'.length);
  return u;
}

/**
 * groupTitle says what a group did: "replicaset-controller created 25 pods".
 * @param {FeedChange[]} g
 * @returns {string}
 */
export function groupTitle(g) {
  const c = g[0];
  const one = g.every(x => x.object.name === c.object.name);
  const what = one ? `${resourceLabel(c.object)}/${c.object.name}` : `${g.length} ${resourceLabel(c.object)}`;
  const count = (/** @type {string} */ k) => g.filter(x => severity(x) === k).length;
  const failed = count('failed'), conflicts = count('conflict'), gone = count('gone');
  const notes = [];
  if (g.length === 1 && c.outcome === 'failed') notes.push(String(c.code));
  else {
    if (failed) notes.push(`${failed} failed`);
    if (conflicts) notes.push(`${conflicts} retried`);
    if (gone) notes.push(`${gone} already gone`);
  }
  return `${shortUser(c.user)} ${PAST[c.verb] || c.verb} ${what}` + (c.subresource ? ` (${c.subresource})` : '') +
    (one && g.length > 1 ? ` ${g.length} times` : '') + (notes.length ? (g.length === 1 ? ` (${notes[0]})` : `, ${notes.join(', ')}`) : '');
}

/**
 * severity says what a write's outcome means for the reader, as the trace page draws it: a
 * controller's 409 on update or patch is optimistic concurrency, retried at once ("conflict"); a
 * delete answered 404 is of an object already gone ("gone"); any other code of 300 or more is a
 * failure.
 * @param {FeedChange} c
 * @returns {'ok' | 'failed' | 'conflict' | 'gone'}
 */
export function severity(c) {
  if (c.outcome !== 'failed') return 'ok';
  if (c.code === 409 && (c.verb === 'update' || c.verb === 'patch') && c.userKind !== 'person') return 'conflict';
  if (c.code === 404 && (c.verb === 'delete' || c.verb === 'deletecollection')) return 'gone';
  return 'failed';
}

/**
 * showChanges draws the Changes page for the URL's parameters.
 * @param {URLSearchParams} params
 * @param {number} token the page's navigation token
 */
export async function showChanges(params, token) {
  stopTail();
  const root = fill(app(), el('h2', { text: 'What changed' }), form(params), chips(params));
  const body = el('div', { class: 'changes-body' }, el('p', { class: 'note', text: 'Loading…' }));
  root.append(body);
  /** @type {FeedChange[]} */
  let changes = [];
  let more = false;
  try {
    const q = apiParams(params);
    q.set('limit', String(LIST_LIMIT));
    const resp = await apiGet('/api/changes?' + q.toString());
    if (token !== pageToken) return;
    changes = Array.isArray(resp.data) ? resp.data : [];
    more = !!resp.more;
  } catch (e) {
    if (token !== pageToken) return;
    fill(body, errorBox('Listing the changes failed', e));
    return;
  }
  const open = new Set((params.get('open') || '').split(',').filter(Boolean));
  const list = el('div', { class: 'change-list' });
  const draw = () => {
    fill(list, groupBursts(changes).map(g => groupRow(g, open, params)));
  };
  draw();
  fill(body,
    rateChart(changes, params),
    el('p', { class: 'note changes-count', text: changes.length ? `${plural(changes.length, 'change')}${more ? ` (the newest ${LIST_LIMIT}; narrow the filters or the range for the rest)` : ''}, newest first, times in ${zoneName()}` : 'No changes in this range.' }),
    list);
  if (params.get('live') === '1') follow(params, token, c => { changes.unshift(c); draw(); });
}

/**
 * form is the filter form: the filters, the range and the live switch.
 * @param {URLSearchParams} params
 * @returns {HTMLFormElement}
 */
function form(params) {
  const input = (/** @type {string} */ k, /** @type {string} */ label, /** @type {string} */ hint) =>
    el('label', {}, label, el('input', { name: k, value: params.get(k) || '', placeholder: hint }));
  const select = (/** @type {string} */ k, /** @type {string} */ label, /** @type {[string, string][]} */ opts) =>
    el('label', {}, label, el('select', { name: k }, opts.map(([v, t]) => el('option', { value: v, text: t, selected: (params.get(k) || '') === v }))));
  const live = el('input', { type: 'checkbox', name: 'live', checked: params.get('live') === '1', class: 'live-switch' });
  const f = el('form', { class: 'changes-form' },
    input('namespace', 'Namespace', 'all'), input('resource', 'Resource', 'deployments.apps'), input('name', 'Name', ''),
    input('user', 'User', 'alice'),
    select('userKind', 'Kind of user', [['', 'anyone'], ['person', 'a person'], ['controller', 'a controller'], ['node', 'a node']]),
    select('verb', 'Verb', [['', 'any write'], ['create', 'create'], ['update', 'update'], ['patch', 'patch'], ['delete', 'delete'], ['deletecollection', 'deletecollection']]),
    select('outcome', 'Outcome', [['', 'any'], ['ok', 'succeeded'], ['failed', 'failed']]),
    select('since', 'Range', SINCE.concat(params.get('from') ? [['', 'the chart\'s selection']] : [])),
    el('label', { class: 'live' }, live, ' Live'),
    el('button', { type: 'submit', text: 'Show' }));
  const submit = () => {
    const q = new URLSearchParams();
    for (const [k] of FILTERS) {
      const v = /** @type {HTMLInputElement} */ (f.elements.namedItem(k)).value.trim();
      if (v) q.set(k, v);
    }
    const since = /** @type {HTMLSelectElement} */ (f.elements.namedItem('since')).value;
    if (since) q.set('since', since);
    else {
      for (const k of ['from', 'to']) if (params.get(k)) q.set(k, params.get(k) || '');
    }
    if (live.checked) q.set('live', '1');
    navigate('/changes?' + q.toString());
  };
  f.addEventListener('submit', e => { e.preventDefault(); submit(); });
  live.addEventListener('change', submit);
  return f;
}

/**
 * chips lists the active filters; × removes one.
 * @param {URLSearchParams} params
 * @returns {HTMLDivElement}
 */
function chips(params) {
  const active = FILTERS.filter(([k]) => params.get(k));
  if (params.get('from')) active.push(['from', 'From']);
  return el('div', { class: 'chips' }, active.map(([k, label]) => {
    const q = new URLSearchParams(params);
    q.delete(k);
    if (k === 'from') q.delete('to');
    const text = k === 'from' ? `${fmtTime(new Date(params.get('from') || ''))} – ${params.get('to') ? fmtTime(new Date(params.get('to') || '')) : 'now'}` : params.get(k);
    return el('span', { class: 'chip', dataset: { key: k } }, `${label}: ${text}`,
      el('a', { href: '/changes?' + q.toString(), class: 'chip-x', text: '×', title: `Remove the ${label.toLowerCase()} filter`, attrs: { 'data-nav': '' } }));
  }));
}

/**
 * groupRow draws one group of changes: its title, time and, opened, its members (a burst) or
 * its diff (one change).
 * @param {FeedChange[]} g
 * @param {Set<string>} open the opened rows' keys
 * @param {URLSearchParams} params
 * @returns {HTMLElement}
 */
function groupRow(g, open, params) {
  const c = g[0];
  const key = c.spanID;
  const failed = g.some(x => severity(x) === 'failed');
  const details = el('details', { class: 'change' + (failed ? ' failed' : '') + (g.length > 1 ? ' burst' : ''), dataset: { key, kind: c.userKind } });
  details.open = open.has(key);
  const times = g.length > 1 ? `${fmtTime(new Date(g[g.length - 1].time)).slice(11, 23)} – ${fmtTime(new Date(c.time)).slice(11, 23)}` : fmtTime(new Date(c.time)).slice(11, 23);
  details.append(el('summary', {},
    el('span', { class: 'change-time mono', text: times }),
    el('span', { class: 'change-kind ' + c.userKind, text: c.userKind }),
    el('span', { class: 'change-title', text: groupTitle(g) }),
    c.object.namespace ? el('span', { class: 'change-ns', text: c.object.namespace }) : null,
    g.length === 1 && c.paths.length ? el('span', { class: 'change-paths mono', text: c.paths.slice(0, 3).join(', ') + (c.paths.length > 3 ? ` +${c.paths.length - 3}` : '') }) : null));
  let drawn = false;
  const toggle = () => {
    const q = new URLSearchParams(location.search);
    const keys = new Set((q.get('open') || '').split(',').filter(Boolean));
    if (details.open) keys.add(key); else keys.delete(key);
    if (keys.size) q.set('open', [...keys].join(',')); else q.delete('open');
    history.replaceState(null, '', '/changes?' + q.toString());
    if (details.open && !drawn) {
      drawn = true;
      details.append(g.length > 1 ? el('div', { class: 'burst-members' }, g.map(x => groupRow([x], open, params))) : changeBody(c));
    }
  };
  details.addEventListener('toggle', toggle);
  if (details.open) { drawn = true; details.append(g.length > 1 ? el('div', { class: 'burst-members' }, g.map(x => groupRow([x], open, params))) : changeBody(c)); }
  return details;
}

/**
 * changeBody is an opened change: who, the response code, its diff and its links.
 * @param {FeedChange} c
 * @returns {HTMLElement}
 */
function changeBody(c) {
  const diff = el('div', { class: 'change-diff' }, el('p', { class: 'note', text: 'Loading the diff…' }));
  apiGet('/api/stored-traces/' + encodeURIComponent(c.traceID)).then(resp => {
    const tr = resp && Array.isArray(resp.data) ? resp.data[0] : null;
    const sp = tr && Array.isArray(tr.spans) ? tr.spans.find((/** @type {any} */ s) => s && s.spanID === c.spanID) : null;
    /** @type {string[]} */
    const lines = [];
    for (const l of (sp && sp.logs) || []) {
      const f = new Map((l.fields || []).map((/** @type {any} */ kv) => [kv.key, kv.value]));
      if (f.get('event') === 'diff') lines.push(...str(f.get('message')).split('\n').filter(Boolean));
    }
    fill(diff, lines.length ? el('pre', { class: 'mono change-diff-lines', text: lines.join('\n') }) : el('p', { class: 'note', text: 'No field diff recorded for this write.' }));
  }).catch(e => fill(diff, errorBox('Reading the diff failed', e)));
  return el('div', { class: 'change-body' },
    el('dl', {}, [['Time', `${fmtTime(new Date(c.time))} ${zoneName()}`], ['User', c.user + (c.impersonator ? ` (impersonated by ${c.impersonator})` : '')],
      ['User agent', c.userAgent || ''], ['Response code', String(c.code)], ['Title', c.title]]
      .filter(([, v]) => v).map(([k, v]) => [el('dt', { text: k }), el('dd', { text: v })])),
    diff,
    el('p', {}, el('a', { href: c.links.trace, class: 'change-trace', text: 'Open the trace' }), ' · ',
      el('a', { href: c.links.objectAt, class: 'change-at', text: 'The object just after (JSON)' })));
}

/**
 * rateChart draws the changes per time bucket over the range; dragging across it narrows the
 * range to the selection.
 * @param {FeedChange[]} changes
 * @param {URLSearchParams} params
 * @returns {HTMLElement}
 */
function rateChart(changes, params) {
  const now = Date.now();
  const from = params.get('from') ? Date.parse(params.get('from') || '') : now - 1000 * (sinceSeconds(params.get('since') || '15m') || 900);
  const to = params.get('to') ? Date.parse(params.get('to') || '') : (params.get('from') ? now : now);
  const span = Math.max(to - from, 1000);
  const buckets = 60;
  const counts = new Array(buckets).fill(0);
  for (const c of changes) {
    const i = Math.floor((Date.parse(c.time) - from) / span * buckets);
    if (i >= 0 && i < buckets) counts[i]++;
  }
  const peak = Math.max(1, ...counts);
  const chart = el('div', { class: 'rate-chart', title: 'Changes over the range: drag to narrow it' },
    counts.map((n, i) => el('div', { class: 'rate-bar', dataset: { count: String(n), bucket: String(i) }, style: { height: `${Math.round(n / peak * 100)}%` } })),
    el('div', { class: 'rate-brush' }));
  const brush = /** @type {HTMLElement} */ (chart.querySelector('.rate-brush'));
  /** @type {number | null} */
  let start = null;
  const frac = (/** @type {MouseEvent} */ e) => {
    const r = chart.getBoundingClientRect();
    return Math.min(1, Math.max(0, (e.clientX - r.left) / r.width));
  };
  chart.addEventListener('mousedown', e => { start = frac(e); e.preventDefault(); });
  chart.addEventListener('mousemove', e => {
    if (start === null) return;
    const a = Math.min(start, frac(e)), b = Math.max(start, frac(e));
    Object.assign(brush.style, { left: `${a * 100}%`, width: `${(b - a) * 100}%`, display: 'block' });
  });
  chart.addEventListener('mouseup', e => {
    if (start === null) return;
    const a = Math.min(start, frac(e)), b = Math.max(start, frac(e));
    start = null;
    if (b - a < 0.01) { brush.style.display = 'none'; return; }
    const q = new URLSearchParams(params);
    q.delete('since'); q.delete('live');
    q.set('from', new Date(from + a * span).toISOString());
    q.set('to', new Date(from + b * span).toISOString());
    navigate('/changes?' + q.toString());
  });
  return el('div', { class: 'rate' }, chart,
    el('div', { class: 'rate-axis note' }, el('span', { text: fmtTime(new Date(from)).slice(0, 19) }), el('span', { text: `${plural(peak, 'change')} at most per ${Math.round(span / buckets / 1000)}s` }),
      el('span', { text: fmtTime(new Date(to)).slice(0, 19) })));
}

/**
 * follow tails the changes the page's filters select (GET /api/changes?follow=1) and hands each
 * new one to add, until the page changes.
 * @param {URLSearchParams} params
 * @param {number} token
 * @param {(c: FeedChange) => void} add
 */
async function follow(params, token, add) {
  const q = apiParams(params);
  q.set('follow', '1');
  q.set('since', new Date().toISOString());
  q.delete('until');
  const ctl = new AbortController();
  tail = ctl;
  const status = el('p', { class: 'note live-status', text: 'Live: waiting for new changes…' });
  app().querySelector('.changes-count')?.after(status);
  try {
    const resp = await fetch('/api/changes?' + q.toString(), { headers: Object.assign({ Accept: 'text/event-stream' }, authHeaders()), signal: ctl.signal });
    if (resp.status === 401) { needSignIn(); return; }
    if (!resp.ok || !resp.body) throw new Error(`the live tail was refused (HTTP ${resp.status}): ${(await resp.text()).slice(0, 300)}`);
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '', event = '', n = 0;
    for (;;) {
      const { value, done } = await reader.read();
      if (done || token !== pageToken) break;
      buf += value;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.startsWith('event: ')) event = line.slice(7);
        else if (line.startsWith('data: ')) {
          if (event === 'error') { status.textContent = 'Live tail ended: ' + line.slice(6); return; }
          add(JSON.parse(line.slice(6)));
          status.textContent = `Live: ${plural(++n, 'new change')}`;
        }
      }
    }
  } catch (e) {
    if (ctl.signal.aborted || token !== pageToken) return;
    status.textContent = 'Live tail ended: ' + (e && /** @type {Error} */ (e).message ? /** @type {Error} */ (e).message : String(e));
  }
}
