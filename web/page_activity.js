/* #/activity: the audit log, newest first (admins: the server refuses anyone else). */

import { api } from './ui_api.js';
import { enc, h } from './ui_dom.js';
import { shortDigest } from './ui_format.js';
import { hasRole, view } from './ui_state.js';
import { versionLink } from './ui_version.js';
import { mono, mount, notice, row, section, table, when } from './ui_widgets.js';

const PAGE = 200;
const MAX_PAGES = 25;

/* Every entry, oldest first, page by page; the newest 200 of them are shown. */
async function loadAll() {
  let items = [];
  let token = null;
  for (let i = 0; i < MAX_PAGES; i++) {
    const r = await api('GET', '/api/v1/audit?limit=' + PAGE +
                        (token ? '&page_token=' + enc(token) : ''));
    items = items.concat(r.items || []);
    token = r.next_page_token;
    if (!token)
      break;
  }
  return items;
}

function target(e) {
  const t = String(e.target || '');
  const action = String(e.action || '');
  if (/^promotion\./.test(action) && /^[a-z0-9_]+$/.test(t))
    return h('a', { href: '#/promotions/' + enc(t) }, t);
  if (/^dataset\./.test(action) && /^sha256:[0-9a-f]{64}$/.test(t))
    return h('a', { href: '#/datasets/' + enc(t), title: t }, shortDigest(t));
  const m = /^([a-z0-9][a-z0-9._-]*)(?:\/v(\d+)|\/([a-z0-9][a-z0-9-]*))?$/.exec(t);
  if (m && /^(model|version|alias|policy|retention)\./.test(action)) {
    const model = h('a', { href: '#/models/' + enc(m[1]) }, m[1]);
    if (m[2])
      return h('span', null, model, ' ', versionLink(m[1], Number(m[2])));
    return m[3] ? h('span', null, model, ' / ' + m[3]) : model;
  }
  return t ? mono(t) : h('span', { class: 'muted' }, '—');
}

export async function renderActivity(seq) {
  const crumbs = h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' },
                   h('span', null, 'Activity'));
  if (!hasRole('admin')) {
    mount(crumbs, h('h1', null, 'Activity'),
          notice('info', 'The activity feed is the audit log, which only admins read. Ask an ' +
                         'admin, or follow a model\'s history on its page.', 'activity-admins'));
    return;
  }
  const items = (await loadAll()).slice().sort((x, y) => (y.seq || 0) - (x.seq || 0))
    .slice(0, 200);
  if (seq !== view.seq)
    return;
  const head = ['When', 'Who', 'Action', 'On'];
  const rows = items.map((e) => row(head, [
    when(e.at || e.created_at), e.actor || e.by || '—',
    h('code', { class: 'mono' }, String(e.action || '—')), target(e),
  ], { 'data-seq': e.seq }));
  mount(crumbs,
        h('div', { class: 'page-head' },
          h('div', null, h('h1', null, 'Activity'),
            h('p', { class: 'muted' }, 'The audit log, newest first.'))),
        section('Recent changes', 'activity',
                rows.length ? table('activity-table', head, rows, 'Audit log, newest first')
                            : h('p', { class: 'empty' }, 'Nothing yet.')));
}
