/* #/models/NAME/versions/N: one version, all of it: what it is, its metrics, files,
 * what was read from its weights, its data and lineage, who signed and published it,
 * its scan, smoke tests and the aliases that route it. */

import { api, maybe } from './ui_api.js';
import { enc, h, localPath } from './ui_dom.js';
import { fmtBytes, fmtNum, shortDigest } from './ui_format.js';
import { schemaOf, vramInputs } from './page_promotion_schema.js';
import { view } from './ui_state.js';
import { metricsCompare, publisherText, scanBadge, smokeTable, versionLink } from './ui_version.js';
import { badge, mono, mount, row, section, table, tagsList, when } from './ui_widgets.js';

/* An object of plain values as a two-column table (params, metadata). */
export function kvTable(obj, id, caption) {
  const keys = Object.keys(obj || {}).sort();
  if (keys.length === 0)
    return h('p', { class: 'empty' }, 'None recorded.');
  const head = ['Name', 'Value'];
  return table(id, head, keys.map((k) => row(head, [
    h('strong', null, k), valueText(obj[k])], { 'data-key': k })), caption);
}

export function valueText(v) {
  if (typeof v === 'number')
    return fmtNum(v);
  if (typeof v === 'string')
    return v;
  if (v === null || v === undefined)
    return h('span', { class: 'muted' }, '—');
  return h('code', { class: 'mono' }, JSON.stringify(v));
}

export function datasetsWithLineage(ds) {
  if (!ds || ds.length === 0)
    return h('p', { class: 'empty' }, 'No datasets recorded.');
  const head = ['Dataset', 'Role', 'Location', 'Digest'];
  return table('datasets-table', head, ds.map((d) => row(head, [
    h('a', { href: '#/datasets/' + enc(d.digest), title: 'lineage of ' + d.digest },
      d.name || shortDigest(d.digest)),
    d.role || '—', d.uri ? mono(d.uri) : h('span', { class: 'muted' }, '—'),
    mono(shortDigest(d.digest), d.digest)], { 'data-dataset': d.digest })), 'Datasets');
}

function scanSection(scan) {
  if (!scan || typeof scan !== 'object')
    return h('p', { class: 'empty', id: 'scan-none' }, 'No safety scan recorded for this version.');
  const findings = Array.isArray(scan.findings) ? scan.findings : [];
  const head = ['Severity', 'Rule', 'Where', 'Detail'];
  return h('div', null,
           h('p', null, 'Verdict: ', scanBadge(scan),
             scan.scanner ? h('span', { class: 'muted small' }, ' · ' + String(scan.scanner))
                          : null,
             scan.scanned_at || scan.at ? [' · ', when(scan.scanned_at || scan.at)] : null),
           findings.length
             ? table('scan-table', head, findings.map((f) => row(head, [
               badge(/crit|high|error/.test(String(f.severity)) ? 'failed' : 'pending',
                     String(f.severity || '—')),
               String(f.rule || f.kind || f.id || '—'),
               f.path || f.file || f.member ? mono(String(f.path || f.file || f.member))
                                            : h('span', { class: 'muted' }, '—'),
               String(f.detail || f.message || f.description || '')])), 'Scan findings')
             : h('p', { class: 'muted' }, 'No findings.'));
}

function signatureText(v) {
  const sig = v.signature;
  if (!sig)
    return h('span', null, badge('failed', 'unsigned'));
  return h('span', null, badge('passed', 'signed'), ' key ',
           mono(String(sig.keyid || '').slice(0, 12) + '…', sig.keyid),
           localPath(sig.url) ? [' ', h('a', { href: sig.url, class: 'small' }, 'bundle')] : null);
}

function introspectionFacts(v) {
  const i = v.introspection;
  if (!i)
    return h('p', { class: 'empty' }, 'Nothing was read from the artifact\'s weights.');
  return h('dl', { class: 'facts', id: 'introspection-facts' },
           h('dt', null, 'Format'), h('dd', null, String(i.format || '—')),
           h('dt', null, 'Tensors'), h('dd', null, fmtNum(i.tensors)),
           h('dt', null, 'Parameters'), h('dd', null, fmtNum(i.parameters)),
           h('dt', null, 'Weight bytes'), h('dd', null, fmtNum(i.weights_bytes) + ' (' +
                                            fmtBytes(i.weights_bytes) + ')'),
           h('dt', null, 'Dtypes'),
           h('dd', null, Object.keys(i.dtypes || {}).sort().map((k) => k + ' ' +
                                                             fmtNum(i.dtypes[k])).join(' · ') ||
                         '—'));
}

function routing(v, aliases) {
  const using = (aliases || []).filter((a) => (a.routes || []).some((r) => r.version ===
                                                                          v.version));
  if (using.length === 0)
    return h('p', { class: 'empty', id: 'routing-none' }, 'No alias routes this version.');
  return h('ul', { class: 'plain', id: 'routing' }, using.map((a) => {
    const r = a.routes.find((x) => x.version === v.version);
    return h('li', { 'data-alias': a.alias }, h('strong', null, a.alias), ': ' + r.weight +
             '% of traffic', (v.bad_for || []).includes(a.alias)
      ? [' ', badge('failed', 'marked bad')] : null);
  }));
}

