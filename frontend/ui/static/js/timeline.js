// The timeline: the trace's rows, virtualised (only the rows in and near the viewport are in the
// page), with their event markers; collapsing, selection and keyboard use, kept in the URL.
import { onPath } from './critical-path.js';
import { renderDetail } from './detail.js';
import { el } from './dom.js';
import { fmtDur, fmtTime, str } from './format.js';
import { eventOfLog, logTime, markerClass } from './model.js';
import { view } from './trace.js';
/** @import { TraceModel, TraceNode, TraceView } from './types.js' */

const ROW_H = 24;          // px, must match --row in app.css
const OVERSCAN = 12;       // rows drawn above and below the visible ones
const MAX_MARKERS = 400;   // markers drawn on one row
const MAX_URL_COLLAPSED = 50;

/**
 * conflictsOf counts the retried conflicts (markerClass 'conflict') among a row's folded events.
 * @param {TraceNode} n
 * @returns {number}
 */
function conflictsOf(n) {
  let c = 0;
  for (const l of n.logs) {
    const f = eventOfLog(l);
    if (f && markerClass(f, f[0].value, f[0].key) === 'conflict') c++;
  }
  return c;
}

/**
 * axisTicks is the time axis above the rows: six ticks, relative to the trace's start.
 * @param {TraceModel} model
 * @returns {HTMLDivElement}
 */
export function axisTicks(model) {
  const tl = el('div', { class: 'tl' });
  const span = model.t1 - model.t0;
  const step = tickStep(span);
  for (let t = 0; t <= span + 1e-6; t += step) {
    const f = span > 0 ? t / span : 0;
    if (f > 0.97 && t > 0) break; // the last tick would crowd the edge
    tl.append(el('span', { class: 'tick' + (t === 0 ? ' first' : ''), style: { left: `${f * 100}%` },
      text: t === 0 ? '0' : '+' + fmtDur(t) }));
  }
  return tl;
}

/**
 * tickStep is a round step (1, 2 or 5 times a power of ten of µs, or a whole number of seconds,
 * minutes or hours) that cuts span into 4 to 10 intervals.
 * @param {number} span µs
 * @returns {number} µs
 */
export function tickStep(span) {
  if (!(span > 0)) return 1;
  const candidates = [];
  for (let p = 1; p <= 1e12; p *= 10) candidates.push(p, 2 * p, 5 * p);
  candidates.push(15e6, 30e6, 60e6, 120e6, 300e6, 600e6, 900e6, 1800e6, 3600e6, 7200e6, 10800e6, 21600e6);
  candidates.sort((a, b) => a - b);
  for (const c of candidates) if (span / c <= 8) return c;
  return candidates[candidates.length - 1];
}

/**
 * collapsible lists the rows "Collapse all" folds: all with children but the roots.
 * @param {TraceModel} model
 * @returns {TraceNode[]}
 */
export function collapsible(model) { return model.nodes.filter(n => n.children.length && n.parent); }

/**
 * computeVisible lists the rows not hidden by a collapsed ancestor (v.visible) and sizes the
 * scrolled area for them.
 * @param {TraceView} v
 */
