/* #/models/NAME: each alias with its split, delivery and history (and a
 * rollback for deployers), then the versions (archived and deleted ones too,
 * marked, and those trained on withdrawn data flagged) with the storage the
 * model uses. */

import { api, maybe } from './ui_api.js';
import { enc, h } from './ui_dom.js';
import { fmtBytes, fmtExact, routesText, shortDigest } from './ui_format.js';
import { markdownCard } from './ui_markdown.js';
import { publisherText, scanBadge, versionLink } from './ui_version.js';
import { hasRole, route, view } from './ui_state.js';
import { badge, mount, row, section, splitBar, table, tagsList, when } from './ui_widgets.js';

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

/* Routes with every version a link to its page. */
function routesLinks(model, routes) {
  if (!routes || routes.length === 0)
    return 'no traffic';
  return routes.map((r, i) => [i ? ' · ' : '', versionLink(model, r.version), ' ' + r.weight + '%']);
}

function compareForm(model, versions) {
  const ns = versions.map((v) => v.version).sort((x, y) => x - y);
  if (ns.length < 2)
    return null;
  const pick = (id, label, sel) => [
    h('label', { for: id }, label),
    h('select', { id, name: id }, ns.map((n) => h('option', { value: String(n),
                                                              selected: n === sel ? true : null },
                                                    'v' + n)))];
  const f = h('form', { class: 'compare-form', id: 'compare-form' },
              pick('compare-a', 'Compare', ns[ns.length - 2]),
              pick('compare-b', 'with', ns[ns.length - 1]),
              h('button', { type: 'submit', class: 'btn' }, 'Compare'));
  f.addEventListener('submit', (ev) => {
    ev.preventDefault();
    location.hash = '#/models/' + enc(model) + '/compare/' + f.querySelector('#compare-a').value +
      '/' + f.querySelector('#compare-b').value;
  });
  return f;
}

function directionsList(dirs) {
  const keys = Object.keys(dirs || {}).sort();
  if (keys.length === 0)
    return null;
  return h('p', { class: 'muted small', id: 'metric-directions' }, 'Better: ',
           keys.map((k, i) => [i ? ' · ' : '', h('strong', null, k),
                               dirs[k] === 'lower' ? ' lower' : ' higher']));
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
    h('span', null, routesLinks(model, e.routes),
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
             lkg ? h('strong', { id: 'lkg-' + a.alias }, versionLink(model, lkg.version))
                 : 'none',
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
  const [model, aliases, versions, usage, readme] = await Promise.all([
    api('GET', base), api('GET', base + '/aliases'),
    api('GET', base + '/versions?status=all&limit=50'), api('GET', base + '/usage'),
    maybe(base + '/readme'),
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

  const routedBy = (n) => items.filter((a) => (a.routes || []).some((r) => r.version === n))
    .map((a) => a.alias);
  const vhead = ['Version', 'Status', 'Scan', 'Published', 'By', 'Metrics', 'Tags', 'Aliases',
                 'Bad for'];
  const vrows = (versions.items || []).map((v) => row(vhead, [
    h('strong', null, versionLink(model.name, v.version)),
    h('span', null, badge(v.status || 'ready'),
      v.status === 'deleted' && v.deletion_reason
        ? h('span', { class: 'muted small' }, ' ' + v.deletion_reason) : null,
      (v.withdrawn_datasets || []).length
        ? h('span', { class: 'badge badge-bad', 'data-flag': 'withdrawn',
                      title: 'trained on withdrawn data: ' +
                             v.withdrawn_datasets.map(shortDigest).join(', ') },
            'withdrawn data') : null),
    scanBadge(v.scan),
    when(v.created_at), publisherText(v),
    Object.keys(v.metrics || {}).length
      ? h('ul', { class: 'plain small' }, Object.keys(v.metrics).sort().map((k) =>
        h('li', null, k + ' ', h('strong', null, fmtExact(v.metrics[k])))))
      : h('span', { class: 'muted' }, '—'),
    tagsList(v.tags),
    routedBy(v.version).length ? routedBy(v.version).join(', ') : h('span', { class: 'muted' }, '—'),
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
        tagsList(model.tags), directionsList(model.metric_directions)),
      h('button', { type: 'button', class: 'btn', onclick: () => route() }, 'Refresh')),
    readme && markdownCard(readme.doc)
      ? h('section', { class: 'card model-card', id: 'model-card', 'aria-labelledby': 'card-h' },
          h('h2', { id: 'card-h' }, 'Model card'), markdownCard(readme.doc))
      : null,
    items.length ? items.map((a, i) => aliasCard(model.name, a, histories[i], versionsByN))
                 : h('section', { class: 'card' }, h('p', { class: 'empty' }, 'No aliases yet.')),
    section('Versions', 'versions', usageLine, compareForm(model.name, versions.items || []),
            vrows.length ? table('versions-table', vhead, vrows, 'Versions')
                         : h('p', { class: 'empty' }, 'No versions yet.')));
}
