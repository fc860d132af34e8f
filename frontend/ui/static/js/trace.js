// The trace page (/trace/{id}): loads the trace and lays the page out: the bar with the display
// and link switches, the merged members, banners, the critical path, the timeline (timeline.js)
// and the detail panel (detail.js).
import { apiGet } from './api.js';
import { loadCritical } from './critical-path.js';
import { app, el, errorBox, fill } from './dom.js';
import { fmtDur, fmtTime, plural, zoneName } from './format.js';
import { isMergeID, MAX_MERGE, mergeBar, mergeMembers } from './merge.js';
import { buildModel, MARKER_LEGEND } from './model.js';
import { DISPLAYS, idWithMode, LINKS, modeOfID } from './modes.js';
import { navigate, pageToken } from './nav.js';
import { axisTicks, closeGroup, collapsible, computeVisible, dragZoom, draw, drawMinimap, onRowsClick, onRowsKey, refresh, reveal, schedule, select, setZoom, updateURL } from './timeline.js';
import { isTruncation, truncationBanner } from './truncation.js';
/** @import { ApiResponse, JaegerTrace, TraceModel, TraceView } from './types.js' */

/** @type {TraceView | null} the live trace view, or null */
export let view = null;

/** teardownTrace ends the trace page's work when another page is drawn. */
export function teardownTrace() {
  if (view && view.cleanup) view.cleanup();
  view = null;
}

/**
 * showTrace loads a trace and draws its page.
 * @param {string} id the trace ID of the URL (a display ID, a trace ID or a merged view's ID)
 * @param {URLSearchParams} params the page's URL parameters: span, event, collapsed
 * @param {number} token the page's token (pageToken)
 * @returns {Promise<void>}
 */
export async function showTrace(id, params, token) {
  fill(app(), el('p', { class: 'note', text: 'Loading the trace…' }));
  if (!/^[0-9a-fA-F]{1,32}$/.test(id) && !isMergeID(id)) {
    fill(app(), el('div', { class: 'msg error', attrs: { role: 'alert' } }, el('h3', { text: 'Bad trace ID' }),
      el('div', { text: `"${id}" is not a trace ID: it should be up to 32 hexadecimal digits, as the search results link them, ` +
        `or a merged view: 2 to ${MAX_MERGE} such IDs of 32 digits each, concatenated.` })));
    return;
  }
  /** @type {ApiResponse<JaegerTrace[]>} */
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
  renderTrace(id, buildModel(tr), params, tr);
}

/**
 * copyLink puts the page's URL (which holds the view) on the clipboard and says so on the button.
 * @param {HTMLButtonElement} btn
 */
function copyLink(btn) {
  const done = (/** @type {string} */ text) => { btn.textContent = text; setTimeout(() => { btn.textContent = 'Copy link'; }, 2000); };
  const url = location.href;
  if (navigator.clipboard && navigator.clipboard.writeText) {
    navigator.clipboard.writeText(url).then(() => done('Copied'), () => { window.prompt('Copy the link:', url); });
  } else {
    window.prompt('Copy the link:', url);
  }
}

/**
 * downloadJSON saves the trace as Jaeger's API answers it ({"data": [trace]}), the file Jaeger
 * UI's "Upload JSON" opens.
 * @param {string} id
 * @param {JaegerTrace} raw
 */
function downloadJSON(id, raw) {
  const blob = new Blob([JSON.stringify({ data: [raw] }, null, 2)], { type: 'application/json' });
  const a = el('a', { href: URL.createObjectURL(blob), attrs: { download: `trace-${id.replace(/[^0-9a-zA-Z_-]/g, '_')}.json` } });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}

/**
 * renderTrace draws the trace page of model and makes it the live view.
 * @param {string} id
 * @param {TraceModel} model
 * @param {URLSearchParams} params
 * @param {JaegerTrace} raw the trace as the API answered it (Download JSON)
 * @param {string} id
 * @param {TraceModel} model
 * @param {URLSearchParams} params
 */
