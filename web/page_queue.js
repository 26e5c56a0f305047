/* #/queue: promotions waiting for approval, and the recent others. */

import { api } from './ui_api.js';
import { enc, h } from './ui_dom.js';
import { approvalsOf, missingGroup, promoTitle } from './ui_promotion.js';
import { route, view } from './ui_state.js';
import { badge, mount, row, section, table, when } from './ui_widgets.js';
import { versionLink } from './ui_version.js';

function byNewest(a, b) {
  return String(b.created_at).localeCompare(String(a.created_at));
}

export async function renderQueue(seq) {
  const [waiting, recent] = await Promise.all([
    api('GET', '/api/v1/promotions?state=awaiting_approval&limit=200'),
    api('GET', '/api/v1/promotions?limit=100'),
  ]);
  if (seq !== view.seq)
    return;
  const items = (waiting.items || []).slice().sort(byNewest);
  const head = ['Promotion', 'Model', 'Version', 'Alias', 'Requested by', 'Age',
                'Approvals needed', 'You'];
  const rows = items.map((p) => {
    const a = approvalsOf(p);
    const mayDecide = !p.viewer || p.viewer.can_decide;
    return row(head, [
      h('a', { href: '#/promotions/' + enc(p.id), class: 'strong-link' }, promoTitle(p)),
      h('a', { href: '#/models/' + enc(p.model) }, p.model),
      versionLink(p.model, p.version),
      p.alias,
      p.created_by,
      when(p.created_at),
      h('span', { class: 'needed' },
        h('strong', null, a.needed + ' more'),
        h('span', { class: 'muted' }, ' (' + a.given + ' of ' + a.required + ' given)'),
        missingGroup(p) ? h('span', { class: 'block muted small missing-group' },
                            'still needed: ' + missingGroup(p)) : null),
      mayDecide ? h('span', { class: 'may-decide' }, 'may decide')
                : h('span', { class: 'read-only muted small', title: p.viewer.reason },
                    'read-only: ' + p.viewer.reason),
    ], { 'data-promotion': p.id, 'data-may-decide': mayDecide ? 'yes' : 'no' });
  });
  const others = (recent.items || []).filter((p) => p.state !== 'awaiting_approval')
    .sort(byNewest).slice(0, 20);
  const rhead = ['Promotion', 'State', 'Requested by', 'Updated'];
  const rrows = others.map((p) => row(rhead, [
    h('a', { href: '#/promotions/' + enc(p.id) }, promoTitle(p)),
    badge(p.state),
    p.created_by,
    when(p.updated_at || p.created_at),
  ], { 'data-promotion': p.id }));

  mount(
    h('div', { class: 'page-head' },
      h('div', null,
        h('h1', null, 'Review queue'),
        h('p', { class: 'muted' }, 'Promotions waiting for approval, newest first.')),
      h('button', { type: 'button', class: 'btn', onclick: () => route() }, 'Refresh')),
    h('section', { class: 'card', id: 'queue', 'aria-label': 'Waiting for approval' },
      items.length
        ? table('queue-table', head, rows, 'Promotions waiting for approval')
        : h('p', { class: 'empty', id: 'queue-empty' }, 'Nothing is waiting for review.')),
    section('Recent promotions', 'recent',
            others.length ? table('recent-table', rhead, rrows, 'Recent promotions')
                          : h('p', { class: 'empty' }, 'No other promotions yet.')));
}
