/* #/models/NAME/compare/A/B: two versions side by side: each metric with its direction
 * and change, parameters, inputs and outputs, and the files that changed. */

import { api, maybe } from './ui_api.js';
import { enc, h } from './ui_dom.js';
import { fmtBytes, shortDigest } from './ui_format.js';
import { schemaDiff } from './page_promotion_schema.js';
import { valueText } from './page_version.js';
import { view } from './ui_state.js';
import { metricsCompare, versionLink } from './ui_version.js';
import { badge, mono, mount, row, section, table } from './ui_widgets.js';

function same(x, y) {
  return JSON.stringify(x) === JSON.stringify(y);
}

function paramsDiff(a, b) {
  const keys = [...new Set([...Object.keys(a.params || {}), ...Object.keys(b.params || {})])]
    .sort();
  if (keys.length === 0)
    return h('p', { class: 'empty' }, 'Neither version records parameters.');
  const head = ['Parameter', 'v' + a.version, 'v' + b.version, 'Change'];
  return table('params-diff', head, keys.map((k) => {
    const x = (a.params || {})[k], y = (b.params || {})[k];
    return row(head, [h('strong', null, k), valueText(x), valueText(y),
                      same(x, y) ? h('span', { class: 'muted' }, 'same')
                        : badge('skipped', x === undefined ? 'added'
                          : y === undefined ? 'removed' : 'changed')],
               { 'data-param': k, class: same(x, y) ? null : 'changed' });
  }), 'Parameters');
}

function filesDiff(a, b, fa, fb) {
  const one = (v, f) => {
    const items = (f && f.items) || [];
    if (items.length === 0 && v.artifact)
      return [{ path: '(artifact)', size: v.artifact.size, digest: v.artifact.digest }];
    return items;
  };
  const ma = new Map(one(a, fa).map((f) => [f.path, f]));
  const mb = new Map(one(b, fb).map((f) => [f.path, f]));
  const paths = [...new Set([...ma.keys(), ...mb.keys()])].sort();
  const changed = paths.filter((p) => !ma.has(p) || !mb.has(p) ||
                                      ma.get(p).digest !== mb.get(p).digest);
  if (changed.length === 0)
    return h('p', { class: 'empty', id: 'files-same' }, 'The same files, byte for byte.');
  const head = ['Path', 'Change', 'v' + a.version, 'v' + b.version];
  const cell = (f) => f ? h('span', null, fmtBytes(f.size), ' ',
                            mono(shortDigest(f.digest), f.digest))
    : h('span', { class: 'muted' }, '—');
  return h('div', null,
           h('p', { class: 'muted small' }, changed.length + ' of ' + paths.length +
             ' files differ.'),
           table('files-diff', head, changed.slice(0, 500).map((p) => row(head, [
             mono(p), badge('skipped', !ma.has(p) ? 'added' : !mb.has(p) ? 'removed'
                                                                        : 'changed'),
             cell(ma.get(p)), cell(mb.get(p))], { 'data-file': p })), 'Files changed'));
}

export async function renderCompare(seq, name, na, nb) {
  const base = '/api/v1/models/' + enc(name);
  const vb = (n) => base + '/versions/' + enc(n);
  const [model, a, b, fa, fb] = await Promise.all([
    api('GET', base), api('GET', vb(na)), api('GET', vb(nb)), maybe(vb(na) + '/files'),
    maybe(vb(nb) + '/files')]);
  if (seq !== view.seq)
    return;
  mount(
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' },
      h('a', { href: '#/models' }, 'Models'), ' / ',
      h('a', { href: '#/models/' + enc(name) }, name), ' / ', h('span', null, 'compare')),
    h('div', { class: 'page-head' },
      h('div', null,
        h('h1', null, name + ': v' + a.version + ' against v' + b.version),
        h('p', { class: 'muted' }, 'Changes read from ', versionLink(name, a.version), ' to ',
          versionLink(name, b.version), '. Directions come from the model\'s metric ' +
          'directions.'))),
    section('Metrics', 'metrics', metricsCompare(model, null, a, b, 'metrics-table')),
    section('Description', 'descriptions',
            h('dl', { class: 'facts' },
              h('dt', null, versionLink(name, a.version)),
              h('dd', null, a.description || h('span', { class: 'muted' }, 'none')),
              h('dt', null, versionLink(name, b.version)),
              h('dd', null, b.description || h('span', { class: 'muted' }, 'none')))),
    section('Parameters', 'params', paramsDiff(a, b)),
    section('Inputs and outputs', 'schema', schemaDiff({ gates: [] }, b, a)),
    section('Files changed', 'files', filesDiff(a, b, fa, fb)));
}
