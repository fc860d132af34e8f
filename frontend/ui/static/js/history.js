// The object at any moment: the object panel's time slider. Its positions are the object's
// stored writes in the trace's range (GET /api/objects/history); each shows the object
// reconstructed just after that write (GET /api/objects/at) and its changes since a second
// moment (GET /api/objects/diff).
import { apiGet } from './api.js';
import { changeTable } from './diff.js';
import { el, errorBox, fill } from './dom.js';
import { fmtTime, isoMicros, plural, str, zoneName } from './format.js';
import { jsonTree } from './json-tree.js';
import { updateURL } from './timeline.js';
import { view } from './trace.js';
/** @import { ApiResponse, Change, HistoryMoment, HistoryState, ObjectHistory, ObjectRef, ObjectState, StateSource, TraceView } from './types.js' */

/**
 * objectQuery names an object in the parameters of the native API.
 * @param {Required<ObjectRef>} k
 * @returns {URLSearchParams}
 */
function objectQuery(k) {
  const q = new URLSearchParams();
  for (const f of ['cluster', 'group', 'resource', 'namespace', 'name']) q.set(f, k[f]);
  return q;
}

/**
 * historyPanel is a folded section of the object panel; it loads when opened.
 * @param {TraceView} v
 * @param {Required<ObjectRef>} k the object row's object
 * @returns {HTMLDetailsElement}
 */
export function historyPanel(v, k) {
  const body = el('div', { class: 'history-body' });
  const d = el('details', { class: 'history' }, el('summary', { text: 'Object at any moment' }), body);
  let loaded = false;
  d.addEventListener('toggle', () => {
    if (!d.open) { v.urlState.delete('moment'); v.urlState.delete('compare'); updateURL(v); return; }
    if (loaded) return;
    loaded = true;
    loadHistory(v, k, body);
  });
  // A link with the slider's moment opens the panel at it.
  if (v.initial.has('moment') && v.initial.get('span') === (v.selected && v.selected.id)) d.open = true;
  return d;
}

/**
 * loadHistory lists the object's stored writes in the trace's range and draws the slider over
 * them, the object at the chosen moment and its changes since a second one.
 * @param {TraceView} v
 * @param {Required<ObjectRef>} k
 * @param {HTMLElement} box
 * @returns {Promise<void>}
 */
