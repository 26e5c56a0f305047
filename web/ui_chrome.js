/* The header: navigation and who is signed in. */

import { api } from './ui_api.js';
import { add, clear, h } from './ui_dom.js';
import { hasRole, route, session, view } from './ui_state.js';

export function renderChrome() {
  const nav = document.getElementById('nav');
  const who = document.getElementById('who');
  clear(nav);
  clear(who);
  if (!session.me)
    return;
  const cur = location.hash || '#/queue';
  const link = (href, label, match) =>
    h('a', { href, class: 'nav-link', 'aria-current': match.test(cur) ? 'page' : null }, label);
  const q = h('input', { type: 'search', id: 'nav-search', name: 'q', class: 'nav-search',
                         placeholder: 'Search', 'aria-label': 'Search models, versions and datasets',
                         autocomplete: 'off' });
  const form = h('form', { role: 'search', class: 'nav-form', id: 'nav-search-form' }, q);
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const v = q.value.trim();
    location.hash = '#/search' + (v ? '?q=' + encodeURIComponent(v) : '');
  });
  add(nav, [link('#/queue', 'Review queue', /^#\/(queue|promotions)/),
            link('#/models', 'Models', /^#\/(models|datasets)/),
            hasRole('admin') ? link('#/activity', 'Activity', /^#\/activity/) : null,
            link('#/search', 'Search', /^#\/search/), form]);
  add(who, [
    h('span', { class: 'who-name', title: 'roles: ' + session.me.roles.join(', ') },
      h('span', { class: 'who-label' }, 'Signed in as '), h('strong', null, session.me.name),
      h('span', { class: 'who-roles' }, ' (' + session.me.roles.join(', ') + ')')),
    h('button', { type: 'button', class: 'btn btn-small', id: 'sign-out', onclick: signOut },
      'Sign out'),
  ]);
}

async function signOut() {
  try {
    await api('DELETE', '/ui/session');
  } catch (e) {
    /* the session is gone either way */
  }
  session.me = null;
  session.csrf = null;
  view.flash = { tone: 'info', text: 'You have signed out.' };
  renderChrome();
  if (location.hash !== '#/queue')
    location.hash = '#/queue';
  else
    route();
}
