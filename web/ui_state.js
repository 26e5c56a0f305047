/*
 * What the UI remembers between pages. Shared values live in objects because
 * another module cannot assign to an imported binding.
 */

export const session = { me: null, csrf: null };
export const drafts = {};       /* unsent review comments by promotion id */
export const view = {
  seq: 0,                       /* bumps on every navigation; stale async renders give up */
  pollTimer: null,
  flash: null,                  /* a one-shot notice shown on the next page render */
};

/* app.js registers the router here, so that pages and the API wrapper can
 * re-render without importing app.js (which imports them). */
let router = null;

export function setRouter(fn) {
  router = fn;
}

export function route() {
  return router();
}

export function hasRole(r) {
  const roles = (session.me && session.me.roles) || [];
  return roles.includes(r) || roles.includes('admin');
}

export function stopPoll() {
  if (view.pollTimer) {
    clearTimeout(view.pollTimer);
    view.pollTimer = null;
  }
}
