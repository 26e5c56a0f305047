/* #/search?q=…&metric=…&tag=…: models by name or description, versions by metric and
 * tag filters (the server's ?metric= and ?tag=), datasets by name, location or digest. */

import { api, maybe } from './ui_api.js';
import { enc, h } from './ui_dom.js';
import { fmtNum, shortDigest } from './ui_format.js';
import { view } from './ui_state.js';
import { versionLink } from './ui_version.js';
import { mount, notice, row, section, table, tagsList } from './ui_widgets.js';

const MAX_MODELS = 25;

export function searchParams() {
  const i = location.hash.indexOf('?');
  return new URLSearchParams(i >= 0 ? location.hash.slice(i + 1) : '');
}

function form(q, metrics, tags) {
  const input = (id, label, value, help) => [
    h('label', { for: id }, label),
    h('input', { type: 'text', id, name: id, value: value || '', 'aria-describedby': id + '-help',
                 autocomplete: 'off' }),
    h('p', { class: 'muted small', id: id + '-help' }, help)];
  const f = h('form', { class: 'search-form', id: 'search-form', role: 'search' },
              input('search-q', 'Text', q, 'A model name or description, a dataset name or ' +
                    'digest.'),
              input('search-metric', 'Metric filters', metrics.join(' '),
                    'Like auc>=0.9 p95_ms<50 (all must hold).'),
              input('search-tag', 'Tag filters', tags.join(' '), 'Like team:risk.'),
              h('div', { class: 'actions' },
                h('button', { type: 'submit', class: 'btn btn-primary' }, 'Search')));
  f.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const p = new URLSearchParams();
    const qv = f.querySelector('#search-q').value.trim();
    if (qv)
      p.set('q', qv);
    for (const m of f.querySelector('#search-metric').value.split(/\s+/).filter(Boolean))
      p.append('metric', m);
    for (const t of f.querySelector('#search-tag').value.split(/\s+/).filter(Boolean))
      p.append('tag', t);
    location.hash = '#/search?' + p.toString();
  });
  return f;
}

export async function renderSearch(seq) {
  const sp = searchParams();
  const q = (sp.get('q') || '').trim();
  const metrics = sp.getAll('metric');
  const tags = sp.getAll('tag');
  const ql = q.toLowerCase();
  const head = h('div', { class: 'page-head' }, h('div', null, h('h1', null, 'Search')));
  if (!q && metrics.length === 0 && tags.length === 0) {
    mount(head, section('Find', 'find', form(q, metrics, tags)));
    return;
  }
  const all = ((await api('GET', '/api/v1/models?limit=200')).items) || [];
  const models = q ? all.filter((m) => m.name.includes(ql) ||
                                       (m.description || '').toLowerCase().includes(ql)) : all;
  /* Versions: the server filters each model's versions; the text narrows them further. */
  const filters = metrics.map((m) => 'metric=' + enc(m)).concat(tags.map((t) => 'tag=' + enc(t)));
  const scan = (filters.length ? (q && models.length ? models : all) : all).slice(0, MAX_MODELS);
  let err = null;
  const lists = await Promise.all(scan.map((m) =>
    api('GET', '/api/v1/models/' + enc(m.name) + '/versions?limit=50' +
        (filters.length ? '&' + filters.join('&') : ''))
      .then((r) => (r.items || []).map((v) => Object.assign({ model: m.name }, v)))
      .catch((e) => {
        err = e;
        return [];
      })));
  const versions = [].concat(...lists);
  const matchesText = (v) => !q || (v.model || '').includes(ql) ||
    [(v.description || ''), (v.run_id || ''), ...Object.values(v.tags || {})]
      .some((x) => String(x).toLowerCase().includes(ql));
  const vfound = filters.length ? versions.filter((v) => models.some((m) => m.name === v.model) ||
                                                         matchesText(v))
    : versions.filter((v) => q && matchesText(v) && !models.some((m) => m.name === v.model));
  const datasets = new Map();
  if (q) {
    for (const v of versions)
      for (const d of v.datasets || [])
        if ([d.name, d.uri, d.digest].some((x) => String(x || '').toLowerCase().includes(ql)))
          datasets.set(d.digest, d);
    if (/^sha256:[0-9a-f]{64}$/.test(q) && !datasets.has(q)) {
      const d = await maybe('/api/v1/datasets/' + enc(q));
      if (d)
        datasets.set(d.digest, d);
    }
  }
  if (seq !== view.seq)
    return;
  const mhead = ['Model', 'Description', 'Latest'];
  const vhead = ['Model', 'Version', 'Metrics', 'Tags'];
  const dhead = ['Dataset', 'Location', 'Digest'];
  mount(head,
        section('Find', 'find', form(q, metrics, tags)),
        err ? notice('bad', 'Some versions could not be searched: ' + err.message) : null,
        section('Models', 'found-models', models.length
          ? table('found-models-table', mhead, models.slice(0, 100).map((m) => row(mhead, [
            h('a', { href: '#/models/' + enc(m.name), class: 'strong-link' }, m.name),
            m.description || h('span', { class: 'muted' }, '—'),
            m.latest_version ? versionLink(m.name, m.latest_version) : '—'],
                                                                               { 'data-model': m.name })),
                  'Models found')
          : h('p', { class: 'empty' }, 'No model matches.')),
        section('Versions', 'found-versions', vfound.length
          ? table('found-versions-table', vhead, vfound.slice(0, 200).map((v) => row(vhead, [
            h('a', { href: '#/models/' + enc(v.model) }, v.model), versionLink(v.model, v.version),
            Object.keys(v.metrics || {}).sort().map((k) => k + ' ' + fmtNum(v.metrics[k]))
              .join(' · ') || '—',
            tagsList(v.tags)], { 'data-version': v.model + '/' + v.version })), 'Versions found')
          : h('p', { class: 'empty' }, filters.length ? 'No version passes these filters.'
                                                       : 'Add a metric or tag filter to search ' +
                                                         'versions.')),
        section('Datasets', 'found-datasets', datasets.size
          ? table('found-datasets-table', dhead, [...datasets.values()].map((d) => row(dhead, [
            h('a', { href: '#/datasets/' + enc(d.digest) }, d.name || shortDigest(d.digest)),
            d.uri || '—', h('code', { class: 'mono', title: d.digest }, shortDigest(d.digest))])),
                  'Datasets found')
          : h('p', { class: 'empty' }, 'No dataset matches.')));
}
