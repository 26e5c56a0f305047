/*
 * The server's JSON API: same-origin fetch with the session cookie, the CSRF
 * token on every change, and errors as ApiError.
 */

import { route, session, view } from './ui_state.js';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export async function api(method, path, body) {
  const opt = { method, headers: { Accept: 'application/json' }, credentials: 'same-origin',
                cache: 'no-store' };
  if (body !== undefined) {
    opt.headers['Content-Type'] = 'application/json';
    opt.body = JSON.stringify(body);
  }
  if (method !== 'GET' && session.csrf)
    opt.headers['X-CSRF-Token'] = session.csrf;
  let res;
  try {
    res = await fetch(path, opt);
  } catch (e) {
    throw new ApiError(0, 'network', 'The server could not be reached.');
  }
  if (res.status === 204)
    return null;
  let data = null;
  try {
    data = await res.json();
  } catch (e) {
    data = null;
  }
  if (!res.ok) {
    const err = (data && data.error) || {};
    const e = new ApiError(res.status, err.code || 'http_' + res.status,
                           err.message || 'The server answered ' + res.status + '.');
    if (res.status === 401 && path !== '/ui/session') {
      session.me = null;
      session.csrf = null;
      view.flash = { tone: 'warn', text: 'Your session has ended. Sign in again.' };
      route();   /* redraws the header too, so back at the sign-in page */
    }
    throw e;
  }
  return data;
}

/* GET that yields null on 404 instead of throwing. */
export async function maybe(path) {
  try {
    return await api('GET', path);
  } catch (e) {
    if (e.status === 404)
      return null;
    throw e;
  }
}
