/* The promotion page's view of what is inside the artifacts: the inputs and outputs of
 * baseline and candidate side by side with every difference marked (the schema gate's
 * rules), and the candidate's VRAM estimate with the inputs of its formula. */

import { h } from './ui_dom.js';
import { fmtApprox, fmtNum } from './ui_format.js';
import { badge, row, table } from './ui_widgets.js';

/* A version's schema: what the server read from the artifact, else what was declared. */
export function schemaOf(v) {
  if (!v)
    return null;
  const i = v.introspection;
  if (i && (Array.isArray(i.inputs) || Array.isArray(i.outputs)))
    return { inputs: i.inputs || [], outputs: i.outputs || [], source: 'read from the ' +
             i.format + ' artifact' };
  if (v.io_schema)
    return { inputs: v.io_schema.inputs || [], outputs: v.io_schema.outputs || [],
             source: 'declared io_schema' };
  return null;
}

function dimAny(d) {
  return typeof d === 'string' || d === null || (typeof d === 'number' && d < 0);
}

/* gates/schema.c's rule: -1 and names match anything, an unknown rank matches anything. */
export function shapeCompatible(a, b) {
  if (!Array.isArray(a) || !Array.isArray(b))
    return true;
  if (a.length !== b.length)
    return false;
  return a.every((d, i) => dimAny(d) || dimAny(b[i]) || d === b[i]);
}

function shapeText(s) {
  if (!Array.isArray(s))
    return '?';
  return '[' + s.map((d) => (typeof d === 'number' && d < 0) ? '?' : String(d)).join(', ') + ']';
}

function side(e) {
  if (!e)
    return h('span', { class: 'muted' }, '—');
  return h('span', null, h('code', { class: 'mono' }, e.dtype), ' ',
           h('span', { class: 'muted small' }, shapeText(e.shape)),
           e.optional ? h('span', { class: 'pill' }, 'optional') : null);
}

/* One row per name in either list: [name, baseline entry, candidate entry, change, breaking]. */
export function diffRows(base, cand, inputs) {
  const out = [];
  const find = (list, n) => (list || []).find((e) => e.name === n);
  for (const b of base || []) {
    const c = find(cand, b.name);
    if (!c)
      out.push([b.name, b, null, 'missing in the candidate', true]);
    else if (b.dtype !== c.dtype)
      out.push([b.name, b, c, 'dtype ' + b.dtype + ' → ' + c.dtype, true]);
    else if (!shapeCompatible(b.shape, c.shape))
      out.push([b.name, b, c, 'shape ' + shapeText(b.shape) + ' → ' + shapeText(c.shape), inputs]);
    else
      out.push([b.name, b, c, '', false]);
  }
  for (const c of cand || []) {
    if (!find(base, c.name))
      out.push([c.name, null, c, 'new' + (inputs ? (c.optional ? ' optional' : ' required') : '') +
                ' ' + (inputs ? 'input' : 'output'), inputs && !c.optional]);
  }
  return out;
}

export function schemaDiff(p, cand, base) {
  const cs = schemaOf(cand), bs = schemaOf(base);
  if (!cs && !bs)
    return h('p', { class: 'empty', id: 'schema-none' },
             'Neither version has an input/output schema (no ONNX graph was read and none was ' +
             'declared).');
  const gate = (p.gates || []).find((g) => g.kind === 'schema');
  const head = ['', 'Name', 'Baseline' + (base ? ' v' + base.version : ''),
                'Candidate v' + cand.version, 'Change'];
  const rows = [];
  for (const inputs of [true, false]) {
    for (const [name, b, c, change, breaking] of diffRows(bs && bs[inputs ? 'inputs' : 'outputs'],
                                                           cs && cs[inputs ? 'inputs' : 'outputs'],
                                                           inputs)) {
      rows.push(row(head, [inputs ? 'input' : 'output', h('code', { class: 'mono' }, name),
                           bs ? side(b) : h('span', { class: 'muted' }, 'no schema'),
                           cs ? side(c) : h('span', { class: 'muted' }, 'no schema'),
                           change ? (breaking && bs && cs ? badge('failed', change)
                                                          : badge('skipped', change))
                                  : h('span', { class: 'muted' }, 'same')],
                    { 'data-io': (inputs ? 'input:' : 'output:') + name,
                      class: breaking && bs && cs ? 'io-breaking' : null }));
    }
  }
  return h('div', null,
           h('p', { class: 'muted small' },
             'Candidate: ' + (cs ? cs.source : 'no schema') + ' · baseline: ' +
             (base ? (bs ? bs.source : 'no schema') : 'none (first release)') +
             '. -1 and named dimensions match any size.'),
           gate ? h('p', { id: 'schema-gate' }, badge(gate.status), ' ',
                    gate.detail || (gate.status === 'passed' ? 'compatible' : '')) : null,
           table('schema-table', head, rows, 'Inputs and outputs, baseline and candidate'));
}

const VRAM_INPUTS = [
  ['weights_bytes', 'Weight bytes (from the tensor headers)', 'bytes'],
  ['overhead', 'Runtime overhead factor', ''],
  ['parameters', 'Parameters (declared)', ''],
  ['precision', 'Precision (declared)', ''],
  ['bytes_per_parameter', 'Bytes per parameter', ''],
  ['layers', 'Layers', ''],
  ['kv_heads', 'KV heads', ''],
  ['head_dim', 'Head dimension', ''],
  ['context', 'Context length', 'tokens'],
  ['bytes_per_element', 'KV cache bytes per element', ''],
  ['kv_cache_bytes', 'KV cache', 'bytes'],
];

function bytesText(n) {
  if (typeof n !== 'number')
    return String(n);
  return fmtNum(n) + ' (' + fmtApprox(n / (1024 * 1024 * 1024)) + ' GiB)';
}

export function vramInputs(cand, base) {
  const e = cand.vram_estimate;
  if (!e)
    return h('p', { class: 'empty', id: 'vram-none' },
             'No estimate: the candidate declares no resources and no weight sizes were read ' +
             'from its artifact.');
  const dl = h('dl', { class: 'facts', id: 'vram-facts' },
               h('dt', null, 'Estimate'),
               h('dd', { id: 'vram-gib' }, h('strong', null, fmtNum(e.gib) + ' GiB'),
                 typeof e.bytes === 'number' ? ' (' + fmtNum(Math.round(e.bytes)) + ' bytes)' : null,
                 base && base.estimated_vram_gib !== undefined
                   ? h('span', { class: 'muted small' },
                       ' (baseline v' + base.version + ': ' + fmtNum(base.estimated_vram_gib) +
                       ' GiB)') : null),
               h('dt', null, 'Source'),
               h('dd', null, e.source === 'resources' ? 'declared resources'
                                                      : 'the artifact\'s tensor headers'),
               h('dt', null, 'Formula'), h('dd', null, h('code', { class: 'mono' }, e.formula)));
  for (const [k, label, unit] of VRAM_INPUTS) {
    if (e[k] === undefined)
      continue;
    dl.append(h('dt', null, label),
              h('dd', { 'data-vram': k }, unit === 'bytes' ? bytesText(e[k])
                                                           : fmtNum(e[k]) + (unit ? ' ' + unit : '')));
  }
  return dl;
}