export function computeVisible(v) {
  /** @type {TraceNode[]} */
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

/**
 * refresh recomputes the rows after a collapse change and records it in the URL.
 * @param {TraceView} v
 * @param {boolean} [recordURL]
 */
export function refresh(v, recordURL) {
  computeVisible(v);
  if (recordURL) updateURL(v);
  draw(v);
}

/**
 * updateURL records the selection and the collapsed rows in the page's URL (in place).
 * @param {TraceView} v
 */
export function updateURL(v) {
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

/**
 * schedule draws the rows at the next animation frame (once however often it is called).
 * @param {TraceView} v
 */
export function schedule(v) {
  if (v.frame) return;
  v.frame = requestAnimationFrame(() => { v.frame = 0; draw(v, true); });
}

/**
 * draw renders only the rows in and near the viewport. With reuse (scrolling) the rows drawn
 * before are kept and only those that came into view are built, so a scroll frame costs the
 * new rows, not the whole viewport of rows and their markers; otherwise (the selection or the
 * collapsed rows changed) all are rebuilt. Rows stay in index order (the Tab order), and the
 * keyboard focus survives a rebuild.
 * @param {TraceView} v
 * @param {boolean} [reuse]
 */
export function draw(v, reuse) {
  if (view !== v) return;
  const height = v.rowsEl.clientHeight || 600;
  const first = Math.max(0, Math.floor(v.rowsEl.scrollTop / ROW_H) - OVERSCAN);
  const last = Math.min(v.visible.length, Math.ceil((v.rowsEl.scrollTop + height) / ROW_H) + OVERSCAN);
  const focus = reuse ? null : focusOf(v);
  const old = reuse && v.drawn ? v.drawn : new Map();
  if (!reuse) v.spacer.replaceChildren();
  /** @type {Map<number, {node: TraceNode, el: HTMLElement}>} */
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

/**
 * focusOf names the focused part of a row (the row, its toggle or a marker), or null.
 * @param {TraceView} v
 * @returns {{id: string, part: string | null} | null}
 */
function focusOf(v) {
  const a = /** @type {HTMLElement | null} */ (document.activeElement);
  if (!(a instanceof Element) || !v.spacer.contains(a)) return null;
  const row = /** @type {HTMLElement | null} */ (a.closest('.row'));
  if (!row) return null;
  let part = null;
  if (a.classList.contains('toggle')) part = '.toggle';
  else if (a.classList.contains('mk')) part = `.mk[data-log="${a.dataset.log}"]`;
  return { id: row.dataset.id, part };
}

/**
 * @param {TraceView} v
 * @param {{id: string, part: string | null}} f
 */
function restoreFocus(v, f) {
  for (const { node, el: row } of v.drawn.values()) {
    if (node.id !== f.id) continue;
    const target = /** @type {HTMLElement} */ ((f.part && row.querySelector(f.part)) || row);
    target.focus({ preventScroll: true });
    return;
  }
}

/**
 * focusRow moves the keyboard focus to visible row i, scrolling it into view.
 * @param {TraceView} v
 * @param {number} i
 */
function focusRow(v, i) {
  if (i < 0 || i >= v.visible.length) return;
  const top = i * ROW_H, h = v.rowsEl.clientHeight || 600;
  if (top < v.rowsEl.scrollTop) v.rowsEl.scrollTop = top;
  else if (top + ROW_H > v.rowsEl.scrollTop + h) v.rowsEl.scrollTop = top + ROW_H - h;
  draw(v, true);
  const d = v.drawn.get(i);
  if (d) d.el.focus({ preventScroll: true });
}

/**
 * onRowsKey: a focused row opens with Enter or Space, arrows move between rows, and
 * right/left expand and collapse. The toggle and markers are buttons: Enter clicks them.
 * @param {TraceView} v
 * @param {KeyboardEvent} e
 */
export function onRowsKey(v, e) {
  const t = e.target instanceof Element ? /** @type {HTMLElement} */ (e.target) : null;
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

/**
 * pct places Unix microseconds t on the timeline, in percent of its width.
 * @param {TraceView} v
 * @param {number} t
 */
function pct(v, t) { return ((t - v.model.t0) / (v.model.t1 - v.model.t0)) * 100; }

/**
 * rowEl builds visible row i: its label (toggle, service, operation) and its bar and markers.
 * @param {TraceView} v
 * @param {TraceNode} n
 * @param {number} i
 * @returns {HTMLDivElement}
 */
function rowEl(v, n, i) {
  const hasKids = n.children.length > 0;
  const isCollapsed = v.collapsed.has(n.id);
  const label = el('div', { class: 'lbl', style: { paddingLeft: `${4 + n.depth * 14}px` } },
    hasKids ? el('button', { class: 'toggle', text: isCollapsed ? '▶' : '▼', title: isCollapsed ? 'Expand' : 'Collapse',
      attrs: { 'aria-label': isCollapsed ? 'Expand' : 'Collapse' } }) : el('span', { class: 'toggle' }),
    n.service && n.kind !== 'omitted' ? el('span', { class: 'svc', text: n.service }) : null,
    el('span', { class: 'op', text: n.op }),
    hasKids && isCollapsed ? el('span', { class: 'count', text: `(${n.descendants})` }) : null,
    conflictsOf(n) ? el('span', { class: 'conflicts', text: `${conflictsOf(n)} retried`, title: 'Conflicts (409) a controller retried: optimistic concurrency, not failures' }) : null);
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

/**
 * onRowsClick opens a clicked row or marker, or folds a row at its toggle.
 * @param {TraceView} v
 * @param {MouseEvent} e
 */
export function onRowsClick(v, e) {
  const target = e.target instanceof Element ? e.target : null;
  const row = /** @type {HTMLElement | null} */ (target && target.closest('.row'));
  if (!row) return;
  const n = v.model.byId.get(row.dataset.id);
  if (!n) return;
  if (target.closest('.toggle') && n.children.length) {
    toggleRow(v, n);
    return;
  }
  const mk = /** @type {HTMLElement | null} */ (target.closest('.mk'));
  if (mk && mk.dataset.log !== '' && n.kind !== 'event') {
    select(v, n, Number(mk.dataset.log));
    return;
  }
  activate(v, n);
}

/**
 * @param {TraceView} v
 * @param {TraceNode} n
 */
function toggleRow(v, n) {
  if (v.collapsed.has(n.id)) v.collapsed.delete(n.id); else v.collapsed.add(n.id);
  refresh(v, true);
}

/**
 * activate opens a row: its details, or for a reference row the object it points to.
 * @param {TraceView} v
 * @param {TraceNode} n
 */
function activate(v, n) {
  if (n.kind === 'reference' && n.ref && v.model.byId.has(n.ref)) {
    const to = v.model.byId.get(n.ref);
    select(v, to, null);
    reveal(v, to);
    return;
  }
  select(v, n, null);
}

/**
 * reveal expands n's ancestors and scrolls it into view.
 * @param {TraceView} v
 * @param {TraceNode} n
 */
export function reveal(v, n) {
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

/**
 * select shows row n (or its folded event logIndex) in the detail panel and marks it.
 * @param {TraceView} v
 * @param {TraceNode} n
 * @param {number | null} [logIndex]
 * @param {boolean} [quiet] whether to leave the URL as it is
 */
export function select(v, n, logIndex, quiet) {
  v.selected = n;
  v.selectedLog = logIndex === undefined ? null : logIndex;
  if (!quiet) updateURL(v);
  renderDetail(v);
  draw(v);
}
