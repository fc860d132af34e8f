// JSON tree: a snapshot or an object as folded levels, cut after MAX_JSON_ENTRIES entries.
import { el } from './dom.js';

const MAX_JSON_ENTRIES = 2000;

/**
 * jsonTree draws JSON text as a tree, the first two levels open; text that is not JSON as it is.
 * @param {string} text
 * @returns {HTMLElement}
 */
export function jsonTree(text) {
  let v;
  try { v = JSON.parse(text); } catch (_) { return el('pre', { class: 'json mono', text }); }
  const budget = { left: MAX_JSON_ENTRIES };
  return el('div', { class: 'json mono' }, jsonNode(v, null, 0, budget));
}

/**
 * @param {any} v
 * @param {string | number | null} key null for the top level
 * @param {number} depth
 * @param {{left: number}} budget the entries left to draw
 * @returns {HTMLElement}
 */
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
