/* #/models: every model with its aliases. */

import { api } from './ui_api.js';
import { enc, h } from './ui_dom.js';
import { routesText } from './ui_format.js';
import { view } from './ui_state.js';
import { mount, row, table } from './ui_widgets.js';
import { versionLink } from './ui_version.js';

export async function renderModels(seq) {
  const list = await api('GET', '/api/v1/models?limit=200');
  if (seq !== view.seq)
    return;
  const head = ['Model', 'Description', 'Latest', 'Aliases', 'Published by'];
  const rows = (list.items || []).map((m) => row(head, [
    h('a', { href: '#/models/' + enc(m.name), class: 'strong-link' }, m.name),
    m.description || h('span', { class: 'muted' }, '—'),
    m.latest_version ? versionLink(m.name, m.latest_version) : '—',
    (m.aliases || []).length
      ? h('ul', { class: 'plain' }, m.aliases.map((a) =>
        h('li', null, h('strong', null, a.alias), ': ', routesText(a.routes))))
      : h('span', { class: 'muted' }, 'none'),
    m.created_by,
  ]));
  mount(h('div', { class: 'page-head' }, h('h1', null, 'Models')),
        h('section', { class: 'card' },
          rows.length ? table('models-table', head, rows, 'Models')
                      : h('p', { class: 'empty' }, 'No models yet.')));
}
