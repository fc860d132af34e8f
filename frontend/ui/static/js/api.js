// API calls: GET a JSON answer of the Kelemetry server, with the session's token.
import { authHeaders, needSignIn } from './auth.js';
import { str } from './format.js';
/** @import { ApiError } from './types.js' */

/**
 * apiGet fetches JSON and turns every failure into an Error with a user-facing message and status
 * (an ApiError). A 401 asks for a token (needSignIn).
 * @param {string} url
 * @returns {Promise<any>} the parsed answer; callers type it as the ApiResponse of their endpoint
 */
export async function apiGet(url) {
  let resp;
  try {
    resp = await fetch(url, { headers: Object.assign({ Accept: 'application/json' }, authHeaders()) });
  } catch (e) {
    const err = /** @type {ApiError} */ (new Error(`Could not reach the Kelemetry server (${e && e.message ? e.message : e}). Check that it is running and reachable.`));
    err.status = 0;
    throw err;
  }
  if (resp.status === 401) throw needSignIn();
  let body = null;
  const text = await resp.text();
  try { body = text ? JSON.parse(text) : null; } catch (_) { body = null; }
  if (!resp.ok) {
    let msg = '';
    if (body && Array.isArray(body.errors) && body.errors.length) msg = body.errors.map(e => str(e && e.msg)).join('; ');
    else msg = text.trim().slice(0, 500);
    const err = /** @type {ApiError} */ (new Error(msg || resp.statusText || 'no details'));
    err.status = resp.status;
    throw err;
  }
  if (body === null) {
    const err = /** @type {ApiError} */ (new Error('The server answered with something that is not JSON.'));
    err.status = resp.status;
    throw err;
  }
  return body;
}