function ioTable(v) {
  const sc = schemaOf(v);
  if (!sc)
    return h('p', { class: 'empty' }, 'No input/output schema (no ONNX graph was read and none ' +
             'was declared).');
  const head = ['', 'Name', 'Type', 'Shape'];
  const rows = [];
  for (const [kind, list] of [['input', sc.inputs], ['output', sc.outputs]])
    for (const e of list || [])
      rows.push(row(head, [kind, mono(e.name), String(e.dtype || '—'),
                           Array.isArray(e.shape) ? '[' + e.shape.map((d) =>
                             typeof d === 'number' && d < 0 ? '?' : String(d)).join(', ') + ']'
                             : '?'], { 'data-io': kind + ':' + e.name }));
  return h('div', null, h('p', { class: 'muted small' }, sc.source + '.'),
           table('io-table', head, rows, 'Inputs and outputs'));
}

function filesTable(files) {
  const items = (files && files.items) || [];
  if (items.length === 0)
    return h('p', { class: 'empty' }, 'No file list (the artifact is a single file).');
  const head = ['Path', 'Size', 'Digest'];
  return table('files-table', head, items.slice(0, 500).map((f) => row(head, [
    mono(f.path), fmtBytes(f.size), mono(shortDigest(f.digest), f.digest)])), 'Files');
}

export async function renderVersion(seq, name, n) {
  const base = '/api/v1/models/' + enc(name);
  const vbase = base + '/versions/' + enc(n);
  const [model, v, aliases, files, smoke] = await Promise.all([
    api('GET', base), api('GET', vbase), maybe(base + '/aliases'), maybe(vbase + '/files'),
    maybe(vbase + '/smoke-tests?limit=10')]);
  if (seq !== view.seq)
    return;
  const prev = model.latest_version && v.version > 1 ? v.version - 1 : null;
  const src = v.source || {};
  mount(
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' },
      h('a', { href: '#/models' }, 'Models'), ' / ',
      h('a', { href: '#/models/' + enc(name) }, name), ' / ', h('span', null, 'v' + v.version)),
    h('div', { class: 'page-head' },
      h('div', null,
        h('h1', null, h('span', { id: 'version-title' }, name + ' v' + v.version), ' ',
          badge(v.status || 'ready')),
        h('p', { class: 'muted', id: 'version-description' },
          v.description || 'No description.'),
        h('p', { class: 'muted small' }, 'Published by ', publisherText(v), ' ',
          when(v.created_at))),
      prev ? h('a', { class: 'btn', id: 'compare-prev',
                      href: '#/models/' + enc(name) + '/compare/' + prev + '/' + v.version },
               'Compare with v' + prev) : null),
    v.status === 'deleted' && v.deletion_reason
      ? h('div', { class: 'notice notice-bad' }, 'Deleted: ' + v.deletion_reason) : null,
    section('Overview', 'overview',
            h('dl', { class: 'facts' },
              h('dt', null, 'Image'), h('dd', null, mono(v.image)),
              h('dt', null, 'Artifact'),
              h('dd', null, mono(shortDigest(v.artifact && v.artifact.digest),
                                 v.artifact && v.artifact.digest),
                v.artifact && typeof v.artifact.size === 'number'
                  ? ' ' + fmtBytes(v.artifact.size) : null),
              h('dt', null, 'Run'), h('dd', null, mono(v.run_id)),
              h('dt', null, 'Source'),
              h('dd', null, mono(src.commit), src.repo ? h('span', { class: 'muted small block' },
                                                            src.repo) : null),
              h('dt', null, 'Signature'), h('dd', { id: 'version-signature' }, signatureText(v)),
              h('dt', null, 'Publisher'), h('dd', { id: 'version-publisher' }, publisherText(v)),
              h('dt', null, 'Scan'), h('dd', null, scanBadge(v.scan)),
              h('dt', null, 'Tags'), h('dd', null, tagsList(v.tags)),
              h('dt', null, 'Estimated VRAM'),
              h('dd', null, typeof v.estimated_vram_gib === 'number'
                ? fmtNum(v.estimated_vram_gib) + ' GiB' : '—'))),
    section('Routing', 'routing-sec', routing(v, aliases && aliases.items)),
    section('Metrics', 'metrics', metricsCompare(model, null, v, null, 'metrics-table')),
    section('Parameters', 'params', kvTable(v.params, 'params-table', 'Parameters')),
    section('Datasets and lineage', 'datasets', datasetsWithLineage(v.datasets)),
    section('Safety scan', 'scan', scanSection(v.scan)),
    section('Smoke tests', 'smoke', smokeTable(smoke && smoke.items)),
    section('Weights', 'introspection', introspectionFacts(v)),
    section('Memory estimate', 'vram', vramInputs(v, null)),
    section('Inputs and outputs', 'schema', ioTable(v)),
    section('Files', 'files', filesTable(files)),
    h('p', { class: 'muted small' }, 'Other versions: ',
      Array.from({ length: model.latest_version || 0 }, (_, i) => i + 1)
        .filter((k) => k !== v.version).slice(-20)
        .map((k) => [versionLink(name, k), ' '])));
}
