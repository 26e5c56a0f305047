/* #/models/NAME: each alias with its split, delivery and history (and a
 * rollback for deployers), then the versions (archived and deleted ones too,
 * marked, and those trained on withdrawn data flagged) with the storage the
 * model uses. */

import { api } from './ui_api.js';
import { enc, h } from './ui_dom.js';
import { fmtBytes, fmtNum, routesText, shortDigest } from './ui_format.js';
import { hasRole, route, view } from './ui_state.js';
import { badge, mount, row, section, splitBar, table, tagsList, when } from './ui_widgets.js';
import { scanBadge } from './page_promotion_evidence.js';

/* Mark the history entry that made the last-known-good version whole. */
function lkgGeneration(history, lkg) {
  if (!lkg)
    return null;
  for (const e of history) {
    const r = e.routes || [];
    if (r.length === 1 && r[0].version === lkg.version && r[0].weight === 100)
      return e.generation;
  }
  return null;
}

function rollbackDialog(model, a, onDone) {
  const newest = (a.routes || []).reduce((m, r) => Math.max(m, r.version), 0);
  const reason = h('textarea', { id: 'rollback-reason', rows: '3', maxlength: '1000',
                                 required: true });
  const err = h('div', { class: 'form-error', id: 'rollback-error', role: 'alert' });
  const ok = h('button', { type: 'button', class: 'btn btn-bad', id: 'rollback-confirm' },
               'Roll back');
  const cancel = h('button', { type: 'button', class: 'btn', id: 'rollback-cancel' }, 'Cancel');
  const dlg = h('dialog', { class: 'dialog', id: 'rollback-dialog',
                            'aria-labelledby': 'rollback-title' },
                h('h2', { id: 'rollback-title' }, 'Roll back ' + a.alias + '?'),
                h('p', null, 'All traffic of ', h('strong', null, model + ' / ' + a.alias),
                  ' moves to the most recent known-good version other than v' + newest +
                  (a.last_known_good && a.last_known_good.version !== newest
                    ? ' (v' + a.last_known_good.version + ')' : '') +
                  '. v' + newest + ' is marked bad for this alias, and any active promotion ' +
                  'ends as rolled back. No gates are checked.'),
                h('label', { for: 'rollback-reason' }, 'Reason (required)'), reason, err,
                h('div', { class: 'actions' }, cancel, ok));
  cancel.addEventListener('click', () => dlg.close());
  dlg.addEventListener('close', () => dlg.remove());
  ok.addEventListener('click', async () => {
    const why = reason.value.trim();
    if (!why) {
      err.textContent = 'Say why you roll back: a reason is required.';
      reason.focus();
      return;
    }
    ok.disabled = cancel.disabled = true;
    try {
      const na = await api('POST', '/api/v1/models/' + enc(model) + '/aliases/' + enc(a.alias) +
                           '/rollback', { reason: why });
      dlg.close();
      view.flash = { tone: 'good', text: 'Rolled back ' + a.alias + ': ' + routesText(na.routes) + '.' };
      onDone();
    } catch (e) {
      err.textContent = e.message;
      ok.disabled = cancel.disabled = false;
    }
  });
  document.body.append(dlg);
  dlg.showModal();
  reason.focus();
}

function aliasCard(model, a, history, versionsByN) {
  const lkg = a.last_known_good;
  const lkgGen = lkgGeneration(history, lkg);
  const gens = a.generation;
  const dhead = ['Gateway', 'State', 'Generation', 'Attempts', 'Last error', 'Acknowledged'];
  const drows = (a.deliveries || []).map((d) => row(dhead, [
    h('strong', null, d.gateway), badge(d.state),
    String(d.generation) + (d.generation !== gens ? ' (alias at ' + gens + ')' : ''),
    String(d.attempts),
    d.last_error ? h('span', { class: 'error-text' }, d.last_error)
                 : h('span', { class: 'muted' }, '—'),
    when(d.acked_at),
  ], { 'data-gateway': d.gateway }));
  const hhead = ['Gen.', 'Routes', 'Change', 'By', 'Reason', 'When'];
  const hrows = history.map((e) => row(hhead, [
    String(e.generation),
    h('span', null, routesText(e.routes),
      e.generation === lkgGen ? [' ', h('span', { class: 'badge badge-good lkg',
                                                   title: 'last known good' }, 'LKG')] : null),
    h('span', null, e.kind || '—',
      e.promotion ? [' ', h('a', { href: '#/promotions/' + enc(e.promotion), class: 'small' },
                            'promotion')] : null),
    e.by || '—',
    e.reason || h('span', { class: 'muted' }, '—'),
    when(e.at),
  ], { 'data-generation': e.generation, class: e.generation === lkgGen ? 'is-lkg' : null }));

  const canRollback = hasRole('deployer');
  const head = h('div', { class: 'alias-head' },
                 h('h2', { id: 'alias-' + a.alias + '-h' }, a.alias),
                 a.protected ? h('span', { class: 'pill', title: 'a policy protects this alias; ' +
                                           'it moves only through promotions' }, 'protected')
                             : null,
                 a.promotion ? h('a', { href: '#/promotions/' + enc(a.promotion),
                                        class: 'pill pill-info' }, 'promotion in progress')
                             : null,
                 h('span', { class: 'spacer' }),
                 canRollback
                   ? h('button', { type: 'button', class: 'btn btn-bad', id: 'rollback-' + a.alias,
                                   'aria-label': 'Roll back ' + a.alias + ' of ' + model,
                                   disabled: lkg ? null : true,
                                   title: lkg ? null : 'there is no known-good version to go to',
                                   onclick: () => rollbackDialog(model, a, () => route()) },
                       'Roll back…')
                   : null);
  return h('section', { class: 'card alias', id: 'alias-' + a.alias,
                        'aria-labelledby': 'alias-' + a.alias + '-h' },
           head,
           h('p', { class: 'muted' }, 'Generation ' + a.generation + ' · updated ',
             when(a.updated_at)),
           h('h3', null, 'Traffic split'),
           splitBar(a.routes),
           h('p', { class: 'lkg-line' }, 'Last known good: ',
             lkg ? h('strong', { id: 'lkg-' + a.alias }, 'v' + lkg.version) : 'none',
             lkg ? h('span', { class: 'muted' }, ' since ', when(lkg.since)) : null,
             (a.routes || []).some((r) => {
               const v = versionsByN[r.version];
               return v && (v.bad_for || []).includes(a.alias);
             }) ? [' · ', badge('failed', 'routes a version marked bad')] : null),
           h('h3', null, 'Delivery'),
           drows.length ? table('deliveries-table', dhead, drows, 'Delivery per gateway')
                        : h('p', { class: 'empty' }, 'No gateways deliver this alias.'),
           h('h3', null, 'History'),
           hrows.length ? table('history-table', hhead, hrows, 'Alias history')
                        : h('p', { class: 'empty' }, 'No history.'));
}

