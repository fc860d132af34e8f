// Truncation: a request that ran out of a server budget (spans read, bytes rendered, time)
// answers with what fit and says so: "result truncated: span budget of N reached; narrow the
// time range".
import { el } from './dom.js';
import { str } from './format.js';
/** @import { ApiResponse, SearchResult } from './types.js' */

const TRUNCATED_PREFIX = 'result truncated: ';

/**
 * isTruncation tells a trace's warning that says a budget ran out.
 * @param {any} w
 * @returns {boolean}
 */
export function isTruncation(w) { return str(w).startsWith(TRUNCATED_PREFIX); }

/**
 * searchTruncation collects the truncation messages of a search answer and its results.
 * @param {ApiResponse<SearchResult[]>} body
 * @returns {string[]}
 */
export function searchTruncation(body) {
  const msgs = [];
  if (body && body.truncated) msgs.push(body.truncated);
  for (const r of (body && Array.isArray(body.data) ? body.data : [])) if (r && r.truncated) msgs.push(r.truncated);
  return msgs;
}

/**
 * truncationBanner is a visible notice of what budgets left out; null when nothing was.
 * @param {string[]} msgs
 * @returns {HTMLDivElement | null}
 */
export function truncationBanner(msgs) {
  const list = [...new Set((msgs || []).map(str).filter(Boolean))];
  if (!list.length) return null;
  return el('div', {
    class: 'msg truncated', attrs: { role: 'status' },
    style: { borderColor: '#ecd48f', background: 'var(--warn-bg)', color: 'var(--warn)', fontWeight: '600' },
  }, list.map(m => el('div', { text: m })));
}