async function loadHistory(v, k, box) {
  fill(box, el('p', { class: 'note-inline', text: 'Loading the stored history…' }));
  const q = objectQuery(k);
  q.set('from', isoMicros(v.model.t0));
  q.set('to', isoMicros(v.model.t1 + 1));
  /** @type {ObjectHistory} */
  let h;
  try {
    /** @type {ApiResponse<ObjectHistory>} */
    const resp = await apiGet('/api/objects/history?' + q);
    h = resp && resp.data && typeof resp.data === 'object' ? resp.data : {};
  } catch (e) {
    if (view !== v) return;
    fill(box, errorBox('Loading the history failed', e));
    return;
  }
  if (view !== v || !box.isConnected) return;
  const moments = Array.isArray(h.moments) ? h.moments.filter(m => m && typeof m.time === 'string') : [];
  if (!moments.length) {
    fill(box, el('div', { class: 'note-inline', text: 'No writes of this object are stored in the trace\'s range.' }));
    return;
  }
  const label = (m, i) => `${i + 1}. ${fmtTime(Date.parse(m.time) * 1000)} ${str(m.event)}`;
  // The URL's moment and compare (1-based) when the link was made for this row.
  const fromURL = (/** @type {string} */ key, /** @type {number} */ def) => {
    const n = Number(v.initial.get(key));
    return v.initial.get('span') === (v.selected && v.selected.id) && Number.isInteger(n) && n >= 1 && n <= moments.length ? n - 1 : def;
  };
  const slider = el('input', { type: 'range', class: 'history-slider', min: 0, max: moments.length - 1, step: 1, value: fromURL('moment', moments.length - 1),
    attrs: { 'aria-label': 'Moment of the object\'s history' } });
  const from = el('select', { class: 'history-from', attrs: { 'aria-label': 'Compare with the moment' } },
    moments.map((m, i) => el('option', { value: String(i), text: label(m, i), selected: i === fromURL('compare', 0) })));
  const moment = el('div', { class: 'history-moment' });
  const out = el('div', { class: 'history-state' });
  const diffBox = el('div', { class: 'history-diff' });
  /** @type {HistoryState} */
  const st = { seq: 0, timer: 0, shown: -1 };
  v.history = st;
  const show = async () => {
    if (view !== v || !box.isConnected) return; // the panel was closed or the page left
    const seq = ++st.seq;
    const i = Number(slider.value), j = Number(from.value);
    v.urlState.set('moment', String(i + 1));
    v.urlState.set('compare', String(j + 1));
    updateURL(v);
    const m = moments[i];
    fill(moment, el('strong', { text: `Moment ${i + 1} of ${moments.length}` }), ` · ${fmtTime(Date.parse(m.time) * 1000)} ${zoneName()} · `,
      el('span', { class: 'event', text: str(m.event) }),
      m.snapshot ? el('span', { class: 'badge', text: 'snapshot' }) : m.changes ? el('span', { class: 'badge', text: plural(m.changes, 'change') }) : null,
      m.gap ? el('span', { class: 'badge warn', text: 'history incomplete' }) : null);
    const at = objectQuery(k);
    at.set('time', m.time);
    const a = moments[Math.min(i, j)], b = moments[Math.max(i, j)];
    const dq = objectQuery(k);
    dq.set('from', a.time);
    dq.set('to', b.time);
    /** @type {ApiResponse<ObjectState>} */
    let state;
    /** @type {ApiResponse<{changes: Change[]}> | null} */
    let changes;
    try {
      [state, changes] = await Promise.all([apiGet('/api/objects/at?' + at), i === j ? null : apiGet('/api/objects/diff?' + dq)]);
    } catch (e) {
      if (seq !== st.seq || view !== v) return;
      fill(out, errorBox('Reconstructing the object failed', e));
      fill(diffBox);
      st.shown = i;
      return;
    }
    if (seq !== st.seq || view !== v) return;
    /** @type {Partial<ObjectState>} */
    const o = state && state.data ? state.data : {};
    /** @type {Partial<StateSource>} */
    const src = o.source || {};
    const gaps = Array.isArray(o.gaps) ? o.gaps : [];
    const untracked = Array.isArray(o.untracked) ? o.untracked : [];
    fill(out,
      el('div', { class: 'history-source note-inline', text: `From the ${str(src.snapshotKind) || 'stored'} snapshot of ${fmtTime(Date.parse(src.snapshotTime) * 1000)} ${zoneName()}` +
        ` and ${plural(Number(src.writesApplied) || 0, 'write')} after it` + (src.resourceVersion ? ` · resourceVersion ${src.resourceVersion}` : '') }),
      gaps.length ? el('div', { class: 'history-gaps' }, gaps.map(g => el('div', { class: 'box message',
        text: `${fmtTime(Date.parse(g.from) * 1000)} – ${fmtTime(Date.parse(g.to) * 1000)}: ${g.path ? g.path + ': ' : ''}${str(g.message)}` }))) : null,
      untracked.length ? el('div', { class: 'note-inline', text: `Not followed by the stored history: ${untracked.join(', ')}` }) : null,
      jsonTree(JSON.stringify(o.body === undefined ? null : o.body)));
    const cs = changes && changes.data && Array.isArray(changes.data.changes) ? changes.data.changes : [];
    fill(diffBox,
      el('h3', { text: i === j ? 'Changes' : `Changes from moment ${Math.min(i, j) + 1} to ${Math.max(i, j) + 1}` }),
      i === j ? el('div', { class: 'note-inline', text: 'Pick another moment to compare with.' })
        : cs.length ? changeTable(cs) : el('div', { class: 'note-inline', text: 'No field changes between these moments.' }));
    st.shown = i;
    momentLine(v, m);
  };
  const later = () => { clearTimeout(st.timer); st.timer = setTimeout(show, 120); };
  slider.addEventListener('input', later);
  from.addEventListener('change', later);
  fill(box,
    el('div', { class: 'history-controls' }, el('span', { class: 'edge', text: fmtTime(Date.parse(moments[0].time) * 1000) }), slider,
      el('span', { class: 'edge', text: fmtTime(Date.parse(moments[moments.length - 1].time) * 1000) })),
    moment,
    el('label', { class: 'history-compare' }, 'Compare with ', from),
    h.truncated ? el('div', { class: 'msg truncated', text: str(h.truncated) }) : null,
    diffBox, el('h3', { text: 'The object' }), out);
  show();
}

/**
 * momentLine marks the slider's moment on the chart with a vertical line (none: m null).
 * @param {TraceView} v
 * @param {HistoryMoment | null} m
 */
export function momentLine(v, m) {
  let line = /** @type {HTMLElement | null} */ (v.gantt ? v.gantt.querySelector('.moment-line') : null);
  const t = m ? Date.parse(m.time) * 1000 : NaN;
  if (!isFinite(t)) { if (line) line.remove(); return; }
  if (!line) v.gantt.append(line = el('div', { class: 'moment-line', attrs: { 'aria-hidden': 'true' } }));
  const from = v.zoom ? v.zoom.from : v.model.t0, to = v.zoom ? v.zoom.to : v.model.t1;
  const f = Math.min(Math.max((t - from) / (to - from), 0), 1);
  line.style.left = `calc(var(--label) + (100% - var(--label)) * ${f.toFixed(5)})`;
  line.title = `${fmtTime(t)} ${zoneName()}: the moment the object panel shows`;
}