export async function renderModel(seq, name) {
  const base = '/api/v1/models/' + enc(name);
  const [model, aliases, versions, usage] = await Promise.all([
    api('GET', base), api('GET', base + '/aliases'),
    api('GET', base + '/versions?status=all&limit=50'), api('GET', base + '/usage'),
  ]);
  const items = aliases.items || [];
  const histories = await Promise.all(items.map((a) =>
    api('GET', base + '/aliases/' + enc(a.alias) + '/history?limit=20')
      .then((r) => r.items || [])));
  if (seq !== view.seq)
    return;
  const versionsByN = {};
  for (const v of versions.items || [])
    versionsByN[v.version] = v;

  const vhead = ['Version', 'Status', 'Published', 'By', 'Metrics', 'Tags', 'Bad for'];
  const vrows = (versions.items || []).map((v) => row(vhead, [
    h('strong', null, 'v' + v.version),
    h('span', null, badge(v.status || 'ready'),
      v.status === 'deleted' && v.deletion_reason
        ? h('span', { class: 'muted small' }, ' ' + v.deletion_reason) : null,
      v.scan && v.scan.verdict === 'clean' ? null : [' ', scanBadge(v.scan)],
      (v.withdrawn_datasets || []).length
        ? h('span', { class: 'badge badge-bad', 'data-flag': 'withdrawn',
                      title: 'trained on withdrawn data: ' +
                             v.withdrawn_datasets.map(shortDigest).join(', ') },
            'withdrawn data') : null),
    when(v.created_at), v.created_by,
    Object.keys(v.metrics || {}).length
      ? h('ul', { class: 'plain small' }, Object.keys(v.metrics).sort().map((k) =>
        h('li', null, k + ' ', h('strong', null, fmtNum(v.metrics[k])))))
      : h('span', { class: 'muted' }, '—'),
    tagsList(v.tags),
    (v.bad_for || []).length ? v.bad_for.join(', ') : h('span', { class: 'muted' }, '—'),
  ], { 'data-version': v.version, 'data-status': v.status || 'ready' }));
  const u = usage.versions || {};
  const usageLine = h('p', { class: 'muted', id: 'model-usage' },
    (u.ready || 0) + ' ready · ' + (u.archived || 0) + ' archived · ' + (u.deleted || 0) +
    ' deleted · ' + fmtBytes(usage.bytes) + ' stored (' + fmtBytes(usage.bytes_unique) +
    ' not shared with other models)');

  mount(
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' },
      h('a', { href: '#/models' }, 'Models'), ' / ', h('span', null, model.name)),
    h('div', { class: 'page-head' },
      h('div', null, h('h1', null, model.name),
        h('p', { class: 'muted' }, model.description || 'No description.',
          ' · by ' + (model.created_by || '—')),
        tagsList(model.tags)),
      h('button', { type: 'button', class: 'btn', onclick: () => route() }, 'Refresh')),
    items.length ? items.map((a, i) => aliasCard(model.name, a, histories[i], versionsByN))
                 : h('section', { class: 'card' }, h('p', { class: 'empty' }, 'No aliases yet.')),
    section('Versions', 'versions', usageLine,
            vrows.length ? table('versions-table', vhead, vrows, 'Versions')
                         : h('p', { class: 'empty' }, 'No versions yet.')));
}
