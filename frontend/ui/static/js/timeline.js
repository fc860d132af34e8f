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
 * axisTicks is the time axis above the rows: ticks on round values of the range shown, relative
 * to the trace's start.
 * @param {TraceModel} model
 * @param {{from: number, to: number} | null} [zoom] the range shown; null: the whole trace
 * @returns {HTMLDivElement}
 */
export function axisTicks(model, zoom) {
  const tl = el('div', { class: 'tl' });
  const from = zoom ? zoom.from : model.t0, to = zoom ? zoom.to : model.t1;
  const span = to - from;
  const step = tickStep(span);
  // Ticks at multiples of step from the trace's start, within the range.
  for (let t = Math.ceil((from - model.t0) / step) * step; model.t0 + t <= to + 1e-6; t += step) {
    const f = span > 0 ? (model.t0 + t - from) / span : 0;
    if (f > 0.97 && f > 0.001) break; // the last tick would crowd the edge
    tl.append(el('span', { class: 'tick' + (f < 0.001 ? ' first' : ''), style: { left: `${f * 100}%` },
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
  if (v.zoom) q.set('zoom', `${Math.round(v.zoom.from - v.model.t0)}-${Math.round(v.zoom.to - v.model.t0)}`);
  for (const [k, val] of v.urlState || []) q.set(k, val);
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
function pct(v, t) {
  const from = v.zoom ? v.zoom.from : v.model.t0, to = v.zoom ? v.zoom.to : v.model.t1;
  return ((t - from) / (to - from)) * 100;
}

/** GROUP_PX is the distance under which markers of a row are drawn as one group. */
const GROUP_PX = 8;

/** SEVERITY orders marker classes for a group's colour: the first present wins. */
const SEVERITY = ['error', 'event', 'delete', 'create', 'status', '', 'conflict', 'routine'];

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
  const left = pct(v, n.start), right = pct(v, n.end);
  if (right >= 0 && left <= 100) {
    const l = Math.max(left, 0);
    tl.append(el('div', { class: 'bar', style: { left: `${l}%`, width: `${Math.max(Math.min(right, 100) - l, 0)}%` } }));
  }
  let pathHere = false;
  if (n.kind === 'event') {
    pathHere = onPath(v, n);
    if (left >= 0 && left <= 100) {
      tl.append(el('button', { class: `mk ${markerClass(n.span.tags, n.op, n.service)}${v.selected === n ? ' selected' : ''}${pathHere ? ' critical' : ''}`,
        title: `${fmtTime(n.start)} ${n.op}`, dataset: { log: '' }, style: { left: `${left}%` } }));
    }
  } else {
    /** @type {{li: number, ts: number, pos: number, cls: string, crit: boolean, sel: boolean, title: string}[]} */
    const marks = [];
    n.logs.forEach((l, li) => {
      const f = eventOfLog(l);
      if (!f || marks.length >= MAX_MARKERS) return;
      const ts = logTime(l, n);
      const crit = onPath(v, n, ts);
      pathHere = pathHere || crit;
      const pos = pct(v, ts);
      if (pos < 0 || pos > 100) return;
      marks.push({ li, ts, pos, cls: markerClass(f, f[0].value, f[0].key), crit, sel: v.selected === n && v.selectedLog === li, title: str(f[0].value) });
    });
    marks.sort((a, b) => a.pos - b.pos);
    // Markers closer than GROUP_PX are one group (a button with their count that lists them);
    // the selected event keeps a marker of its own. Zooming in splits groups.
    const gap = GROUP_PX / Math.max(v.axisTl ? v.axisTl.clientWidth : 800, 100) * 100;
    /** @type {typeof marks[]} */
    const groups = [];
    for (const m of marks) {
      const g = groups[groups.length - 1];
      if (!m.sel && g && !g[0].sel && m.pos - g[0].pos < gap) g.push(m); else groups.push([m]);
    }
    for (const g of groups) {
      if (g.length === 1) {
        const m = g[0];
        tl.append(el('button', {
          class: `mk ${m.cls}${m.sel ? ' selected' : ''}${m.crit ? ' critical' : ''}`,
          title: `${fmtTime(m.ts)} ${m.title}`, dataset: { log: String(m.li) }, style: { left: `${m.pos}%` },
        }));
        continue;
      }
      const cls = SEVERITY.find(c => g.some(m => m.cls === c)) || '';
      tl.append(el('button', {
        class: `mk group ${cls}${g.some(m => m.crit) ? ' critical' : ''}`, text: String(g.length),
        title: `${g.length} events from ${fmtTime(g[0].ts)}: click for the list, or zoom in`,
        dataset: { group: g.map(m => m.li).join(' '), classes: g.map(m => m.cls).join(' ') }, style: { left: `${g[0].pos}%` },
        attrs: { 'aria-label': `${g.length} events` },
      }));
    }
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
  if (mk && mk.dataset.group) {
    showGroup(v, n, mk.dataset.group.split(' ').map(Number), mk);
    return;
  }
  if (mk && mk.dataset.log !== '' && n.kind !== 'event') {
    select(v, n, Number(mk.dataset.log));
    return;
  }
  activate(v, n);
}

/**
 * showGroup lists a group marker's events in a popover by the marker: each opens its event.
 * Escape, a click elsewhere or a choice closes it.
 * @param {TraceView} v
 * @param {TraceNode} n
 * @param {number[]} lis the folded events' indexes
 * @param {HTMLElement} at the group marker
 */
function showGroup(v, n, lis, at) {
  closeGroup();
  const box = v.gantt.getBoundingClientRect(), r = at.getBoundingClientRect();
  const pop = el('div', { class: 'mk-popover', attrs: { role: 'menu' },
    style: { left: `${Math.min(r.left - box.left, box.width - 320)}px`, top: `${r.bottom - box.top + 2}px` } },
  lis.map(li => {
    const f = eventOfLog(n.logs[li]) || [];
    const ts = logTime(n.logs[li], n);
    return el('button', { class: 'mk-item', attrs: { role: 'menuitem' }, dataset: { log: String(li) },
      onclick: () => { closeGroup(); select(v, n, li); } },
    el('span', { class: `mk ${markerClass(f, f[0] && f[0].value, f[0] && f[0].key)}`, attrs: { 'aria-hidden': 'true' } }),
    el('span', { class: 'at', text: fmtTime(ts).slice(11) }), el('span', { text: str(f[0] && f[0].value) }));
  }));
  v.gantt.append(pop);
  const first = /** @type {HTMLElement | null} */ (pop.querySelector('button'));
  if (first) first.focus();
  const off = (/** @type {Event} */ e) => {
    if (e instanceof KeyboardEvent ? e.key === 'Escape' : !pop.contains(/** @type {Node} */ (e.target))) closeGroup();
  };
  setTimeout(() => { document.addEventListener('mousedown', off); document.addEventListener('keydown', off); });
  openGroup = () => { pop.remove(); document.removeEventListener('mousedown', off); document.removeEventListener('keydown', off); };
}

/** @type {(() => void) | null} openGroup closes the open group popover */
let openGroup = null;

/** closeGroup closes the group popover, if one is open. */
export function closeGroup() {
  if (openGroup) { const c = openGroup; openGroup = null; c(); }
}

/**
 * setZoom shows the range [from, to] (µs; null: the whole trace), redraws the axis, minimap and
 * rows, and records it in the URL.
 * @param {TraceView} v
 * @param {{from: number, to: number} | null} zoom
 */
export function setZoom(v, zoom) {
  const m = v.model;
  if (zoom) {
    let from = Math.max(m.t0, Math.min(zoom.from, zoom.to)), to = Math.min(m.t1, Math.max(zoom.from, zoom.to));
    if (to - from < MIN_ZOOM_US) { const mid = (from + to) / 2; from = Math.max(m.t0, mid - MIN_ZOOM_US / 2); to = Math.min(m.t1, from + MIN_ZOOM_US); }
    zoom = from <= m.t0 && to >= m.t1 ? null : { from, to };
  }
  v.zoom = zoom;
  closeGroup();
  if (v.axisTl) {
    const fresh = axisTicks(m, zoom);
    v.axisTl.replaceChildren(...fresh.childNodes);
  }
  drawMinimap(v);
  const reset = /** @type {HTMLElement | null} */ (v.gantt.querySelector('.zoom-reset'));
  if (reset) reset.hidden = !zoom;
  draw(v);
  updateURL(v);
}

/** MIN_ZOOM_US is the narrowest range a zoom shows. */
const MIN_ZOOM_US = 1000;

/**
 * dragZoom lets a drag across el (the axis or the minimap) select the range to show: x maps to
 * time over the range el spans (the shown range for the axis, the whole trace for the minimap).
 * @param {TraceView} v
 * @param {HTMLElement} target
 * @param {() => {from: number, to: number}} span the times at el's left and right edges
 */
export function dragZoom(v, target, span) {
  target.addEventListener('mousedown', e => {
    if (e.button !== 0) return;
    e.preventDefault();
    const box = target.getBoundingClientRect();
    const s = span();
    const at = (/** @type {number} */ x) => s.from + (Math.max(0, Math.min(x - box.left, box.width)) / box.width) * (s.to - s.from);
    const x0 = e.clientX;
    const sel = el('div', { class: 'zoom-sel', style: { left: `${x0 - box.left}px`, width: '0px' } });
    target.append(sel);
    const move = (/** @type {MouseEvent} */ m) => {
      const a = Math.min(x0, m.clientX) - box.left, b = Math.max(x0, m.clientX) - box.left;
      sel.style.left = `${Math.max(a, 0)}px`;
      sel.style.width = `${Math.min(b, box.width) - Math.max(a, 0)}px`;
    };
    const up = (/** @type {MouseEvent} */ m) => {
      document.removeEventListener('mousemove', move);
      document.removeEventListener('mouseup', up);
      sel.remove();
      if (Math.abs(m.clientX - x0) >= 4) setZoom(v, { from: at(Math.min(x0, m.clientX)), to: at(Math.max(x0, m.clientX)) });
    };
    document.addEventListener('mousemove', move);
    document.addEventListener('mouseup', up);
  });
}

/**
 * drawMinimap draws the whole trace's events as a density strip and the shown range as a window.
 * @param {TraceView} v
 */
export function drawMinimap(v) {
  const mm = v.minimap;
  if (!mm) return;
  const m = v.model, span = Math.max(m.t1 - m.t0, 1), bins = new Array(MINIMAP_BINS).fill(0);
  for (const n of m.nodes) {
    if (n.kind === 'event') bins[Math.min(MINIMAP_BINS - 1, Math.floor((n.start - m.t0) / span * MINIMAP_BINS))]++;
    else for (const l of n.logs) if (eventOfLog(l)) bins[Math.min(MINIMAP_BINS - 1, Math.max(0, Math.floor((logTime(l, n) - m.t0) / span * MINIMAP_BINS)))]++;
  }
  const max = Math.max(1, ...bins);
  const z = v.zoom;
  mm.replaceChildren(
    ...bins.map((c, i) => c ? el('span', { class: 'mm-bin', style: { left: `${i / MINIMAP_BINS * 100}%`, height: `${Math.max(c / max * 100, 8)}%` } }) : null).filter(Boolean),
    el('div', { class: 'mm-window', style: { left: `${z ? (z.from - m.t0) / span * 100 : 0}%`, width: `${z ? (z.to - z.from) / span * 100 : 100}%` } }));
}

/** MINIMAP_BINS is the minimap's resolution. */
const MINIMAP_BINS = 200;

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
  // The object panel's slider belongs to the row it was open on.
  if (v.selected !== n && v.urlState) { v.urlState.delete('moment'); v.urlState.delete('compare'); }
  v.selected = n;
  v.selectedLog = logIndex === undefined ? null : logIndex;
  if (!quiet) updateURL(v);
  renderDetail(v);
  draw(v);
}
