/* #/datasets/DIGEST: a dataset's lineage and the versions that used it. */

import { maybe } from './ui_api.js';
import { enc, h } from './ui_dom.js';
import { shortDigest } from './ui_format.js';
import { view } from './ui_state.js';
import { mono, mount, notice, row, section, table, when } from './ui_widgets.js';
import { versionLink } from './ui_version.js';

export async function renderDataset(seq, digest) {
  const base = '/api/v1/datasets/' + enc(digest);
  const [ds, users] = await Promise.all([maybe(base), maybe(base + '/versions')]);
  if (seq !== view.seq)
    return;
  const crumbs = h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' },
                   h('a', { href: '#/models' }, 'Models'), ' / ', h('span', null, 'dataset'));
  if (!ds) {
    mount(crumbs, h('h1', null, 'Dataset'), h('p', null, mono(digest)),
          notice('warn', 'This digest is not registered as a dataset, so its lineage is ' +
                         'unknown.'));
    return;
  }
  const link = (d) => h('li', null, h('a', { href: '#/datasets/' + enc(d), title: d },
                                        shortDigest(d)));
  const uhead = ['Model', 'Version', 'Role', 'Via'];
  const urows = ((users && users.items) || []).map((u) => row(uhead, [
    h('a', { href: '#/models/' + enc(u.model) }, u.model), versionLink(u.model, u.version), u.role || '—',
    (u.via || []).length ? h('ul', { class: 'plain' }, u.via.map(link))
                         : h('span', { class: 'muted' }, 'direct'),
  ]));
  mount(crumbs,
        h('div', { class: 'page-head' },
          h('div', null, h('h1', null, ds.name || 'Dataset'),
            h('p', { class: 'muted' }, ds.description || ''))),
        h('section', { class: 'card' },
          h('dl', { class: 'facts' },
            h('dt', null, 'Digest'), h('dd', null, mono(ds.digest)),
            h('dt', null, 'Location'), h('dd', null, ds.uri ? mono(ds.uri) : '—'),
            h('dt', null, 'Registered'), h('dd', null, when(ds.created_at)),
            h('dt', null, 'Derived from'),
            h('dd', null, (ds.parents || []).length
              ? h('ul', { class: 'plain' }, ds.parents.map(link)) : 'nothing registered'),
            h('dt', null, 'Used to derive'),
            h('dd', null, (ds.children || []).length
              ? h('ul', { class: 'plain' }, ds.children.map(link)) : 'nothing registered'))),
        section('Model versions trained or evaluated on it', 'dataset-users',
                urows.length ? table('users-table', uhead, urows, 'Versions using this dataset')
                             : h('p', { class: 'empty' }, 'None.')));
}
