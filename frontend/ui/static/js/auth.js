// Sign-in: the API may require a bearer token. The token is kept in the tab's sessionStorage
// (this tab only) and sent with the UI's API calls; an answer 401 asks for it.
import { el } from './dom.js';
import { navigate, showPage } from './nav.js';
/** @import { ApiError } from './types.js' */

const TOKEN_KEY = 'kelemetry.token';

/**
 * storedToken is the token of this tab's session ('' when none).
 * @returns {string}
 */
export function storedToken() {
  try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch (_) { return ''; }
}

/**
 * authHeaders sends the session's token with the UI's API calls.
 * @returns {Record<string, string>}
 */
export function authHeaders() {
  const tok = storedToken();
  return tok ? { Authorization: `Bearer ${tok}` } : {};
}

/**
 * needSignIn answers a 401: a token that was refused is forgotten, the sign-in form shown, and
 * the returned error (status 401) ends the caller's work.
 * @returns {ApiError}
 */
export function needSignIn() {
  const refused = storedToken() !== '';
  try { sessionStorage.removeItem(TOKEN_KEY); } catch (_) { /* storage disabled */ }
  showSignIn(refused);
  const err = /** @type {ApiError} */ (new Error(refused ? 'The token was refused. Sign in again.' : 'Sign in: the Kelemetry API requires a token.'));
  err.status = 401;
  return err;
}

/**
 * showSignIn shows (once) a small form over the page asking for the API token; the token is
 * kept in sessionStorage (this tab only) and the page reloads its data.
 * @param {boolean} refused whether the session's token was refused
 */
function showSignIn(refused) {
  if (document.getElementById('signin')) return;
  const input = el('input', { name: 'token', type: 'password', autocomplete: 'current-password', required: true,
    placeholder: 'API token', style: { width: '100%', boxSizing: 'border-box', margin: '0.5em 0' } });
  const form = el('form', { class: 'signin-form', attrs: { 'aria-label': 'Sign in' },
    style: { background: '#fff', color: '#222', padding: '1.2em 1.5em', borderRadius: '6px', minWidth: '18em', maxWidth: '26em',
      boxShadow: '0 4px 24px rgba(0,0,0,0.3)' } },
  el('h2', { text: 'Sign in', style: { marginTop: '0' } }),
  el('p', { text: refused ? 'The token was refused. Enter a valid API token.' : 'The Kelemetry API requires a token (ask your administrator).' }),
  input,
  el('button', { class: 'primary', type: 'submit', text: 'Sign in' }));
  form.addEventListener('submit', e => {
    e.preventDefault();
    const tok = input.value.trim();
    if (!tok) return;
    try { sessionStorage.setItem(TOKEN_KEY, tok); } catch (_) { /* storage disabled: nothing to keep */ }
    hideSignIn();
    showPage();
  });
  const overlay = el('div', { id: 'signin', attrs: { role: 'dialog', 'aria-modal': 'true' },
    style: { position: 'fixed', inset: '0', background: 'rgba(0,0,0,0.45)', display: 'flex', alignItems: 'center', justifyContent: 'center', zIndex: '1000' } }, form);
  document.body.append(overlay);
  input.focus();
}

function hideSignIn() {
  const o = document.getElementById('signin');
  if (o) o.remove();
}

/**
 * A plain link to /redirect would be followed without the token: with one, followRedirect (a
 * click handler of the document) resolves the redirect with fetch (same origin, so the
 * Authorization header is kept) and opens the trace page it names.
 * @param {MouseEvent} e
 */
export function followRedirect(e) {
  const a = e.target instanceof Element ? /** @type {HTMLAnchorElement | null} */ (e.target.closest('a[href^="/redirect"]')) : null;
  if (!a || !storedToken() || e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey) return;
  e.preventDefault();
  fetch(a.getAttribute('href'), { headers: authHeaders() }).then(resp => {
    if (resp.status === 401) { needSignIn(); return; }
    const u = new URL(resp.url);
    if (u.origin === location.origin && u.pathname.startsWith('/trace/')) navigate(u.pathname + u.search);
    else location.href = a.href;
  }).catch(() => { location.href = a.href; });
}
