// Ad-hoc merge: several results open as one trace on one time axis: its ID is the members' IDs,
// 32 hex digits each, concatenated (the server's merge ID, so the URL is shareable and Jaeger UI
// takes it too).
import { el } from './dom.js';
import { objectLabel, plural, str } from './format.js';
import { navigate } from './nav.js';
import { resultCard } from './results.js';
/** @import { FormState, SearchResult, TraceView } from './types.js' */

/** the most traces one merged view holds */
export const MAX_MERGE = 20;

/**
 * full32 writes a trace ID with 32 digits.
 * @param {any} id
 * @returns {string}
 */
function full32(id) { return str(id).padStart(32, '0'); }

/**
 * isMergeID tells a merged view's ID: 2 to MAX_MERGE trace IDs of 32 hex digits.
 * @param {string} id
 * @returns {boolean}
 */
export function isMergeID(id) { return id.length > 32 && id.length % 32 === 0 && id.length <= 32 * MAX_MERGE && /^[0-9a-fA-F]+$/.test(id); }

/**
 * mergeMembers splits a merged view's ID into its members' IDs.
 * @param {string} id
 * @returns {string[]}
 */
export function mergeMembers(id) {
  const out = [];
  for (let i = 0; i + 32 <= id.length; i += 32) out.push(id.slice(i, i + 32));
  return out;
}

/**
 * mergeList draws the results with a check box each and a bar that opens the checked ones as
 * one merged view (in the list's order).
 * @param {SearchResult[]} list
 * @param {FormState} p
 * @returns {[HTMLDivElement, HTMLDivElement[]]} the bar and the results
 */
export function mergeList(list, p) {
  /** @type {HTMLInputElement[]} */
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

/**
 * mergeBar lists the members of a merged view: each opens alone, and with more than two each
 * can be left out.
 * @param {TraceView} v
 * @returns {HTMLDivElement}
 */
export function mergeBar(v) {
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
