// Search results: a result's card, the start page's note and the note of an empty result list.
import { el } from './dom.js';
import { fmtDur, fmtRange, fmtTime, isoSeconds, objectLabel, plural, zoneName } from './format.js';
/** @import { FormState, SearchResult, Suggestions, TimeRange } from './types.js' */

/**
 * welcome is the start page's note: what a result is, and the range of the stored data.
 * @param {Suggestions} s
 * @returns {HTMLDivElement}
 */
export function welcome(s) {
  const box = el('div', { class: 'msg empty' }, el('h3', { text: 'Search stored traces' }),
    el('div', { text: 'Each result is one object with its related objects (owners, owned objects) and their events, merged over the time range.' }));
  if (s && s.newest) {
    box.append(el('div', {}, `Stored data spans ${fmtTime(new Date(s.oldest))} – ${fmtTime(new Date(s.newest))} ${zoneName()}. `,
      el('a', { href: storedRangeURL(s, {}), dataset: { nav: '' }, text: 'Show everything in that range' })));
  }
  return box;
}

/**
 * storedRangeURL searches the stored data's range (at most 90 days back from its newest).
 * @param {Suggestions} s with oldest and newest
 * @param {Partial<FormState>} p the fields to keep
 * @returns {string}
 */
export function storedRangeURL(s, p) {
  const q = new URLSearchParams();
  for (const k of ['cluster', 'resource', 'namespace', 'name', 'attrs', 'display', 'link', 'limit']) if (p[k]) q.set(k, p[k]);
  q.set('range', 'custom');
  q.set('start', isoSeconds(new Date(Math.max(Date.parse(s.oldest), Date.parse(s.newest) - 90 * 86400e3))));
  q.set('end', isoSeconds(new Date(s.newest)));
  return '/search?' + q.toString();
}

/**
 * noMatches explains an empty result list, with tips and, when the stored data is elsewhere,
 * a link to search its range.
 * @param {FormState} p
 * @param {TimeRange} range
 * @param {Suggestions} s
 * @returns {HTMLDivElement}
 */
export function noMatches(p, range, s) {
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
      box.append(el('div', {}, `The stored data spans ${fmtTime(oldest)} – ${fmtTime(newest)} ${zoneName()}, outside this range. `,
        el('a', { href: storedRangeURL(s, p), dataset: { nav: '' }, text: 'Search that range' })));
    }
  }
  return box;
}

/**
 * resultCard is a search result: its root object and facts, a link to its trace page.
 * @param {SearchResult} r
 * @param {FormState} p the search (unused: the result's display ID holds its mode)
 * @returns {HTMLAnchorElement}
 */
export function resultCard(r, p) {
  const startUs = Date.parse(r.start) * 1000, endUs = Date.parse(r.end) * 1000;
  const facts = [
    el('span', { class: 'badge', text: plural(r.objects || 0, 'object') }),
    el('span', { class: 'badge', text: plural(r.events || 0, 'event') }),
    r.omitted ? el('span', { class: 'badge warn', text: `${r.omitted} more omitted` }) : null,
    el('span', { text: isFinite(startUs) ? `${fmtTime(startUs)} – ${fmtTime(endUs)} ${zoneName()} (${fmtDur(endUs - startUs)})` : '' }),
    el('span', { text: `cluster${(r.clusters || []).length === 1 ? '' : 's'}: ${(r.clusters || []).join(', ') || '–'}` }),
  ];
  const seed = r.seed && r.root && objectLabel(r.seed) !== objectLabel(r.root) ? el('span', { text: `found: ${objectLabel(r.seed)}` }) : null;
  const more = r.roots > 1 ? ` and ${plural(r.roots - 1, 'other root')}` : '';
  const matches = Array.isArray(r.matches) && r.matches.length ? el('ul', { class: 'matches' },
    r.matches.map(m => el('li', { class: m.error ? 'error' : '' },
      el('span', { class: 'when', text: `${fmtTime(Date.parse(m.time) * 1000)} ${zoneName()}` }),
      el('span', { class: 'who', text: m.user }),
      el('span', { class: 'verb', text: `${m.verb || ''}${m.subresource ? ' ' + m.subresource : ''}` }),
      el('span', { class: 'obj', text: objectLabel(m.object) }),
      el('span', { class: 'code', text: m.code ? `→ ${m.code}` : '' }))),
    Number(r.matchCount) > r.matches.length ? el('li', { class: 'note', text: `and ${Number(r.matchCount) - r.matches.length} more matching events` }) : null) : null;
  return el('a', { class: 'result', href: `/trace/${encodeURIComponent(r.traceID)}`, dataset: { nav: '' } },
    el('div', { class: 'title', text: objectLabel(r.root) + more }),
    el('div', { class: 'facts' }, facts, seed), matches);
}
