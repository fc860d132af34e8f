// The search page (/, /search): the form, its time range and API request, and the results.
import { apiGet } from './api.js';
import { app, el, errorBox, fill } from './dom.js';
import { fmtRange, fmtTime, plural, resourceLabel, str } from './format.js';
import { mergeList } from './merge.js';
import { DISPLAYS, LINKS, modeName } from './modes.js';
import { navigate, pageToken } from './nav.js';
import { noMatches, resultCard, storedRangeURL, welcome } from './results.js';
import { searchTruncation, truncationBanner } from './truncation.js';
/** @import { ApiResponse, FormState, SearchResult, Suggestions, TimeRange } from './types.js' */

/** @type {[key: string, label: string, seconds: number][]} the form's time ranges */
const RANGES = [
  ['15m', 'Last 15 minutes', 15 * 60], ['1h', 'Last hour', 3600], ['6h', 'Last 6 hours', 6 * 3600],
  ['24h', 'Last 24 hours', 86400], ['2d', 'Last 2 days', 2 * 86400], ['7d', 'Last 7 days', 7 * 86400],
  ['30d', 'Last 30 days', 30 * 86400], ['90d', 'Last 90 days', 90 * 86400], ['custom', 'Custom range', 0],
];
/** @type {Record<string, string>} */
const DEFAULTS = { display: 'tracing', link: 'full tree', range: '2d', limit: '20' };

/**
 * parseResource reads "deployments.apps", "apps/deployments" or "pods".
 * @param {string} s
 * @returns {{group: string, resource: string}}
 */
export function parseResource(s) {
  s = s.trim();
  if (!s) return { group: '', resource: '' };
  const slash = s.indexOf('/');
  if (slash >= 0) return { group: s.slice(0, slash).trim(), resource: s.slice(slash + 1).trim() };
  const dot = s.indexOf('.');
  if (dot >= 0) return { group: s.slice(dot + 1).trim(), resource: s.slice(0, dot).trim() };
  return { group: '', resource: s };
}

/**
 * parseTimeInput reads RFC 3339, or a date and time without a zone taken as UTC.
 * @param {string} s
 * @returns {Date | null} null when s is empty or no time
 */
export function parseTimeInput(s) {
  s = s.trim();
  if (!s) return null;
  if (/^\d{4}-\d{2}-\d{2}$/.test(s)) s += 'T00:00:00Z';
  else if (/^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(s)) s = s.replace(' ', 'T') + 'Z';
  const d = new Date(s);
  return isNaN(d.getTime()) ? null : d;
}

/**
 * moreResults says that the search found more than its limit of results shows, how many found
 * objects are in none of them, and links to the same search with a higher limit.
 * @param {ApiResponse<SearchResult[]>} body
 * @param {Record<string, string>} p the search's parameters
 * @returns {HTMLElement}
 */
function moreResults(body, p) {
  const limit = Number(body.limit) || Number(p.limit) || 20;
  const next = Math.min(1000, limit * 2);
  const q = new URLSearchParams(location.search);
  q.set('limit', String(next));
  const count = body.unshown ? `${plural(body.unshown, 'more matching object')}${body.scanCut ? ' (at least)' : ''} ${body.unshown === 1 ? 'is' : 'are'} in no result shown` : 'more matching objects are in no result shown';
  return el('div', { class: 'msg more-results', attrs: { role: 'status' } },
    el('span', { text: `The first ${plural(limit, 'result')} are shown; ${count}. ` }),
    limit < 1000 ? el('a', { href: '/search?' + q.toString(), text: `Show up to ${next} results`, onclick: e => { e.preventDefault(); navigate('/search?' + q.toString()); } }) : null,
    el('span', { text: limit < 1000 ? ', or narrow the search (namespace, name, a shorter time range).' : ' Narrow the search (namespace, name, a shorter time range).' }));
}

/**
 * searchRange resolves the form's range to dates, or throws with an explanation.
 * @param {FormState} p
 * @returns {TimeRange}
 */
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

/**
 * formState reads the form's fields from the page's URL, with the defaults.
 * @param {URLSearchParams} params
 * @returns {FormState}
 */
function formState(params) {
  const g = (k) => params.get(k) ?? DEFAULTS[k] ?? '';
  return {
    cluster: g('cluster'), resource: g('resource'), namespace: g('namespace'), name: g('name'), attrs: g('attrs'),
    range: g('range'), start: g('start'), end: g('end'), display: g('display'), link: g('link'), limit: g('limit'),
  };
}

/**
 * searchURL builds the API request of a form state.
 * @param {FormState} p
 * @param {TimeRange} range
 * @returns {string}
 */
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

/** @type {Suggestions | null} */
let suggestionCache = null;

/**
 * loadSuggestions reads the values of the search fields (once per page load); {} when they
 * cannot be read.
 * @returns {Promise<Suggestions>}
 */
async function loadSuggestions() {
  if (suggestionCache) return suggestionCache;
  try {
    /** @type {ApiResponse<Suggestions>} */
    const body = await apiGet('/api/ui/suggestions');
    suggestionCache = body && body.data ? body.data : {};
  } catch (_) {
    suggestionCache = {}; // suggestions are a convenience; the search reports real errors
  }
  return suggestionCache;
}

/**
 * @param {string} id
 * @param {string[] | undefined} values
 */
function datalist(id, values) {
  return el('datalist', { id }, (values || []).map(v => el('option', { value: v })));
}

/**
 * showSearch draws the search page and, for /search with parameters, the search's results.
 * @param {URLSearchParams} params the page's URL parameters: the form's fields
 * @param {number} token the page's token (pageToken)
 * @returns {Promise<void>}
 */
export async function showSearch(params, token) {
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
    field('Max. results', 'limit', { type: 'number', min: 1, max: 1000 }),
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
  /** @type {ApiResponse<SearchResult[]>} */
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
    el('h2', { text: `${plural(list.length, 'result')}${body.more ? ' (more exist)' : ''} · ${fmtRange(range.start, range.end)}` }),
    body.more ? moreResults(body, p) : null,
    truncationBanner(searchTruncation(body)),
    list.length > 1 ? mergeList(list, p) : list.map(r => resultCard(r, p)));
}
