/* The sign-in page: a pasted token is traded for a session cookie, or the identity provider
 * signs the user in ("Sign in with SSO"). */

import { api } from './ui_api.js';
import { renderChrome } from './ui_chrome.js';
import { h } from './ui_dom.js';
import { route, session } from './ui_state.js';
import { mount } from './ui_widgets.js';

export function renderSignIn() {
  const input = h('input', { id: 'token', name: 'token', type: 'password', autocomplete: 'off',
                             spellcheck: 'false', required: true,
                             'aria-describedby': 'token-help' });
  const err = h('div', { class: 'form-error', id: 'signin-error', role: 'alert' });
  const btn = h('button', { type: 'submit', class: 'btn btn-primary', id: 'sign-in' },
                'Sign in');
  const form = h('form', { class: 'signin', id: 'signin-form', novalidate: true },
                 h('h1', null, 'Sign in'),
                 h('p', { id: 'token-help', class: 'muted' },
                   'Paste an API token. It is traded for a session cookie; the page does not ' +
                   'keep the token.'),
                 h('label', { for: 'token' }, 'API token'), input, err,
                 h('div', { class: 'actions' }, btn,
                   // Single sign-on (API.md "Identity"): the server redirects to the
                   // identity provider; 404 when modelgated has no --oidc-issuer.
                   h('a', { href: '/ui/sso/login', class: 'btn', id: 'sign-in-sso' },
                     'Sign in with SSO')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    err.textContent = '';
    const token = input.value.trim();
    if (!token) {
      err.textContent = 'Paste a token first.';
      input.focus();
      return;
    }
    btn.disabled = true;
    try {
      const me = await api('POST', '/ui/session', { token });
      session.me = { name: me.name, roles: me.roles || [] };
      session.csrf = me.csrf;
      input.value = '';
      renderChrome();
      route();
    } catch (e) {
      err.textContent = e.status === 401 ? 'That token is unknown or was revoked.' : e.message;
      btn.disabled = false;
      input.focus();
    }
  });
  mount(form);
  input.focus();
}
