// Kelemetry web UI: a search page and a trace page over the frontend's HTTP API.
// Plain ES module, no dependencies. Data is only ever put into the page as text.
'use strict';

const ROW_H = 24;          // px, must match --row in app.css
const OVERSCAN = 12;       // rows drawn above and below the visible ones
const MAX_MARKERS = 400;   // markers drawn on one row
const MAX_JSON_ENTRIES = 2000;
const MAX_URL_COLLAPSED = 50;
const MIN_TIME_US = 1e15;     // 2001-09-09: earlier start times are missing data
const MIN_SCALE_US = 1000;    // the shortest timeline scale, 1 ms

const DISPLAYS = ['tracing', 'grouped', 'tree', 'timeline'];
const DISPLAY_DIGIT = { tree: '0', timeline: '1', tracing: '2', grouped: '3' };
const LINKS = [
  { key: 'none', digit: '0', label: 'only found objects' },
  { key: 'full tree', digit: '1', label: 'full tree' },
  { key: 'ancestors', digit: '2', label: 'ancestors' },
  { key: 'descendants', digit: '4', label: 'descendants' },
];
const RANGES = [
  ['15m', 'Last 15 minutes', 15 * 60], ['1h', 'Last hour', 3600], ['6h', 'Last 6 hours', 6 * 3600],
  ['24h', 'Last 24 hours', 86400], ['2d', 'Last 2 days', 2 * 86400], ['7d', 'Last 7 days', 7 * 86400],
  ['30d', 'Last 30 days', 30 * 86400], ['90d', 'Last 90 days', 90 * 86400], ['custom', 'Custom range', 0],
];
const DEFAULTS = { display: 'tracing', link: 'full tree', range: '2d', limit: '20' };

// ---------- small helpers ----------

// el builds an element. props: class, text, title, href, value, type, dataset {...}, attrs {...},
// on<event> handlers; children: nodes, strings, arrays, null.
function el(tag, props, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k === 'dataset') Object.assign(e.dataset, v);
    // Styles go through the CSSOM: the Content-Security-Policy allows no inline style attributes.
    else if (k === 'style') Object.assign(e.style, v);
    else if (k === 'attrs') for (const [a, av] of Object.entries(v)) { if (av !== undefined && av !== null) e.setAttribute(a, av); }
    else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else if (k in e && k !== 'list') {
      try { e[k] = v; } catch (_) { e.setAttribute(k, v); }
    } else e.setAttribute(k, v);
  }
  appendAll(e, children);
  return e;
}

function appendAll(e, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) appendAll(e, c);
    else e.append(c instanceof Node ? c : String(c));
  }
}

// fill replaces e's children; arrays are flattened and null, undefined and false left out.
function fill(e, ...children) {
  e.replaceChildren();
  appendAll(e, children);
  return e;
}

function plural(n, word, many) { return `${n} ${n === 1 ? word : (many || word + 's')}`; }

function pad(n, w) { return String(n).padStart(w || 2, '0'); }

