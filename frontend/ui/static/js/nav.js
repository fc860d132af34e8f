// Navigation between the UI's pages without reloading: the entry module (app.js) registers its
// router, which draws the page of the current URL.

/** @type {number} bumps on every navigation; late answers of old pages are dropped */
export let pageToken = 0;

/** @type {() => void} */
let router = () => {};

/**
 * setRouter registers the function that draws the page of the current URL.
 * @param {() => void} fn
 */
export function setRouter(fn) { router = fn; }

/**
 * startPage starts drawing a new page: the answers of the pages before it are dropped.
 * @returns {number} the new page's token, the value pageToken keeps while the page is current
 */
export function startPage() { return ++pageToken; }

/**
 * navigate opens url (same origin) as a page of the UI, adding it to the history or, with
 * replace, in place of the current entry.
 * @param {string} url
 * @param {boolean} [replace]
 */
export function navigate(url, replace) {
  if (replace) history.replaceState(null, '', url); else history.pushState(null, '', url);
  showPage();
}

/** showPage draws the page of the current URL again (after a sign-in). */
export function showPage() { router(); }
