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

/** MERGE_KEYS are the fields that name a list's items, as Kubernetes' strategic merge does. */
const MERGE_KEYS = ['type', 'name', 'containerPort', 'mountPath', 'devicePath', 'ip', 'topologyKey'];

/** FOLD_AT is the length above which a value is folded to its start. */
const FOLD_AT = 120;

/**
 * expandList splits the change of a whole list of objects ("<path> [...] -> [...]") into one line
 * per item and field, named by the items' merge key (status.conditions[type=Ready].status), the
 * way the diff engine names changes inside lists it knows. It returns null for anything else.
 * @param {{path: string, old: string, new: string}} d
 * @returns {{path: string, old: string, new: string}[] | null}
 */
export function expandList(d) {
  const parse = (/** @type {string} */ s) => {
    if (s === '<none>') return [];
    try { const v = JSON.parse(s); return Array.isArray(v) ? v : null; } catch (_) { return null; }
  };
  const a = parse(d.old), b = parse(d.new);
  if (!a || !b || !a.length && !b.length) return null;
  const all = [...a, ...b];
  if (!all.every(x => x && typeof x === 'object' && !Array.isArray(x))) return null;
  const key = MERGE_KEYS.find(k => all.every(x => typeof x[k] === 'string' || typeof x[k] === 'number'));
  if (!key) return null;
  const byKey = (/** @type {any[]} */ list) => new Map(list.map(x => [String(x[key]), x]));
  const ma = byKey(a), mb = byKey(b);
  if (ma.size !== a.length || mb.size !== b.length) return null; // a key repeats: not a merge key
  const show = (/** @type {any} */ v) => v === undefined ? '<none>' : typeof v === 'string' ? v : JSON.stringify(v);
  /** @type {{path: string, old: string, new: string}[]} */
  const out = [];
  for (const k of new Set([...ma.keys(), ...mb.keys()])) {
    const x = ma.get(k) || {}, y = mb.get(k) || {}, item = `${d.path}[${key}=${k}]`;
    const fields = new Set([...Object.keys(x), ...Object.keys(y)]);
    for (const f of fields) {
      // The key names the item already; it is a row only for an item with nothing else.
      if (f === key && fields.size > 1) continue;
      if (JSON.stringify(x[f]) === JSON.stringify(y[f])) continue;
      out.push({ path: `${item}.${f}`, old: show(x[f]), new: show(y[f]) });
    }
  }
  return out;
}

/**
 * expandObject splits the change of a whole object (an item added to a list the diff engine
 * names by its merge key, status.conditions[type=Available]) into one line per field. It returns
 * null for anything else.
 * @param {{path: string, old: string, new: string}} d
 * @returns {{path: string, old: string, new: string}[] | null}
 */
export function expandObject(d) {
  const parse = (/** @type {string} */ s) => {
    if (s === '<none>') return {};
    try { const v = JSON.parse(s); return v && typeof v === 'object' && !Array.isArray(v) ? v : null; } catch (_) { return null; }
  };
  const a = parse(d.old), b = parse(d.new);
  if (!a || !b || (d.old === '<none>' && d.new === '<none>')) return null;
  const show = (/** @type {any} */ v) => v === undefined ? '<none>' : typeof v === 'string' ? v : JSON.stringify(v);
  const out = [];
  for (const f of new Set([...Object.keys(a), ...Object.keys(b)])) {
    if (JSON.stringify(a[f]) !== JSON.stringify(b[f])) out.push({ path: `${d.path}.${f}`, old: show(a[f]), new: show(b[f]) });
  }
  return out.length ? out : null;
}

/**
 * valueCell shows a value, folded to its start when long (click to read it all).
 * @param {string} cls
 * @param {string} v
 * @returns {HTMLTableCellElement}
 */
function valueCell(cls, v) {
  const c = cls + (v === '<none>' ? ' none' : v === '<unknown>' ? ' unknown' : '');
  if (v === '<unknown>') return el('td', { class: c, text: v, title: 'the value before is unknown: this change is read from the request\'s patch' });
  if (v.length <= FOLD_AT) return el('td', { class: c, text: v });
  return el('td', { class: c }, el('details', { class: 'fold' }, el('summary', { text: v.slice(0, 80) + '…' }), el('div', { text: v })));
}

/**
 * diffTable draws an event's diff lines: a whole list of objects, or a whole object, one row
 * per item and field; long values folded.
 * @param {string[]} lines
 * @returns {HTMLTableElement}
 */
export function diffTable(lines) {
  const rows = lines.flatMap(line => { const d = splitDiff(line); return expandList(d) || expandObject(d) || [d]; });
  return el('table', { class: 'diff mono' }, el('tbody', {}, rows.map(d => el('tr', { class: 'diff-line' },
    el('td', { class: 'path', text: d.path }),
    valueCell('old', d.old),
    el('td', { class: 'arrow', text: '→' }),
    valueCell('new', d.new)))));
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