function renderTrace(id, model, params, raw) {
  const mode = modeOfID(id);
  const collapsed = params.get('collapsed') === 'all' ? new Set(collapsible(model).map(n => n.id))
    : new Set((params.get('collapsed') || '').split(',').filter(Boolean));
  /** @type {TraceView} */
  const v = {
    id, model, mode, collapsed, visible: [], selected: null, selectedLog: null,
    rowsEl: null, spacer: null, detail: null, frame: 0, cleanup: null, drawn: null, critical: null, criticalEl: null, history: null, gantt: null,
    zoom: null, axisTl: null, minimap: null, urlState: new Map(), initial: params,
  };
  // zoom=<from>-<to>: the range shown, µs after the trace's start.
  const zm = /^(\d+)-(\d+)$/.exec(params.get('zoom') || '');
  if (zm) v.zoom = { from: model.t0 + Number(zm[1]), to: model.t0 + Number(zm[2]) };
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
    el('button', { class: 'copy-link', text: 'Copy link', title: 'Copy the link of this view (the URL holds it)', onclick: e => copyLink(/** @type {HTMLButtonElement} */ (e.currentTarget)) }),
    el('button', { class: 'download-json', text: 'Download JSON', title: "The trace in Jaeger's JSON format (Jaeger UI opens it)", onclick: () => downloadJSON(id, raw) }),
    el('button', { class: 'expand-all', text: 'Expand all', onclick: () => { collapsed.clear(); refresh(v, true); } }),
    el('button', { class: 'collapse-all', text: 'Collapse all', onclick: () => {
      for (const n of collapsible(model)) collapsed.add(n.id);
      refresh(v, true);
    } }));
  const plain = model.warnings.filter(w => !isTruncation(w));
  const warnings = plain.length ? el('div', { class: 'msg' }, plain.map(w => el('div', { text: w }))) : null;

  v.axisTl = axisTicks(model, v.zoom);
  v.axisTl.title = 'Drag across the axis to zoom in';
  const resetZoom = el('button', { class: 'zoom-reset', text: 'Reset zoom', onclick: () => setZoom(v, null) });
  resetZoom.hidden = !v.zoom;
  const axis = el('div', { class: 'axis' }, el('div', { class: 'lbl' },
    el('span', { text: `From ${fmtTime(model.t0)} ${zoneName()}`, title: `Rows are objects; the timeline starts at ${fmtTime(model.t0)} ${zoneName()}` }), resetZoom), v.axisTl);
  dragZoom(v, v.axisTl, () => v.zoom || { from: model.t0, to: model.t1 });
  v.minimap = el('div', { class: 'minimap', title: 'The whole trace: drag to zoom in' });
  dragZoom(v, v.minimap, () => ({ from: model.t0, to: model.t1 }));
  const mmRow = el('div', { class: 'overview' }, el('div', { class: 'olbl', text: 'Overview' }), v.minimap);
  v.spacer = el('div', { class: 'spacer-rows' });
  v.rowsEl = el('div', { class: 'rows', attrs: { role: 'tree' } }, v.spacer);
  v.detail = el('aside', { class: 'detail' });
  v.detail.hidden = true;
  v.gantt = el('div', { class: 'gantt' }, mmRow, axis, v.rowsEl);
  // A merged view's critical path runs over its members as one graph: a step of a member that
  // follows nothing linked is "unexplained".
  v.criticalEl = el('details', { class: 'critical' }, el('summary', { text: 'Critical path: loading…' }));
  // The URL keeps the critical path panel open (critical=open).
  if (params.get('critical') === 'open') { v.criticalEl.open = true; v.urlState.set('critical', 'open'); }
  v.criticalEl.addEventListener('toggle', () => {
    if (v.criticalEl.open) v.urlState.set('critical', 'open'); else v.urlState.delete('critical');
    updateURL(v);
  });
  const legend = el('div', { class: 'legend', attrs: { 'aria-label': 'Legend of the markers' } },
    MARKER_LEGEND.map(([cls, text]) => el('span', { class: 'item' },
      el('span', { class: cls === 'critical' ? 'mk critical' : `mk ${cls}`, attrs: { 'aria-hidden': 'true' } }), el('span', { text }))));
  fill(app(), bar, legend, merged ? mergeBar(v) : null, truncationBanner(model.warnings.filter(isTruncation)), warnings, v.criticalEl,
    el('div', { class: 'tracebody' }, v.gantt, v.detail));
  loadCritical(v);

  const onScroll = () => schedule(v);
  v.rowsEl.addEventListener('scroll', onScroll, { passive: true });
  window.addEventListener('resize', onScroll);
  // Escape closes the side panel (its Close button), wherever the focus is on the page.
  const onKey = (/** @type {KeyboardEvent} */ e) => {
    if (e.key !== 'Escape' || !v.detail || v.detail.hidden) return;
    const close = /** @type {HTMLElement | null} */ (v.detail.querySelector('button.close'));
    if (close) { e.preventDefault(); close.click(); }
  };
  document.addEventListener('keydown', onKey);
  v.cleanup = () => { closeGroup(); window.removeEventListener('resize', onScroll); document.removeEventListener('keydown', onKey); cancelAnimationFrame(v.frame); };
  v.rowsEl.addEventListener('click', e => onRowsClick(v, e));
  v.rowsEl.addEventListener('keydown', e => onRowsKey(v, e));

  computeVisible(v);
  drawMinimap(v);
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
