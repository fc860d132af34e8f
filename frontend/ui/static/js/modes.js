// Display modes: how a trace is drawn (display) and which links are followed (link). A display
// ID (as the search returns it) carries its mode: "ff", the display digit, the link digit.

/** @import { Mode } from './types.js' */

/** @type {string[]} the displays, in the order the switches offer them */
export const DISPLAYS = ['tracing', 'grouped', 'tree', 'timeline'];
/** @type {Record<string, string>} */
const DISPLAY_DIGIT = { tree: '0', timeline: '1', tracing: '2', grouped: '3' };
/** @type {{key: string, digit: string, label: string}[]} the link modes */
export const LINKS = [
  { key: 'none', digit: '0', label: 'only found objects' },
  { key: 'full tree', digit: '1', label: 'full tree' },
  { key: 'ancestors', digit: '2', label: 'ancestors' },
  { key: 'descendants', digit: '4', label: 'descendants' },
];

/**
 * modeName is the service name of a mode in the Jaeger API: "tracing", "tree [full tree]".
 * @param {string} display
 * @param {string} link
 * @returns {string}
 */
export function modeName(display, link) { return !link || link === 'none' ? display : `${display} [${link}]`; }

/**
 * modeOfID reads the mode of a display ID; null for other IDs.
 * @param {string} id
 * @returns {Mode | null}
 */
export function modeOfID(id) {
  if (id.length !== 32 || !/^ff/i.test(id)) return null;
  const display = Object.keys(DISPLAY_DIGIT).find(k => DISPLAY_DIGIT[k] === id[2]);
  const link = LINKS.find(l => l.digit === id[3]);
  return display && link ? { display, link: link.key } : null;
}

/**
 * idWithMode is the display ID id in another mode.
 * @param {string} id a display ID
 * @param {string} display
 * @param {string} link
 * @returns {string}
 */
export function idWithMode(id, display, link) {
  const l = LINKS.find(x => x.key === link);
  return id.slice(0, 2) + DISPLAY_DIGIT[display] + (l ? l.digit : '0') + id.slice(4);
}