// fmtTime formats Unix microseconds or a Date as UTC "2026-11-29 17:09:30.123".
function fmtTime(t) {
  const d = t instanceof Date ? t : new Date(Math.floor(t / 1000));
  if (isNaN(d.getTime())) return '?';
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ` +
    `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}.${pad(d.getUTCMilliseconds(), 3)}`;
}

// fmtRange formats a search range, to the second.
function fmtRange(a, b) { return `${fmtTime(a).slice(0, 19)} – ${fmtTime(b).slice(0, 19)} UTC`; }

function isoSeconds(d) { return d.toISOString().replace(/\.\d{3}Z$/, 'Z'); }

// fmtDur formats microseconds.
function fmtDur(us) {
  if (!isFinite(us)) return '?';
  const neg = us < 0; us = Math.abs(us);
  let s;
  if (us < 1000) s = `${Math.round(us)}µs`;
  else if (us < 1e6) s = `${+(us / 1000).toFixed(1)}ms`;
  else if (us < 60e6) s = `${+(us / 1e6).toFixed(us < 10e6 ? 3 : 2)}s`;
  else if (us < 3600e6) s = `${Math.floor(us / 60e6)}m${Math.round((us % 60e6) / 1e6)}s`;
  else s = `${Math.floor(us / 3600e6)}h${Math.round((us % 3600e6) / 60e6)}m`;
  return (neg ? '-' : '') + s;
}

function tagMap(list) {
  const m = new Map();
  for (const kv of list || []) { if (kv && typeof kv.key === 'string' && !m.has(kv.key)) m.set(kv.key, kv.value); }
  return m;
}

function str(v) { return v === undefined || v === null ? '' : String(v); }

// apiGet fetches JSON and turns every failure into an Error with a user-facing message and status.
async function apiGet(url) {
  let resp;
  try {
    resp = await fetch(url, { headers: Object.assign({ Accept: 'application/json' }, authHeaders()) });
  } catch (e) {
    const err = new Error(`Could not reach the Kelemetry server (${e && e.message ? e.message : e}). Check that it is running and reachable.`);
    err.status = 0;
    throw err;
  }
  if (resp.status === 401) throw needSignIn();
  let body = null;
  const text = await resp.text();
  try { body = text ? JSON.parse(text) : null; } catch (_) { body = null; }
  if (!resp.ok) {
    let msg = '';
    if (body && Array.isArray(body.errors) && body.errors.length) msg = body.errors.map(e => str(e && e.msg)).join('; ');
    else msg = text.trim().slice(0, 500);
    const err = new Error(msg || resp.statusText || 'no details');
    err.status = resp.status;
    throw err;
  }
  if (body === null) {
    const err = new Error('The server answered with something that is not JSON.');
    err.status = resp.status;
    throw err;
  }
  return body;
}

// ---------- sign-in (the API may require a bearer token) ----------

const TOKEN_KEY = 'kelemetry.token';

// storedToken is the token of this tab's session ('' when none).
function storedToken() {
  try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch (_) { return ''; }
}

// authHeaders sends the session's token with the UI's API calls.
function authHeaders() {
  const tok = storedToken();
  return tok ? { Authorization: `Bearer ${tok}` } : {};
}

// needSignIn answers a 401: a token that was refused is forgotten, the sign-in form shown, and
// the returned error (status 401) ends the caller's work.
function needSignIn() {
  const refused = storedToken() !== '';
  try { sessionStorage.removeItem(TOKEN_KEY); } catch (_) { /* storage disabled */ }
  showSignIn(refused);
  const err = new Error(refused ? 'The token was refused. Sign in again.' : 'Sign in: the Kelemetry API requires a token.');
  err.status = 401;
  return err;
}

// showSignIn shows (once) a small form over the page asking for the API token; the token is
// kept in sessionStorage (this tab only) and the page reloads its data.
function showSignIn(refused) {
  if (document.getElementById('signin')) return;
  const input = el('input', { name: 'token', type: 'password', autocomplete: 'current-password', required: true,
    placeholder: 'API token', style: { width: '100%', boxSizing: 'border-box', margin: '0.5em 0' } });
  const form = el('form', { class: 'signin-form', attrs: { 'aria-label': 'Sign in' },
    style: { background: '#fff', color: '#222', padding: '1.2em 1.5em', borderRadius: '6px', minWidth: '18em', maxWidth: '26em',
      boxShadow: '0 4px 24px rgba(0,0,0,0.3)' } },
  el('h2', { text: 'Sign in', style: { marginTop: '0' } }),
  el('p', { text: refused ? 'The token was refused. Enter a valid API token.' : 'The Kelemetry API requires a token (ask your administrator).' }),
  input,
  el('button', { class: 'primary', type: 'submit', text: 'Sign in' }));
  form.addEventListener('submit', e => {
    e.preventDefault();
    const tok = input.value.trim();
    if (!tok) return;
    try { sessionStorage.setItem(TOKEN_KEY, tok); } catch (_) { /* storage disabled: nothing to keep */ }
    hideSignIn();
    route();
  });
  const overlay = el('div', { id: 'signin', attrs: { role: 'dialog', 'aria-modal': 'true' },
    style: { position: 'fixed', inset: '0', background: 'rgba(0,0,0,0.45)', display: 'flex', alignItems: 'center', justifyContent: 'center', zIndex: '1000' } }, form);
  document.body.append(overlay);
  input.focus();
}

function hideSignIn() {
  const o = document.getElementById('signin');
  if (o) o.remove();
}

// A plain link to /redirect would be followed without the token: with one, resolve the redirect
// with fetch (same origin, so the Authorization header is kept) and open the trace page it names.
document.addEventListener('click', e => {
  const a = e.target instanceof Element ? e.target.closest('a[href^="/redirect"]') : null;
  if (!a || !storedToken() || e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey) return;
  e.preventDefault();
  fetch(a.getAttribute('href'), { headers: authHeaders() }).then(resp => {
    if (resp.status === 401) { needSignIn(); return; }
    const u = new URL(resp.url);
    if (u.origin === location.origin && u.pathname.startsWith('/trace/')) navigate(u.pathname + u.search);
    else location.href = a.href;
  }).catch(() => { location.href = a.href; });
});

function errorBox(title, err, tips) {
  const status = err && typeof err.status === 'number' ? err.status : -1;
  let lead = title;
  if (status >= 500) lead = `${title}: the backend failed (HTTP ${status}).`;
  else if (status >= 400) lead = `${title}: the server rejected the request (HTTP ${status}).`;
  else if (status === 0) lead = `${title}: the server is unreachable.`;
  return el('div', { class: 'msg error', attrs: { role: 'alert' } },
    el('h3', { text: lead }),
    el('div', { class: 'detail-text', text: err && err.message ? err.message : String(err) }),
    tips && tips.length ? el('ul', {}, tips.map(t => el('li', { text: t }))) : null);
}

// ---------- routing ----------

const app = () => document.getElementById('app');
let pageToken = 0; // bumps on every navigation; late answers of old pages are dropped

function navigate(url, replace) {
  if (replace) history.replaceState(null, '', url); else history.pushState(null, '', url);
  route();
}

function route() {
  const token = ++pageToken;
  teardownTrace();
  const path = location.pathname;
  const params = new URLSearchParams(location.search);
  let run;
  try {
    run = path.startsWith('/trace/') ? showTrace(safeDecode(path.slice('/trace/'.length)), params, token)
      : showSearch(params, token);
  } catch (e) {
    run = Promise.reject(e);
  }
  Promise.resolve(run).catch(e => {
    if (token !== pageToken) return;
    fill(app(), errorBox('The page failed', e));
  });
}

// safeDecode undoes percent-encoding, keeping malformed input as it is (showTrace rejects it).
function safeDecode(s) { try { return decodeURIComponent(s); } catch (_) { return s; } }

document.addEventListener('click', e => {
  const a = e.target instanceof Element ? e.target.closest('a[data-nav]') : null;
  if (!a || e.defaultPrevented || e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey || e.altKey) return;
  e.preventDefault();
  navigate(a.getAttribute('href'));
});
window.addEventListener('popstate', route);

// ---------- search page ----------

// parseResource reads "deployments.apps", "apps/deployments" or "pods".
function parseResource(s) {
  s = s.trim();
  if (!s) return { group: '', resource: '' };
  const slash = s.indexOf('/');
  if (slash >= 0) return { group: s.slice(0, slash).trim(), resource: s.slice(slash + 1).trim() };
  const dot = s.indexOf('.');
  if (dot >= 0) return { group: s.slice(dot + 1).trim(), resource: s.slice(0, dot).trim() };
  return { group: '', resource: s };
}

function resourceLabel(o) { return o.group ? `${o.resource}.${o.group}` : str(o.resource); }

// parseTimeInput reads RFC 3339, or a date and time without a zone taken as UTC.
function parseTimeInput(s) {
  s = s.trim();
  if (!s) return null;
  if (/^\d{4}-\d{2}-\d{2}$/.test(s)) s += 'T00:00:00Z';
  else if (/^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(s)) s = s.replace(' ', 'T') + 'Z';
  const d = new Date(s);
  return isNaN(d.getTime()) ? null : d;
}

// searchRange resolves the form's range to dates, or throws with an explanation.
function searchRange(p) {
  const range = p.range;
  if (range === 'custom') {
    const start = parseTimeInput(p.start), end = p.end.trim() ? parseTimeInput(p.end) : new Date();
    if (!p.start.trim()) throw new Error('The custom time range needs a start time, e.g. 2026-11-29T17:00:00Z (UTC).');
    if (!start) throw new Error(`The start time "${p.start}" is not a time. Write it as 2026-11-29T17:00:00Z or 2026-11-29 17:00 (UTC).`);
    if (!end) throw new Error(`The end time "${p.end}" is not a time. Write it as 2026-11-29T18:00:00Z or 2026-11-29 18:00 (UTC).`);
    if (end.getTime() <= start.getTime()) {
      throw new Error(`The time range is empty: the end (${fmtTime(end)}) is not after the start (${fmtTime(start)}).`);
    }
    return { start, end };
  }
  const preset = RANGES.find(r => r[0] === range);
  if (!preset) throw new Error(`Unknown time range "${range}".`);
  const end = new Date();
  return { start: new Date(end.getTime() - preset[2] * 1000), end };
}

function formState(params) {
  const g = (k) => params.get(k) ?? DEFAULTS[k] ?? '';
  return {
    cluster: g('cluster'), resource: g('resource'), namespace: g('namespace'), name: g('name'), attrs: g('attrs'),
    range: g('range'), start: g('start'), end: g('end'), display: g('display'), link: g('link'), limit: g('limit'),
  };
}

function modeName(display, link) { return !link || link === 'none' ? display : `${display} [${link}]`; }

// searchURL builds the API request of a form state.
function searchURL(p, range) {
  const q = new URLSearchParams();
  q.set('service', modeName(p.display, p.link));
  if (p.cluster.trim()) q.set('operation', p.cluster.trim());
  const tags = {};
  const r = parseResource(p.resource);
  if (r.group) tags.group = r.group;
  if (r.resource) tags.resource = r.resource;
  if (p.namespace.trim()) tags.namespace = p.namespace.trim();
  if (p.name.trim()) tags.name = p.name.trim();
  if (Object.keys(tags).length) q.append('tags', JSON.stringify(tags));
  if (p.attrs.trim()) q.append('tags', p.attrs.trim());
  q.set('start', String(range.start.getTime() * 1000));
  q.set('end', String(range.end.getTime() * 1000));
  if (p.limit.trim()) q.set('limit', p.limit.trim());
  return '/api/ui/search?' + q.toString();
}

let suggestionCache = null;

async function loadSuggestions() {
  if (suggestionCache) return suggestionCache;
  try {
    const body = await apiGet('/api/ui/suggestions');
    suggestionCache = body && body.data ? body.data : {};
  } catch (_) {
    suggestionCache = {}; // suggestions are a convenience; the search reports real errors
  }
  return suggestionCache;
}

function datalist(id, values) {
  return el('datalist', { id }, (values || []).map(v => el('option', { value: v })));
}

async function showSearch(params, token) {
  const p = formState(params);
  const searched = params.toString() !== '' && location.pathname === '/search';
  const field = (label, name, extra) => el('label', {}, label,
    el('input', Object.assign({ name, value: p[name], autocomplete: 'off', spellcheck: false }, extra || {})));
  const rangeSel = el('select', { name: 'range' }, RANGES.map(r => el('option', { value: r[0], text: r[1], selected: r[0] === p.range })));
  const customBox = el('div', { class: 'pair custom' }, field('Start (UTC)', 'start', { placeholder: '2026-11-29T17:00:00Z' }),
    field('End (UTC)', 'end', { placeholder: 'now' }));
  customBox.hidden = p.range !== 'custom';
  rangeSel.addEventListener('change', () => { customBox.hidden = rangeSel.value !== 'custom'; });
  const form = el('form', { class: 'filters', attrs: { 'aria-label': 'Search' } },
    el('h2', { text: 'Find objects' }),
    field('Cluster', 'cluster', { list: 'dl-clusters', placeholder: 'any' }),
    field('Resource (resource.group)', 'resource', { list: 'dl-resources', placeholder: 'e.g. deployments.apps, pods' }),
    el('div', { class: 'pair' }, field('Namespace', 'namespace', { list: 'dl-namespaces', placeholder: 'any' }),
      field('Name', 'name', { placeholder: 'any' })),
    field('Event attributes', 'attrs', { placeholder: 'e.g. user=admin verb=patch' }),
    el('label', {}, 'Time range', rangeSel),
    customBox,
    el('div', { class: 'pair' },
      el('label', {}, 'Display', el('select', { name: 'display' }, DISPLAYS.map(d => el('option', { value: d, text: d, selected: d === p.display })))),
      el('label', {}, 'Links', el('select', { name: 'link' }, LINKS.map(l => el('option', { value: l.key, text: l.label, selected: l.key === p.link }))))),
    field('Max. objects found', 'limit', { type: 'number', min: 1, max: 1000 }),
    el('button', { class: 'primary', type: 'submit', text: 'Search' }),
    datalist('dl-clusters', []), datalist('dl-resources', []), datalist('dl-namespaces', []));
  form.addEventListener('submit', e => {
    e.preventDefault();
    const fd = new FormData(form);
    const q = new URLSearchParams();
    for (const k of ['cluster', 'resource', 'namespace', 'name', 'attrs', 'range', 'start', 'end', 'display', 'link', 'limit']) {
      const v = str(fd.get(k)).trim();
      if (v && (k !== 'start' && k !== 'end' || fd.get('range') === 'custom')) q.set(k, v);
    }
    navigate('/search?' + q.toString());
  });
  const results = el('section', { class: 'results', attrs: { 'aria-live': 'polite' } });
  fill(app(), el('div', { class: 'search' }, form, results));

  loadSuggestions().then(s => {
    if (token !== pageToken || !s) return;
    form.querySelector('#dl-clusters').replaceWith(datalist('dl-clusters', s.clusters));
    form.querySelector('#dl-resources').replaceWith(datalist('dl-resources', (s.resources || []).map(resourceLabel)));
    form.querySelector('#dl-namespaces').replaceWith(datalist('dl-namespaces', s.namespaces));
    if (searched) return;
    // The start page lists what is stored: the default range if the newest data is in it,
    // otherwise the stored data's own range (a replayed recording, an idle cluster).
    if (location.pathname === '/' && s.newest && s.oldest) {
      const newest = new Date(s.newest);
      const preset = RANGES.find(r => r[0] === DEFAULTS.range);
      if (preset && newest.getTime() > Date.now() - preset[2] * 1000) navigate('/search?range=' + DEFAULTS.range, true);
      else navigate(storedRangeURL(s, {}), true);
      return;
    }
    fill(results, welcome(s));
  });
  if (!searched) {
    fill(results, el('p', { class: 'note', text: 'Fill in any of the fields and press Search.' }));
    return;
  }
  let range;
  try {
    range = searchRange(p);
  } catch (e) {
    fill(results, el('div', { class: 'msg error bad-range', attrs: { role: 'alert' } },
      el('h3', { text: 'Bad time range' }), el('div', { text: e.message })));
    return;
  }
  fill(results, el('p', { class: 'note', text: 'Searching…' }));
  let body;
  try {
    body = await apiGet(searchURL(p, range));
  } catch (e) {
    if (token !== pageToken) return;
    fill(results, errorBox('The search failed', e,
      e.status >= 500 ? ['Try again in a moment; if it keeps failing, the server log names the cause.'] : []));
    return;
  }
  if (token !== pageToken) return;
  const list = Array.isArray(body.data) ? body.data : [];
  if (list.length === 0) {
    const s = await loadSuggestions();
    if (token !== pageToken) return;
    fill(results, noMatches(p, range, s));
    return;
  }
  fill(results,
    el('h2', { text: `${plural(list.length, 'result')} · ${fmtRange(range.start, range.end)}` }),
    truncationBanner(searchTruncation(body)),
    list.length > 1 ? mergeList(list, p) : list.map(r => resultCard(r, p)));
}

// ---------- ad-hoc merge ----------
// Several results open as one trace on one time axis: its ID is the members' IDs, 32 hex digits
// each, concatenated (the server's merge ID, so the URL is shareable and Jaeger UI takes it too).

const MAX_MERGE = 20;

function full32(id) { return str(id).padStart(32, '0'); }

function isMergeID(id) { return id.length > 32 && id.length % 32 === 0 && id.length <= 32 * MAX_MERGE && /^[0-9a-fA-F]+$/.test(id); }

function mergeMembers(id) {
  const out = [];
  for (let i = 0; i + 32 <= id.length; i += 32) out.push(id.slice(i, i + 32));
  return out;
}

// mergeList draws the results with a check box each and a bar that opens the checked ones as
// one merged view (in the list's order).
function mergeList(list, p) {
  const boxes = [];
  const open = el('button', { class: 'merge-open primary', type: 'button', text: 'Open as one view', disabled: true });
  const count = el('span', { class: 'merge-count', text: 'Check results to open them together on one time axis.' });
  const picked = () => boxes.filter(b => b.checked).map(b => b.dataset.id);
  const update = () => {
    const n = picked().length;
    open.disabled = n < 2 || n > MAX_MERGE;
    count.textContent = n === 0 ? 'Check results to open them together on one time axis.'
      : n > MAX_MERGE ? `${n} selected: at most ${MAX_MERGE} can be merged.`
        : `${plural(n, 'result')} selected${n < 2 ? ': check at least one more' : ''}.`;
  };
  open.addEventListener('click', () => {
    const ids = picked();
    if (ids.length >= 2 && ids.length <= MAX_MERGE) navigate('/trace/' + ids.join(''));
  });
  const items = list.map(r => {
    const box = el('input', { type: 'checkbox', class: 'pick', dataset: { id: full32(r.traceID) },
      attrs: { 'aria-label': `Select ${objectLabel(r.root)} for a merged view` }, onchange: update });
    boxes.push(box);
    return el('div', { class: 'result-item' }, el('label', { class: 'pick-box', title: 'Select for a merged view' }, box), resultCard(r, p));
  });
  return [el('div', { class: 'merge-bar' }, count, open), items];
}

// mergeBar lists the members of a merged view: each opens alone, and with more than two each
// can be left out.
function mergeBar(v) {
  const members = mergeMembers(v.id);
  const root = v.model.roots[0];
  const label = new Map();
  for (const c of root ? root.children : []) {
    const m = c.tags.get('kelemetry.merge.member');
    if (m !== undefined && !label.has(full32(m))) label.set(full32(m), `${c.service} ${c.op}`.trim());
  }
  return el('div', { class: 'merge-members' }, el('span', { class: 'lead', text: 'Merged:' }),
    members.map(m => el('span', { class: 'member' },
      el('a', { href: `/trace/${m}`, dataset: { nav: '' }, text: label.get(m) || m, title: 'Open this trace alone' }),
      members.length > 2 ? el('a', { href: `/trace/${members.filter(x => x !== m).join('')}`, dataset: { nav: '' }, class: 'drop',
        text: '×', title: 'Leave this trace out', attrs: { 'aria-label': 'Leave this trace out' } }) : null)));
}

// ---------- truncation ----------
// A request that ran out of a server budget (spans read, bytes rendered, time) answers with what
// fit and says so: "result truncated: span budget of N reached; narrow the time range".

const TRUNCATED_PREFIX = 'result truncated: ';

function isTruncation(w) { return str(w).startsWith(TRUNCATED_PREFIX); }

// searchTruncation collects the truncation messages of a search answer and its results.
function searchTruncation(body) {
  const msgs = [];
  if (body && body.truncated) msgs.push(body.truncated);
  for (const r of (body && Array.isArray(body.data) ? body.data : [])) if (r && r.truncated) msgs.push(r.truncated);
  return msgs;
}

// truncationBanner is a visible notice of what budgets left out; null when nothing was.
function truncationBanner(msgs) {
  const list = [...new Set((msgs || []).map(str).filter(Boolean))];
  if (!list.length) return null;
  return el('div', {
    class: 'msg truncated', attrs: { role: 'status' },
    style: { borderColor: '#ecd48f', background: 'var(--warn-bg)', color: 'var(--warn)', fontWeight: '600' },
  }, list.map(m => el('div', { text: m })));
}

function welcome(s) {
  const box = el('div', { class: 'msg empty' }, el('h3', { text: 'Search stored traces' }),
    el('div', { text: 'Each result is one object with its related objects (owners, owned objects) and their events, merged over the time range.' }));
  if (s && s.newest) {
    box.append(el('div', {}, `Stored data spans ${fmtTime(new Date(s.oldest))} – ${fmtTime(new Date(s.newest))} UTC. `,
      el('a', { href: storedRangeURL(s, {}), dataset: { nav: '' }, text: 'Show everything in that range' })));
  }
  return box;
}

// storedRangeURL searches the stored data's range (at most 90 days back from its newest).
function storedRangeURL(s, p) {
  const q = new URLSearchParams();
  for (const k of ['cluster', 'resource', 'namespace', 'name', 'attrs', 'display', 'link', 'limit']) if (p[k]) q.set(k, p[k]);
  q.set('range', 'custom');
  q.set('start', isoSeconds(new Date(Math.max(Date.parse(s.oldest), Date.parse(s.newest) - 90 * 86400e3))));
  q.set('end', isoSeconds(new Date(s.newest)));
  return '/search?' + q.toString();
}

function noMatches(p, range, s) {
  const filters = [];
  if (p.cluster) filters.push(`cluster ${p.cluster}`);
  if (p.resource) filters.push(`resource ${p.resource}`);
  if (p.namespace) filters.push(`namespace ${p.namespace}`);
  if (p.name) filters.push(`name ${p.name}`);
  if (p.attrs) filters.push(`event attributes ${p.attrs}`);
  const tips = ['Widen the time range: traces are stored per 30-minute window.',
    'Leave fields empty to match anything; names must match exactly.'];
  if (p.attrs) tips.push('Event attributes must all be on one event, with exact values (user=... matches the user name).');
  const box = el('div', { class: 'msg empty no-results' },
    el('h3', { text: 'No matching objects' }),
    el('div', { text: `Nothing stored matches ${filters.length ? filters.join(', ') : 'the search'} in ${fmtRange(range.start, range.end)}.` }),
    el('ul', {}, tips.map(t => el('li', { text: t }))));
  if (s && s.newest) {
    const oldest = new Date(s.oldest), newest = new Date(s.newest);
    if (newest < range.start || oldest > range.end) {
      box.append(el('div', {}, `The stored data spans ${fmtTime(oldest)} – ${fmtTime(newest)} UTC, outside this range. `,
        el('a', { href: storedRangeURL(s, p), dataset: { nav: '' }, text: 'Search that range' })));
    }
  }
  return box;
}

function objectLabel(o) {
  if (!o || !o.resource) return 'object';
  const ns = o.namespace ? `${o.namespace}/` : '';
  return `${resourceLabel(o)} ${ns}${str(o.name)}`;
}

function resultCard(r, p) {
  const startUs = Date.parse(r.start) * 1000, endUs = Date.parse(r.end) * 1000;
  const facts = [
    el('span', { class: 'badge', text: plural(r.objects || 0, 'object') }),
    el('span', { class: 'badge', text: plural(r.events || 0, 'event') }),
    r.omitted ? el('span', { class: 'badge warn', text: `${r.omitted} more omitted` }) : null,
    el('span', { text: isFinite(startUs) ? `${fmtTime(startUs)} – ${fmtTime(endUs)} UTC (${fmtDur(endUs - startUs)})` : '' }),
    el('span', { text: `cluster${(r.clusters || []).length === 1 ? '' : 's'}: ${(r.clusters || []).join(', ') || '–'}` }),
  ];
  const seed = r.seed && r.root && objectLabel(r.seed) !== objectLabel(r.root) ? el('span', { text: `found: ${objectLabel(r.seed)}` }) : null;
  const more = r.roots > 1 ? ` and ${plural(r.roots - 1, 'other root')}` : '';
  return el('a', { class: 'result', href: `/trace/${encodeURIComponent(r.traceID)}`, dataset: { nav: '' } },
    el('div', { class: 'title', text: objectLabel(r.root) + more }),
    el('div', { class: 'facts' }, facts, seed));
}

// ---------- trace model ----------

// A node is one drawn row: an object, event, group, omission or reference span.
function buildModel(tr) {
  const procs = tr.processes || {};
  const spans = Array.isArray(tr.spans) ? tr.spans : [];
  const byId = new Map();
  const nodes = [];
  for (const s of spans) {
    if (!s || typeof s.spanID !== 'string' || byId.has(s.spanID)) continue;
    const tags = tagMap(s.tags);
    // A missing, zero or pre-2001 start (Go's zero time is year 1) is unknown, not 1970: such a
    // span would stretch the timeline over decades. It is placed at its parent's start below.
    const start = Number(s.startTime);
    const timed = isFinite(start) && start > MIN_TIME_US;
    const n = {
      id: s.spanID, span: s, tags, kind: str(tags.get('kelemetry.span.kind')) || 'object',
      service: str(procs[s.processID] && procs[s.processID].serviceName), op: str(s.operationName),
      start: timed ? start : 0, end: timed ? start + Math.max(Number(s.duration) || 0, 0) : 0, timed,
      logs: Array.isArray(s.logs) ? s.logs : [], children: [], parent: null, depth: 0, ref: null, descendants: 0,
    };
    byId.set(n.id, n);
    nodes.push(n);
  }
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

// eventOfLog reads a log of an object or group row as a folded event (tracing, grouped): its
// first field is source=title. Call it only for rows that are not event spans: their logs are
// raw (event=diff|snapshot|..., message=...).
function eventOfLog(l) {
  const f = l && Array.isArray(l.fields) ? l.fields : [];
  if (!f.length || !f[0] || typeof f[0].key !== 'string') return null;
  return f;
}

// normalize turns a folded log or an event span into one shape for the detail panel.
function normalizeEvent(n, logIndex) {
  const ev = { title: '', source: '', time: 0, end: 0, user: '', userAgent: '', code: '', sourceIP: '', action: '',
    diff: [], verboseDiff: [], snapshot: '', errors: [], messages: [], other: [], attrs: [], owner: n, warning: false };
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
        case 'diff': addDiff(ev.diff, v); break;
        case 'verbose diff': addDiff(ev.verboseDiff, v); break;
        case 'snapshot': ev.snapshot = str(v); break;
        case 'error': if (v !== true) ev.errors.push(str(v)); else failed = true; break;
        case 'message': ev.messages.push(str(v)); break;
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
  for (const [k, v] of t) if (k !== 'kelemetry.span.kind') ev.attrs.push([k, str(v)]);
  ev.warning = isWarningEvent(n.span.tags, n.service);
  failed = t.get('error') === true;
  for (const l of n.logs) {
    const f = tagMap(l && l.fields);
    const type = str(f.get('event')), msg = str(f.get('message'));
    if (type === 'diff') {
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

// finishErrors explains an event's error flag: a Kubernetes Warning Event's message is its
// error; a failed request without an error text says so.
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

// logTime is a log's time, or its row's start when the log has none.
function logTime(l, n) {
  const ts = Number(l && l.timestamp);
  return isFinite(ts) && ts > MIN_TIME_US ? ts : n.start;
}

// objectNodeOf returns the nearest object row at or above n.
function objectNodeOf(n) {
  for (let p = n; p; p = p.parent) if (p.kind === 'object') return p;
  return null;
}

function objectKey(n) {
  const t = n.tags;
  return { cluster: str(t.get('cluster')), group: str(t.get('group')), resource: str(t.get('resource')),
    namespace: str(t.get('namespace')), name: str(t.get('name')) };
}

// isWarningEvent tells a Kubernetes Warning Event: the event package sets the error flag and
// kelemetry.event.type=Warning (folded logs keep only the flag, under the source "event").
function isWarningEvent(fields, source) {
  let err = false;
  for (const kv of fields || []) {
    if (!kv) continue;
    if (kv.key === 'kelemetry.event.type' && kv.value === 'Warning') return true;
    if (kv.key === 'error' && kv.value !== false && kv.value !== 'false') err = true;
  }
  return err && source === 'event';
}

// markerClass picks a marker colour from the event's title and fields: red for failed requests
// (error flag, response code >= 400) and Kubernetes Warning Events.
function markerClass(fields, title, source) {
  for (const kv of fields || []) {
    if (!kv) continue;
    if (kv.key === 'error' && kv.value !== false && kv.value !== 'false') return 'error';
    if ((kv.key === 'responseCode' || kv.key === 'http.response.status_code') && Number(kv.value) >= 400) return 'error';
    if (kv.key === 'kelemetry.event.type' && kv.value === 'Warning') return 'error';
  }
  const t = ' ' + str(title) + ' ';
  if (/\(\w[^)]*\)\s*$/.test(str(title).trim())) return 'error';
  if (/ create /.test(t)) return 'create';
  if (/ delete /.test(t)) return 'delete';
  if (/ status /.test(t)) return 'status';
  if (source === 'event') return 'event';
  return '';
}

// ---------- diff lines ----------

// splitDiff reads "<path> <old> -> <new>".
function splitDiff(line) {
  const sp = line.indexOf(' ');
  if (sp < 0) return { path: line, old: '', new: '' };
  const path = line.slice(0, sp), rest = line.slice(sp + 1);
  let best = -1;
  for (let i = rest.indexOf(' -> '); i >= 0; i = rest.indexOf(' -> ', i + 1)) {
    const left = rest.slice(0, i);
    if (best < 0) best = i;
    // Values are "<none>", bare words, or JSON (strings quoted when they could be misread).
    if (/^["{[]/.test(left) ? isJSON(left) : !/\s/.test(left)) { best = i; break; }
  }
  if (best < 0) return { path, old: rest, new: '' };
  return { path, old: rest.slice(0, best), new: rest.slice(best + 4) };
}

function isJSON(s) { try { JSON.parse(s); return true; } catch (_) { return false; } }

function diffTable(lines) {
  return el('table', { class: 'diff mono' }, el('tbody', {}, lines.map(line => {
    const d = splitDiff(line);
    const cls = (v, base) => base + (v === '<none>' ? ' none' : '');
    return el('tr', { class: 'diff-line' },
      el('td', { class: 'path', text: d.path }),
      el('td', { class: cls(d.old, 'old'), text: d.old }),
      el('td', { class: 'arrow', text: '→' }),
      el('td', { class: cls(d.new, 'new'), text: d.new }));
  })));
}

// ---------- JSON tree ----------

function jsonTree(text) {
  let v;
  try { v = JSON.parse(text); } catch (_) { return el('pre', { class: 'json mono', text }); }
  const budget = { left: MAX_JSON_ENTRIES };
  return el('div', { class: 'json mono' }, jsonNode(v, null, 0, budget));
}

function jsonNode(v, key, depth, budget) {
  const keyEl = key === null ? null : el('span', { class: 'jk', text: (typeof key === 'number' ? key : JSON.stringify(key)) + ': ' });
  if (v === null || typeof v !== 'object') {
    const type = v === null ? 'null' : typeof v;
    return el('div', { class: 'jl' }, keyEl, el('span', { class: type, text: JSON.stringify(v) }));
  }
  const arr = Array.isArray(v);
  const entries = arr ? v.map((x, i) => [i, x]) : Object.entries(v);
  const d = el('details', { open: depth < 2 },
    el('summary', {}, keyEl, arr ? `[${entries.length}]` : `{${entries.length}}`));
  for (const [k, x] of entries) {
    if (budget.left-- <= 0) { d.append(el('div', { class: 'jl null', text: '… cut (too large to show)' })); break; }
    d.append(jsonNode(x, k, depth + 1, budget));
  }
  return d;
}

// ---------- trace page ----------

let view = null; // the live trace view, or null

function teardownTrace() {
  if (view && view.cleanup) view.cleanup();
  view = null;
}

function modeOfID(id) {
  if (id.length !== 32 || !/^ff/i.test(id)) return null;
  const display = Object.keys(DISPLAY_DIGIT).find(k => DISPLAY_DIGIT[k] === id[2]);
  const link = LINKS.find(l => l.digit === id[3]);
  return display && link ? { display, link: link.key } : null;
}

function idWithMode(id, display, link) {
  const l = LINKS.find(x => x.key === link);
  return id.slice(0, 2) + DISPLAY_DIGIT[display] + (l ? l.digit : '0') + id.slice(4);
}

async function showTrace(id, params, token) {
  fill(app(), el('p', { class: 'note', text: 'Loading the trace…' }));
  if (!/^[0-9a-fA-F]{1,32}$/.test(id) && !isMergeID(id)) {
    fill(app(), el('div', { class: 'msg error', attrs: { role: 'alert' } }, el('h3', { text: 'Bad trace ID' }),
      el('div', { text: `"${id}" is not a trace ID: it should be up to 32 hexadecimal digits, as the search results link them, ` +
        `or a merged view: 2 to ${MAX_MERGE} such IDs of 32 digits each, concatenated.` })));
    return;
  }
  let body;
  try {
    body = await apiGet('/api/traces/' + encodeURIComponent(id));
  } catch (e) {
    if (token !== pageToken) return;
    if (e.status === 404) {
      fill(app(), el('div', { class: 'msg empty', attrs: { role: 'alert' } }, el('h3', { text: 'Trace not found' }),
        el('div', { text: `Nothing is stored for trace ${id} any more: its objects may have left the retention period, or the link is wrong.` }),
        el('div', {}, el('a', { href: '/', dataset: { nav: '' }, text: 'Search again' }))));
    } else {
      fill(app(), errorBox('Loading the trace failed', e));
    }
    return;
  }
  if (token !== pageToken) return;
  const tr = body && Array.isArray(body.data) ? body.data[0] : null;
  if (!tr || !Array.isArray(tr.spans) || tr.spans.length === 0) {
    fill(app(), el('div', { class: 'msg empty' }, el('h3', { text: 'Empty trace' }),
      el('div', { text: 'The trace holds no spans.' })));
    return;
  }
  renderTrace(id, buildModel(tr), params);
}

function renderTrace(id, model, params) {
  const mode = modeOfID(id);
  const collapsed = params.get('collapsed') === 'all' ? new Set(collapsible(model).map(n => n.id))
    : new Set((params.get('collapsed') || '').split(',').filter(Boolean));
  const v = {
    id, model, mode, collapsed, visible: [], selected: null, selectedLog: null,
    rowsEl: null, spacer: null, detail: null, frame: 0, cleanup: null, drawn: null, critical: null, criticalEl: null, history: null, gantt: null,
  };
  view = v;

  const switcher = (label, cls, options, current, onChange) => {
    const sel = el('select', { class: cls, disabled: !mode }, options.map(o => el('option', { value: o[0], text: o[1], selected: o[0] === current })));
    sel.addEventListener('change', () => onChange(sel.value));
    return el('label', { title: mode ? '' : 'Only display IDs (as the search returns them) can switch modes' }, label, sel);
  };
  const switchMode = (display, link) => {
    const q = new URLSearchParams();
    if (v.selected && v.selected.kind !== 'event') q.set('span', v.selected.id);
    navigate(`/trace/${idWithMode(id, display, link)}${q.toString() ? '?' + q : ''}`);
  };
  const root = model.roots[0];
  const merged = isMergeID(id);
  const title = merged ? `Merged view of ${plural(mergeMembers(id).length, 'trace')}` : root ? `${root.service} ${root.op}`.trim() : model.traceID;
  const facts = `${plural(model.objects, 'object')} · ${plural(model.events, 'event')}` +
    (model.omitted ? ` · ${model.omitted} omitted` : '') + ` · ${fmtDur(model.duration)}`;
  const bar = el('div', { class: 'tracebar' },
    el('h2', { class: 'trace-title', text: title }),
    el('span', { class: 'facts', text: facts }),
    el('span', { class: 'spacer' }),
    switcher('Display', 'mode-display', DISPLAYS.map(d => [d, d]), mode ? mode.display : 'tracing', d => switchMode(d, mode.link)),
    switcher('Links', 'mode-link', LINKS.map(l => [l.key, l.label]), mode ? mode.link : 'none', l => switchMode(mode.display, l)),
    el('button', { class: 'expand-all', text: 'Expand all', onclick: () => { collapsed.clear(); refresh(v, true); } }),
    el('button', { class: 'collapse-all', text: 'Collapse all', onclick: () => {
      for (const n of collapsible(model)) collapsed.add(n.id);
      refresh(v, true);
    } }));
  const plain = model.warnings.filter(w => !isTruncation(w));
  const warnings = plain.length ? el('div', { class: 'msg' }, plain.map(w => el('div', { text: w }))) : null;

  const axis = el('div', { class: 'axis' }, el('div', { class: 'lbl', text: `From ${fmtTime(model.t0)} UTC`, title: `Rows are objects; the timeline starts at ${fmtTime(model.t0)} UTC` }), axisTicks(model));
  v.spacer = el('div', { class: 'spacer-rows' });
  v.rowsEl = el('div', { class: 'rows', attrs: { role: 'tree' } }, v.spacer);
  v.detail = el('aside', { class: 'detail' });
  v.detail.hidden = true;
  v.gantt = el('div', { class: 'gantt' }, axis, v.rowsEl);
  // A merged view's critical path runs over its members as one graph: a step of a member that
  // follows nothing linked is "unexplained".
  v.criticalEl = el('details', { class: 'critical' }, el('summary', { text: 'Critical path: loading…' }));
  fill(app(), bar, merged ? mergeBar(v) : null, truncationBanner(model.warnings.filter(isTruncation)), warnings, v.criticalEl,
    el('div', { class: 'tracebody' }, v.gantt, v.detail));
  loadCritical(v);

  const onScroll = () => schedule(v);
  v.rowsEl.addEventListener('scroll', onScroll, { passive: true });
  window.addEventListener('resize', onScroll);
  v.cleanup = () => { window.removeEventListener('resize', onScroll); cancelAnimationFrame(v.frame); };
  v.rowsEl.addEventListener('click', e => onRowsClick(v, e));
  v.rowsEl.addEventListener('keydown', e => onRowsKey(v, e));

  computeVisible(v);
  const span = params.get('span');
  const evParam = params.get('event');
  const target = span ? model.byId.get(span) : null;
  if (target) {
    const logIndex = evParam !== null && evParam !== '' && isFinite(Number(evParam)) ? Number(evParam) : null;
    select(v, target, logIndex, true);
    reveal(v, target);
  } else {
    draw(v);
  }
}

// stepKey names a critical step's event as a folded log: its object and its time.
function stepKey(o, micros) { return `${str(o.cluster)}/${str(o.group)}/${str(o.resource)}/${str(o.namespace)}/${str(o.name)}|${micros}`; }

// loadCritical fetches the trace's critical path and controller times, highlights the path's
// events on the chart and fills the panel above it.
async function loadCritical(v) {
  let body;
  try {
    body = await apiGet('/api/critical-path/' + encodeURIComponent(v.id));
  } catch (e) {
    if (view !== v) return;
    fill(v.criticalEl, el('summary', { text: 'Critical path: not available' }), el('div', { class: 'note', text: str(e && e.message) }));
    return;
  }
  if (view !== v) return;
  const cp = body && body.data && typeof body.data === 'object' ? body.data : {};
  const steps = Array.isArray(cp.steps) ? cp.steps : [];
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
  const list = el('ol', { class: 'critical-steps' }, steps.map(s => {
    const o = s.object || {};
    const a = el('a', { href: '#', text: `${resourceLabel(o)} ${o.namespace ? o.namespace + '/' : ''}${str(o.name)}`,
      onclick: e => { e.preventDefault(); showStep(v, s); } });
    return el('li', { class: Number(s.waitSeconds) > 0 ? '' : 'nowait' },
      el('span', { class: 'at', text: '+' + fmtDur(Number(s.timeMicros) - t0) }),
      el('span', { class: 'wait', text: `waited ${secs(s.waitSeconds)}`, title: `rule: ${str(s.rule)}` }),
      el('span', { class: 'who', text: str(s.controller), title: str(s.user) }),
      el('span', { class: 'what', text: `${str(s.verb)}${s.subresource ? ' ' + s.subresource : ''}` }), a);
  }));
  const table = (cls, head, rows) => el('table', { class: cls }, el('tr', {}, head.map(h => el('th', { text: h }))),
    rows.map(r => el('tr', {}, r.map(c => el('td', { text: c })))));
  const top = waits.length ? waits[0] : null;
  fill(v.criticalEl,
    el('summary', { text: `Critical path: ${plural(steps.length, 'step')} over ${secs(cp.durationSeconds)}` +
      (top ? ` · longest wait: ${str(top.controller)} (${secs(top.waitSeconds)})` : '') }),
    cp.truncated ? el('div', { class: 'msg', text: str(cp.truncated) }) : null,
    el('div', { class: 'critical-body' },
      el('div', { class: 'critical-col' }, el('h3', { text: 'Where the time went' }),
        table('where', ['Controller', 'Steps', 'Waited', 'Acting'], waits.map(w => [str(w.controller), String(w.steps), secs(w.waitSeconds), secs(w.actSeconds)])),
        el('h3', { text: 'Controller reaction times' }),
        table('reactions', ['Controller', 'Writes', 'Mean wait', 'Max wait', 'Total wait', 'Acting'],
          ctrls.map(c => [str(c.controller), String(c.writes), secs(c.meanWaitSeconds), secs(c.maxWaitSeconds), secs(c.waitSeconds), secs(c.actSeconds)]))),
      el('div', { class: 'critical-col' }, el('h3', { text: 'Steps' }), list)));
  draw(v);
}

// showStep selects a critical step's event on the chart: its own row (tree, timeline) or its
// marker on its object's row (tracing, grouped).
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

// onPath tells whether a row's event, or a folded event at ts on an object row, is a step of the
// critical path.
function onPath(v, n, ts) {
  const c = v.critical;
  if (!c) return false;
  if (n.kind === 'event') return c.spans.has(n.id);
  const obj = objectNodeOf(n);
  return !!obj && c.logs.has(stepKey(objectKey(obj), ts));
}

function axisTicks(model) {
  const tl = el('div', { class: 'tl' });
  const n = 5;
  for (let i = 0; i <= n; i++) {
    const f = i / n;
    tl.append(el('span', { class: 'tick' + (i === 0 ? ' first' : i === n ? ' last' : ''), style: { left: `${f * 100}%` },
      text: i === 0 ? '0' : '+' + fmtDur((model.t1 - model.t0) * f) }));
  }
  return tl;
}

// collapsible lists the rows "Collapse all" folds: all with children but the roots.
function collapsible(model) { return model.nodes.filter(n => n.children.length && n.parent); }

function computeVisible(v) {
  const out = [];
  const walk = (n) => {
    out.push(n);
    if (v.collapsed.has(n.id)) return;
    for (const c of n.children) walk(c);
  };
  for (const r of v.model.roots) walk(r);
  v.visible = out;
  v.spacer.style.height = `${out.length * ROW_H}px`;
}

// refresh recomputes the rows after a collapse change and records it in the URL.
function refresh(v, recordURL) {
  computeVisible(v);
  if (recordURL) updateURL(v);
  draw(v);
}

function updateURL(v) {
  const q = new URLSearchParams();
  if (v.selected) q.set('span', v.selected.id);
  if (v.selected && v.selectedLog !== null) q.set('event', String(v.selectedLog));
  if (v.collapsed.size && v.collapsed.size <= MAX_URL_COLLAPSED) q.set('collapsed', [...v.collapsed].join(','));
  else if (v.collapsed.size) {
    // Too many to list: "Collapse all" is still shareable; other large sets are left out.
    const all = collapsible(v.model);
    if (all.length === v.collapsed.size && all.every(n => v.collapsed.has(n.id))) q.set('collapsed', 'all');
  }
  const url = `/trace/${v.id}${q.toString() ? '?' + q : ''}`;
  if (url !== location.pathname + location.search) history.replaceState(null, '', url);
}

function schedule(v) {
  if (v.frame) return;
  v.frame = requestAnimationFrame(() => { v.frame = 0; draw(v, true); });
}

// draw renders only the rows in and near the viewport. With reuse (scrolling) the rows drawn
// before are kept and only those that came into view are built, so a scroll frame costs the
// new rows, not the whole viewport of rows and their markers; otherwise (the selection or the
// collapsed rows changed) all are rebuilt. Rows stay in index order (the Tab order), and the
// keyboard focus survives a rebuild.
function draw(v, reuse) {
  if (view !== v) return;
  const height = v.rowsEl.clientHeight || 600;
  const first = Math.max(0, Math.floor(v.rowsEl.scrollTop / ROW_H) - OVERSCAN);
  const last = Math.min(v.visible.length, Math.ceil((v.rowsEl.scrollTop + height) / ROW_H) + OVERSCAN);
  const focus = reuse ? null : focusOf(v);
  const old = reuse && v.drawn ? v.drawn : new Map();
  if (!reuse) v.spacer.replaceChildren();
  const drawn = new Map();
  for (const [i, d] of old) {
    if (i >= first && i < last && v.visible[i] === d.node) drawn.set(i, d); else d.el.remove();
  }
  let prev = null;
  for (let i = first; i < last; i++) {
    const kept = drawn.get(i);
    if (kept) { prev = kept.el; continue; }
    const e = rowEl(v, v.visible[i], i);
    if (prev) prev.after(e); else v.spacer.prepend(e);
    drawn.set(i, { node: v.visible[i], el: e });
    prev = e;
  }
  v.drawn = drawn;
  if (focus) restoreFocus(v, focus);
}

// focusOf names the focused part of a row (the row, its toggle or a marker), or null.
function focusOf(v) {
  const a = document.activeElement;
  if (!(a instanceof Element) || !v.spacer.contains(a)) return null;
  const row = a.closest('.row');
  if (!row) return null;
  let part = null;
  if (a.classList.contains('toggle')) part = '.toggle';
  else if (a.classList.contains('mk')) part = `.mk[data-log="${a.dataset.log}"]`;
  return { id: row.dataset.id, part };
}

function restoreFocus(v, f) {
  for (const { node, el: row } of v.drawn.values()) {
    if (node.id !== f.id) continue;
    const target = (f.part && row.querySelector(f.part)) || row;
    target.focus({ preventScroll: true });
    return;
  }
}

// focusRow moves the keyboard focus to visible row i, scrolling it into view.
function focusRow(v, i) {
  if (i < 0 || i >= v.visible.length) return;
  const top = i * ROW_H, h = v.rowsEl.clientHeight || 600;
  if (top < v.rowsEl.scrollTop) v.rowsEl.scrollTop = top;
  else if (top + ROW_H > v.rowsEl.scrollTop + h) v.rowsEl.scrollTop = top + ROW_H - h;
  draw(v, true);
  const d = v.drawn.get(i);
  if (d) d.el.focus({ preventScroll: true });
}

// onRowsKey: a focused row opens with Enter or Space, arrows move between rows, and
// right/left expand and collapse. The toggle and markers are buttons: Enter clicks them.
function onRowsKey(v, e) {
  const t = e.target instanceof Element ? e.target : null;
  if (!t || !t.classList.contains('row') || e.altKey || e.ctrlKey || e.metaKey) return;
  const n = v.model.byId.get(t.dataset.id);
  if (!n) return;
  const i = Number(t.dataset.index);
  switch (e.key) {
    case 'Enter': case ' ':
      e.preventDefault(); activate(v, n); return;
    case 'ArrowDown': case 'ArrowUp':
      e.preventDefault(); focusRow(v, i + (e.key === 'ArrowDown' ? 1 : -1)); return;
    case 'ArrowRight': case 'ArrowLeft':
      if (n.children.length && v.collapsed.has(n.id) === (e.key === 'ArrowRight')) { e.preventDefault(); toggleRow(v, n); }
      return;
    case 'Home': case 'End':
      e.preventDefault(); focusRow(v, e.key === 'Home' ? 0 : v.visible.length - 1); return;
  }
}

function pct(v, t) { return ((t - v.model.t0) / (v.model.t1 - v.model.t0)) * 100; }

function rowEl(v, n, i) {
  const hasKids = n.children.length > 0;
  const isCollapsed = v.collapsed.has(n.id);
  const label = el('div', { class: 'lbl', style: { paddingLeft: `${4 + n.depth * 14}px` } },
    hasKids ? el('button', { class: 'toggle', text: isCollapsed ? '▶' : '▼', title: isCollapsed ? 'Expand' : 'Collapse',
      attrs: { 'aria-label': isCollapsed ? 'Expand' : 'Collapse' } }) : el('span', { class: 'toggle' }),
    n.service && n.kind !== 'omitted' ? el('span', { class: 'svc', text: n.service }) : null,
    el('span', { class: 'op', text: n.op }),
    hasKids && isCollapsed ? el('span', { class: 'count', text: `(${n.descendants})` }) : null);
  const tl = el('div', { class: 'tl' });
  const left = pct(v, n.start), width = Math.max(pct(v, n.end) - left, 0);
  tl.append(el('div', { class: 'bar', style: { left: `${left}%`, width: `${width}%` } }));
  let pathHere = false;
  if (n.kind === 'event') {
    pathHere = onPath(v, n);
    tl.append(el('button', { class: `mk ${markerClass(n.span.tags, n.op, n.service)}${v.selected === n ? ' selected' : ''}${pathHere ? ' critical' : ''}`,
      title: `${fmtTime(n.start)} ${n.op}`, dataset: { log: '' }, style: { left: `${left}%` } }));
  } else {
    let drawn = 0;
    n.logs.forEach((l, li) => {
      const f = eventOfLog(l);
      if (!f || drawn++ >= MAX_MARKERS) return;
      const ts = logTime(l, n);
      const crit = onPath(v, n, ts);
      pathHere = pathHere || crit;
      tl.append(el('button', {
        class: `mk ${markerClass(f, f[0].value, f[0].key)}${v.selected === n && v.selectedLog === li ? ' selected' : ''}${crit ? ' critical' : ''}`,
        title: `${fmtTime(ts)} ${str(f[0].value)}`, dataset: { log: String(li) }, style: { left: `${pct(v, ts)}%` },
      }));
    });
  }
  const bad = n.kind === 'event' && markerClass(n.span.tags, n.op, n.service) === 'error';
  return el('div', {
    class: `row kind-${n.kind}${v.selected === n ? ' selected' : ''}${bad ? ' error' : ''}${pathHere ? ' on-path' : ''}`, dataset: { id: n.id, index: String(i) },
    tabIndex: 0, title: `${n.service} ${n.op}`.trim(),
    style: { top: `${i * ROW_H}px` }, attrs: { role: 'treeitem', 'aria-level': String(n.depth + 1),
      'aria-selected': String(v.selected === n), 'aria-expanded': hasKids ? String(!isCollapsed) : null },
  }, label, tl);
}

function onRowsClick(v, e) {
  const target = e.target instanceof Element ? e.target : null;
  const row = target && target.closest('.row');
  if (!row) return;
  const n = v.model.byId.get(row.dataset.id);
  if (!n) return;
  if (target.closest('.toggle') && n.children.length) {
    toggleRow(v, n);
    return;
  }
  const mk = target.closest('.mk');
  if (mk && mk.dataset.log !== '' && n.kind !== 'event') {
    select(v, n, Number(mk.dataset.log));
    return;
  }
  activate(v, n);
}

function toggleRow(v, n) {
  if (v.collapsed.has(n.id)) v.collapsed.delete(n.id); else v.collapsed.add(n.id);
  refresh(v, true);
}

// activate opens a row: its details, or for a reference row the object it points to.
function activate(v, n) {
  if (n.kind === 'reference' && n.ref && v.model.byId.has(n.ref)) {
    const to = v.model.byId.get(n.ref);
    select(v, to, null);
    reveal(v, to);
    return;
  }
  select(v, n, null);
}

// reveal expands n's ancestors and scrolls it into view.
function reveal(v, n) {
  let changed = false;
  for (let p = n.parent; p; p = p.parent) if (v.collapsed.delete(p.id)) changed = true;
  if (changed) computeVisible(v);
  const i = v.visible.indexOf(n);
  if (i >= 0) {
    const top = i * ROW_H, h = v.rowsEl.clientHeight || 600;
    if (top < v.rowsEl.scrollTop || top + ROW_H > v.rowsEl.scrollTop + h) v.rowsEl.scrollTop = Math.max(0, top - h / 3);
  }
  updateURL(v);
  draw(v);
}

function select(v, n, logIndex, quiet) {
  v.selected = n;
  v.selectedLog = logIndex === undefined ? null : logIndex;
  if (!quiet) updateURL(v);
  renderDetail(v);
  draw(v);
}

function redirectURL(n, v) {
  const k = objectKey(n);
  if (!k.resource || !k.name) return null;
  const q = new URLSearchParams();
  for (const [key, val] of Object.entries(k)) if (val) q.set(key, val);
  q.set('time', new Date(Math.floor(n.start / 1000)).toISOString());
  if (v.mode) q.set('mode', modeName(v.mode.display, v.mode.link));
  return '/redirect?' + q.toString();
}

function renderDetail(v) {
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

function codeClass(code) { const c = Number(code); return c >= 400 ? 'code-bad' : c >= 200 ? 'code-ok' : ''; }

function eventDetail(v, ev) {
  const obj = objectNodeOf(ev.owner);
  const back = obj ? el('a', { href: '#', class: 'back', text: `← ${obj.service} ${obj.op}`,
    onclick: e => { e.preventDefault(); select(v, obj, null); } }) : null;
  const meta = [
    ['Source', ev.source], ['Time', `${fmtTime(ev.time)} UTC (+${fmtDur(ev.time - v.model.t0)})`],
    ev.end > ev.time ? ['End', `${fmtTime(ev.end)} UTC (took ${fmtDur(ev.end - ev.time)})`] : null,
    ['User', ev.user], ['User agent', ev.userAgent], ['Response code', ev.code, codeClass(ev.code)], ['Source IP', ev.sourceIP],
    ['Action', ev.action], ev.warning ? ['Type', 'Warning', 'code-bad'] : null,
  ].filter(x => x && x[1]);
  const link = obj ? redirectURL(obj, v) : null;
  return el('div', { class: 'event-detail' },
    back,
    el('h3', { class: 'event-title', text: ev.title || '(untitled event)' }),
    el('dl', {}, meta.map(([k, val, cls]) => [el('dt', { text: k }), el('dd', { class: cls || '', text: val })])),
    ev.errors.length ? [el('h3', { text: 'Errors' }), ev.errors.map(t => el('div', { class: 'box error', text: t }))] : null,
    ev.messages.length ? [el('h3', { text: 'Messages' }), ev.messages.map(t => el('div', { class: 'box message', text: t }))] : null,
    el('h3', { text: 'Changes' }),
    ev.diff.length ? diffTable(ev.diff) : el('div', { class: 'note-inline', text: ev.snapshot
      ? 'No field changes recorded for this event; the snapshot below holds the object.'
      : 'No field changes recorded for this event.' }),
    ev.verboseDiff.length ? el('details', {}, el('summary', { text: `Bookkeeping changes (${ev.verboseDiff.length})` }), diffTable(ev.verboseDiff)) : null,
    ev.snapshot ? el('details', { class: 'snapshot' }, el('summary', { text: `Snapshot (${ev.snapshot.length} bytes)` }), jsonTree(ev.snapshot)) : null,
    ev.other.length ? [el('h3', { text: 'Other fields' }), kvTable(ev.other)] : null,
    ev.attrs.length ? el('details', {}, el('summary', { text: `All attributes (${ev.attrs.length})` }), kvTable(ev.attrs)) : null,
    link ? el('p', {}, el('a', { href: link, class: 'own-trace', text: `Open the trace of ${objectLabel(objectKey(obj))} (anchored at it)` })) : null);
}

function kvTable(pairs) {
  return el('table', { class: 'kv mono' }, el('tbody', {}, pairs.map(([k, val]) => el('tr', {}, el('td', { text: k }), el('td', { text: val })))));
}

function nodeDetail(v, n) {
  const parts = [el('h3', { class: 'node-title', text: `${n.service} ${n.op}`.trim() })];
  if (n.kind === 'omitted') {
    parts.push(el('div', { class: 'box message', text: 'Link following stopped here: a budget (objects per level, objects in total) or the depth limit was reached. Search for these objects directly, or pick a narrower link mode.' }));
    return el('div', {}, parts);
  }
  const k = objectKey(n);
  parts.push(el('dl', {},
    [['Kind', n.kind], ['Cluster', k.cluster], ['Resource', resourceLabel(k)], ['Namespace', k.namespace], ['Name', k.name],
      ['Start', fmtTime(n.start) + ' UTC'], ['End', fmtTime(n.end) + ' UTC'], ['UID', str(n.tags.get('kelemetry.object.uid'))],
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

// ---------- the object at any moment ----------
// The object panel's time slider: its positions are the object's stored writes in the trace's
// range (GET /api/objects/history); each shows the object reconstructed just after that write
// (GET /api/objects/at) and its changes since a second moment (GET /api/objects/diff).

// isoMicros writes Unix microseconds as RFC 3339 with microseconds.
function isoMicros(us) {
  const t = Math.floor(us);
  return new Date(Math.floor(t / 1000)).toISOString().replace(/Z$/, pad(((t % 1000) + 1000) % 1000, 3) + 'Z');
}

function objectQuery(k) {
  const q = new URLSearchParams();
  for (const f of ['cluster', 'group', 'resource', 'namespace', 'name']) q.set(f, k[f]);
  return q;
}

// historyPanel is a folded section of the object panel; it loads when opened.
function historyPanel(v, k) {
  const body = el('div', { class: 'history-body' });
  const d = el('details', { class: 'history' }, el('summary', { text: 'Object at any moment' }), body);
  let loaded = false;
  d.addEventListener('toggle', () => {
    if (!d.open || loaded) return;
    loaded = true;
    loadHistory(v, k, body);
  });
  return d;
}

async function loadHistory(v, k, box) {
  fill(box, el('p', { class: 'note-inline', text: 'Loading the stored history…' }));
  const q = objectQuery(k);
  q.set('from', isoMicros(v.model.t0));
  q.set('to', isoMicros(v.model.t1 + 1));
  let h;
  try {
    const resp = await apiGet('/api/objects/history?' + q);
    h = resp && resp.data && typeof resp.data === 'object' ? resp.data : {};
  } catch (e) {
    if (view !== v) return;
    fill(box, errorBox('Loading the history failed', e));
    return;
  }
  if (view !== v || !box.isConnected) return;
  const moments = Array.isArray(h.moments) ? h.moments.filter(m => m && typeof m.time === 'string') : [];
  if (!moments.length) {
    fill(box, el('div', { class: 'note-inline', text: 'No writes of this object are stored in the trace\'s range.' }));
    return;
  }
  const label = (m, i) => `${i + 1}. ${fmtTime(Date.parse(m.time) * 1000)} ${str(m.event)}`;
  const slider = el('input', { type: 'range', class: 'history-slider', min: 0, max: moments.length - 1, step: 1, value: moments.length - 1,
    attrs: { 'aria-label': 'Moment of the object\'s history' } });
  const from = el('select', { class: 'history-from', attrs: { 'aria-label': 'Compare with the moment' } },
    moments.map((m, i) => el('option', { value: String(i), text: label(m, i), selected: i === 0 })));
  const moment = el('div', { class: 'history-moment' });
  const out = el('div', { class: 'history-state' });
  const diffBox = el('div', { class: 'history-diff' });
  const st = { seq: 0, timer: 0, shown: -1 };
  v.history = st;
  const show = async () => {
    if (view !== v || !box.isConnected) return; // the panel was closed or the page left
    const seq = ++st.seq;
    const i = Number(slider.value), j = Number(from.value);
    const m = moments[i];
    fill(moment, el('strong', { text: `Moment ${i + 1} of ${moments.length}` }), ` · ${fmtTime(Date.parse(m.time) * 1000)} UTC · `,
      el('span', { class: 'event', text: str(m.event) }),
      m.snapshot ? el('span', { class: 'badge', text: 'snapshot' }) : m.changes ? el('span', { class: 'badge', text: plural(m.changes, 'change') }) : null,
      m.gap ? el('span', { class: 'badge warn', text: 'history incomplete' }) : null);
    const at = objectQuery(k);
    at.set('time', m.time);
    const a = moments[Math.min(i, j)], b = moments[Math.max(i, j)];
    const dq = objectQuery(k);
    dq.set('from', a.time);
    dq.set('to', b.time);
    let state, changes;
    try {
      [state, changes] = await Promise.all([apiGet('/api/objects/at?' + at), i === j ? null : apiGet('/api/objects/diff?' + dq)]);
    } catch (e) {
      if (seq !== st.seq || view !== v) return;
      fill(out, errorBox('Reconstructing the object failed', e));
      fill(diffBox);
      st.shown = i;
      return;
    }
    if (seq !== st.seq || view !== v) return;
    const o = state && state.data ? state.data : {};
    const src = o.source || {};
    const gaps = Array.isArray(o.gaps) ? o.gaps : [];
    const untracked = Array.isArray(o.untracked) ? o.untracked : [];
    fill(out,
      el('div', { class: 'history-source note-inline', text: `From the ${str(src.snapshotKind) || 'stored'} snapshot of ${fmtTime(Date.parse(src.snapshotTime) * 1000)} UTC` +
        ` and ${plural(Number(src.writesApplied) || 0, 'write')} after it` + (src.resourceVersion ? ` · resourceVersion ${src.resourceVersion}` : '') }),
      gaps.length ? el('div', { class: 'history-gaps' }, gaps.map(g => el('div', { class: 'box message',
        text: `${fmtTime(Date.parse(g.from) * 1000)} – ${fmtTime(Date.parse(g.to) * 1000)}: ${g.path ? g.path + ': ' : ''}${str(g.message)}` }))) : null,
      untracked.length ? el('div', { class: 'note-inline', text: `Not followed by the stored history: ${untracked.join(', ')}` }) : null,
      jsonTree(JSON.stringify(o.body === undefined ? null : o.body)));
    const cs = changes && changes.data && Array.isArray(changes.data.changes) ? changes.data.changes : [];
    fill(diffBox,
      el('h3', { text: i === j ? 'Changes' : `Changes from moment ${Math.min(i, j) + 1} to ${Math.max(i, j) + 1}` }),
      i === j ? el('div', { class: 'note-inline', text: 'Pick another moment to compare with.' })
        : cs.length ? changeTable(cs) : el('div', { class: 'note-inline', text: 'No field changes between these moments.' }));
    st.shown = i;
    momentLine(v, m);
  };
  const later = () => { clearTimeout(st.timer); st.timer = setTimeout(show, 120); };
  slider.addEventListener('input', later);
  from.addEventListener('change', later);
  fill(box,
    el('div', { class: 'history-controls' }, el('span', { class: 'edge', text: fmtTime(Date.parse(moments[0].time) * 1000) }), slider,
      el('span', { class: 'edge', text: fmtTime(Date.parse(moments[moments.length - 1].time) * 1000) })),
    moment,
    el('label', { class: 'history-compare' }, 'Compare with ', from),
    h.truncated ? el('div', { class: 'msg truncated', text: str(h.truncated) }) : null,
    diffBox, el('h3', { text: 'The object' }), out);
  show();
}

// momentLine marks the slider's moment on the chart with a vertical line (none: m null).
function momentLine(v, m) {
  let line = v.gantt ? v.gantt.querySelector('.moment-line') : null;
  const t = m ? Date.parse(m.time) * 1000 : NaN;
  if (!isFinite(t)) { if (line) line.remove(); return; }
  if (!line) v.gantt.append(line = el('div', { class: 'moment-line', attrs: { 'aria-hidden': 'true' } }));
  const f = Math.min(Math.max((t - v.model.t0) / (v.model.t1 - v.model.t0), 0), 1);
  line.style.left = `calc(var(--label) + (100% - var(--label)) * ${f.toFixed(5)})`;
  line.title = `${fmtTime(t)} UTC: the moment the object panel shows`;
}

// changeTable draws the changes of GET /api/objects/diff like an event's diff.
function changeTable(changes) {
  const val = raw => raw === undefined ? '<none>' : JSON.stringify(raw);
  return el('table', { class: 'diff mono' }, el('tbody', {}, changes.map(c => {
    const o = val(c.old), n = val(c.new);
    return el('tr', { class: 'diff-line' + (c.redacted ? ' redacted' : '') },
      el('td', { class: 'path', text: str(c.path) }),
      el('td', { class: 'old' + (o === '<none>' ? ' none' : ''), text: o }),
      el('td', { class: 'arrow', text: '→' }),
      el('td', { class: 'new' + (n === '<none>' ? ' none' : ''), text: n }));
  })));
}

// Test hooks: the browser tests read these; they change nothing.
window.kelemetryUI = {
  rowCount: () => (view ? view.visible.length : 0),
  renderedRows: () => document.querySelectorAll('.row').length,
  criticalSteps: () => (view && view.critical ? view.critical.steps.length : -1),
  // historyShown is the slider position whose object is shown (-1 before the first answer).
  historyShown: () => (view && view.history ? view.history.shown : -1),
  splitDiff, parseResource, parseTimeInput: s => { const d = parseTimeInput(s); return d ? d.toISOString() : null; },
};

route();
