// Kelemetry web UI: a search page and a trace page over the frontend's HTTP API.
// Plain ES modules, no dependencies, no build step: this entry module routes between the pages
// of js/ (search.js, trace.js). Data is only ever put into the page as text.
'use strict';

import { followRedirect } from './js/auth.js';
import { splitDiff } from './js/diff.js';
import { app, el, errorBox, fill } from './js/dom.js';
import { localTime, setLocalTime, zoneName } from './js/format.js';
import { navigate, pageToken, setRouter, startPage } from './js/nav.js';
import { parseResource, parseTimeInput, showSearch } from './js/search.js';
import { showTrace, teardownTrace, view } from './js/trace.js';
import { showChanges, stopTail } from './js/changes.js';

// route draws the page of the current URL.
function route() {
  const token = startPage();
  teardownTrace();
  stopTail();
  const path = location.pathname;
  const params = new URLSearchParams(location.search);
  let run;
  try {
    run = path.startsWith('/trace/') ? showTrace(safeDecode(path.slice('/trace/'.length)), params, token)
      : path === '/changes' ? showChanges(params, token)
      : showSearch(params, token);
  } catch (e) {
    run = Promise.reject(e);
  }
  Promise.resolve(run).catch(e => {
    if (token !== pageToken) return;
    fill(app(), errorBox('The page failed', e));
  });
}

// safeDecode undoes percent-encoding, keeping malformed input as it is (showTrace rejects it).
function safeDecode(s) { try { return decodeURIComponent(s); } catch (_) { return s; } }

document.addEventListener('click', followRedirect);
document.addEventListener('click', e => {
  const a = e.target instanceof Element ? e.target.closest('a[data-nav]') : null;
  if (!a || e.defaultPrevented || e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey || e.altKey) return;
  e.preventDefault();
  navigate(a.getAttribute('href'));
});
window.addEventListener('popstate', route);

// The header's switch between UTC (the default, as audit logs and kubectl speak) and the
// browser's zone; the choice is kept in localStorage and the page is drawn again.
function timeSwitch() {
  const tz = document.querySelector('header.top .tz');
  if (!tz) return;
  const label = () => `times in ${zoneName()}`;
  const btn = el('button', { class: 'tz', type: 'button', text: label(), title: 'Switch between UTC and your local time',
    attrs: { 'aria-pressed': String(localTime()) } });
  btn.addEventListener('click', () => {
    setLocalTime(!localTime());
    btn.textContent = label();
    btn.setAttribute('aria-pressed', String(localTime()));
    route();
  });
  tz.replaceWith(btn);
}
timeSwitch();

/**
 * The test hooks (window.kelemetryUI).
 * @typedef {object} TestHooks
 * @property {() => number} rowCount the rows of the trace not hidden by a collapsed ancestor
 * @property {() => number} renderedRows the rows in the page
 * @property {() => number} criticalSteps the critical path's steps, -1 before it loaded
 * @property {() => number} historyShown
 * @property {typeof splitDiff} splitDiff
 * @property {typeof parseResource} parseResource
 * @property {(s: string) => string | null} parseTimeInput the time as RFC 3339, null when it is none
 */

// Test hooks: the browser tests read these; they change nothing.
/** @type {Window & {kelemetryUI?: TestHooks}} */ (window).kelemetryUI = {
  rowCount: () => (view ? view.visible.length : 0),
  renderedRows: () => document.querySelectorAll('.row').length,
  criticalSteps: () => (view && view.critical ? view.critical.steps.length : -1),
  // historyShown is the slider position whose object is shown (-1 before the first answer).
  historyShown: () => (view && view.history ? view.history.shown : -1),
  splitDiff, parseResource, parseTimeInput: s => { const d = parseTimeInput(s); return d ? d.toISOString() : null; },
};

setRouter(route);
route();
