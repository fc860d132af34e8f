// Element helpers: elements are built with el (data only ever goes in as text) and replaced with
// fill; errorBox is the page's error message.

/**
 * The properties el sets: class, text (textContent), dataset, style (through the CSSOM), attrs
 * (attributes; null and undefined ones are left out), on<event> handlers, and any other property
 * of the element (or else an attribute). Properties undefined, null or false are left out.
 * @typedef {{
 *   [key: string]: any,
 *   class?: string,
 *   text?: string | number,
 *   title?: string,
 *   dataset?: Object<string, string>,
 *   style?: Partial<CSSStyleDeclaration>,
 *   attrs?: Object<string, string | null | undefined>,
 * }} Props
 */

/**
 * A child of el and fill: nodes, text, and arrays of children (nested as deep as needed); null,
 * undefined and false are left out. (A type alias cannot name itself in JSDoc: arrays hold any.)
 * @typedef {Node | string | number | boolean | null | undefined | any[]} Child
 */

/**
 * el builds an element. props: class, text, title, href, value, type, dataset {...}, attrs {...},
 * on<event> handlers; children: nodes, strings, arrays, null.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Props | null} [props]
 * @param {...Child} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function el(tag, props, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k === 'dataset') Object.assign(e.dataset, v);
    // Styles go through the CSSOM: the Content-Security-Policy allows no inline style attributes.
    else if (k === 'style') Object.assign(e.style, v);
    else if (k === 'attrs') for (const [a, av] of Object.entries(v)) { if (av !== undefined && av !== null) e.setAttribute(a, av); }
    else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else if (k in e && k !== 'list') {
      try { e[k] = v; } catch (_) { e.setAttribute(k, v); }
    } else e.setAttribute(k, v);
  }
  appendAll(e, children);
  return e;
}

/**
 * @param {Element} e
 * @param {Child[]} children
 */
function appendAll(e, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) appendAll(e, c);
    else e.append(c instanceof Node ? c : String(c));
  }
}

/**
 * fill replaces e's children; arrays are flattened and null, undefined and false left out.
 * @template {Element} E
 * @param {E} e
 * @param {...Child} children
 * @returns {E}
 */
export function fill(e, ...children) {
  e.replaceChildren();
  appendAll(e, children);
  return e;
}

/** @type {() => HTMLElement} app is the page's main element. */
export const app = () => document.getElementById('app');

/**
 * errorBox explains a failure: title, what the HTTP status of an ApiError says, its message, and
 * tips what to do.
 * @param {string} title
 * @param {any} err an ApiError or any other thrown value
 * @param {string[]} [tips]
 * @returns {HTMLDivElement}
 */
export function errorBox(title, err, tips) {
  const status = err && typeof err.status === 'number' ? err.status : -1;
  let lead = title;
  if (status >= 500) lead = `${title}: the backend failed (HTTP ${status}).`;
  else if (status >= 400) lead = `${title}: the server rejected the request (HTTP ${status}).`;
  else if (status === 0) lead = `${title}: the server is unreachable.`;
  return el('div', { class: 'msg error', attrs: { role: 'alert' } },
    el('h3', { text: lead }),
    el('div', { class: 'detail-text', text: err && err.message ? err.message : String(err) }),
    tips && tips.length ? el('ul', {}, tips.map(t => el('li', { text: t }))) : null);
}
