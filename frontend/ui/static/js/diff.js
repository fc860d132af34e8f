// Diff tables: an event's diff lines ("<path> <old> -> <new>") and the changes of
// GET /api/objects/diff.
import { el } from './dom.js';
import { str } from './format.js';
/** @import { Change } from './types.js' */

/**
 * splitDiff reads "<path> <old> -> <new>".
 * @param {string} line
 * @returns {{path: string, old: string, new: string}}
 */
export function splitDiff(line) {
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

/** @param {string} s */
function isJSON(s) { try { JSON.parse(s); return true; } catch (_) { return false; } }

/**
 * diffTable draws an event's diff lines.
 * @param {string[]} lines
 * @returns {HTMLTableElement}
 */
export function diffTable(lines) {
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

/**
 * changeTable draws the changes of GET /api/objects/diff like an event's diff.
 * @param {Change[]} changes
 * @returns {HTMLTableElement}
 */
export function changeTable(changes) {
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
