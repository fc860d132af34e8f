// Formatting: values as text, counts, times (UTC, or the browser's zone by the header's switch), durations (microseconds) and object
// names.
/** @import { ObjectRef } from './types.js' */

/**
 * str is v as text; undefined and null are ''.
 * @param {any} v
 * @returns {string}
 */
export function str(v) { return v === undefined || v === null ? '' : String(v); }

/**
 * plural counts: "1 object", "2 objects" (many: the plural when it is not word + 's').
 * @param {number} n
 * @param {string} word
 * @param {string} [many]
 * @returns {string}
 */
export function plural(n, word, many) { return `${n} ${n === 1 ? word : (many || word + 's')}`; }

/**
 * @param {number} n
 * @param {number} [w] digits, 2 when not given
 */
function pad(n, w) { return String(n).padStart(w || 2, '0'); }

/**
 * fmtTime formats Unix microseconds or a Date as "2026-11-29 17:09:30.123", in UTC or the
 * browser's zone (localTime; zoneName names it).
 * @param {number | Date} t
 * @returns {string}
 */
export function fmtTime(t) {
  const d = t instanceof Date ? t : new Date(Math.floor(t / 1000));
  if (isNaN(d.getTime())) return '?';
  if (localTime()) {
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
      `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
  }
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ` +
    `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}.${pad(d.getUTCMilliseconds(), 3)}`;
}

/** TIME_KEY holds the reader's choice of displayed times in localStorage: "local" or "utc". */
const TIME_KEY = 'kelemetry.times';

/**
 * localTime tells whether times are shown in the browser's zone (the header's switch) instead of
 * UTC, the default: audit logs, kubectl and the API speak UTC.
 * @returns {boolean}
 */
export function localTime() {
  try { return localStorage.getItem(TIME_KEY) === 'local'; } catch (_) { return false; }
}

/**
 * setLocalTime records the reader's choice of displayed times.
 * @param {boolean} on
 */
export function setLocalTime(on) {
  try { localStorage.setItem(TIME_KEY, on ? 'local' : 'utc'); } catch (_) { /* private mode: UTC */ }
}

/**
 * zoneName names the zone of the displayed times: "UTC", or the browser's ("CET", "GMT+1").
 * @returns {string}
 */
export function zoneName() {
  if (!localTime()) return 'UTC';
  try {
    const part = new Intl.DateTimeFormat(undefined, { timeZoneName: 'short' }).formatToParts(new Date()).find(p => p.type === 'timeZoneName');
    return part ? part.value : 'local time';
  } catch (_) { return 'local time'; }
}

/**
 * fmtRange formats a search range, to the second.
 * @param {number | Date} a
 * @param {number | Date} b
 * @returns {string}
 */
export function fmtRange(a, b) { return `${fmtTime(a).slice(0, 19)} – ${fmtTime(b).slice(0, 19)} ${zoneName()}`; }

/**
 * isoSeconds writes a Date as RFC 3339 in UTC, to the second.
 * @param {Date} d
 * @returns {string}
 */
export function isoSeconds(d) { return d.toISOString().replace(/\.\d{3}Z$/, 'Z'); }

/**
 * isoMicros writes Unix microseconds as RFC 3339 with microseconds.
 * @param {number} us
 * @returns {string}
 */
export function isoMicros(us) {
  const t = Math.floor(us);
  return new Date(Math.floor(t / 1000)).toISOString().replace(/Z$/, pad(((t % 1000) + 1000) % 1000, 3) + 'Z');
}

/**
 * fmtDur formats microseconds: "850µs", "1.5ms", "2.125s", "3m20s", "2h5m".
 * @param {number} us
 * @returns {string}
 */
export function fmtDur(us) {
  if (!isFinite(us)) return '?';
  const neg = us < 0; us = Math.abs(us);
  let s;
  if (us < 1000) s = `${Math.round(us)}µs`;
  else if (us < 1e6) s = `${+(us / 1000).toFixed(1)}ms`;
  else if (us < 60e6) s = `${+(us / 1e6).toFixed(us < 10e6 ? 3 : 2)}s`;
  else if (us < 3600e6) s = `${Math.floor(us / 60e6)}m${Math.round((us % 60e6) / 1e6)}s`;
  else s = `${Math.floor(us / 3600e6)}h${Math.round((us % 3600e6) / 60e6)}m`;
  return (neg ? '-' : '') + s;
}

/**
 * resourceLabel names a resource as resource.group ("deployments.apps", "pods").
 * @param {ObjectRef} o
 * @returns {string}
 */
export function resourceLabel(o) { return o.group ? `${o.resource}.${o.group}` : str(o.resource); }

/**
 * objectLabel names an object: "deployments.apps default/web", or "object" when unknown.
 * @param {ObjectRef | null | undefined} o
 * @returns {string}
 */
export function objectLabel(o) {
  if (!o || !o.resource) return 'object';
  const ns = o.namespace ? `${o.namespace}/` : '';
  return `${resourceLabel(o)} ${ns}${str(o.name)}`;
}
