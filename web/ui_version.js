/*
 * What several pages say about a version: its link, which way a metric is better, its
 * scan and publisher (shown when the server sends them), smoke tests with throughput and
 * cost, and the metrics of two versions side by side with their deltas.
 */

import { enc, h } from './ui_dom.js';
import { diff, fmtApprox, fmtDelta, fmtNum } from './ui_format.js';
import { badge, mono, row, table, when } from './ui_widgets.js';

export function versionHref(model, n) {
  return '#/models/' + enc(model) + '/versions/' + enc(n);
}

/* "v3" linking to the version's page. */
export function versionLink(model, n, label) {
  if (n === null || n === undefined)
    return h('span', { class: 'muted' }, '—');
  return h('a', { href: versionHref(model, n), class: 'vlink', 'data-vlink': String(n) },
           label || 'v' + n);
}

/* 1 when higher is better, -1 when lower is, 0 when nobody said: the model's
 * metric_directions first, then a policy's thresholds. */
export function metricDirection(model, policy, metric) {
  const d = model && model.metric_directions && model.metric_directions[metric];
  if (d === 'higher')
    return 1;
  if (d === 'lower')
    return -1;
  for (const t of (policy && policy.thresholds) || []) {
    if (t.metric !== metric)
      continue;
    if (t.op === '>=' || t.op === '>')
      return 1;
    if (t.op === '<=' || t.op === '<')
      return -1;
  }
  return 0;
}

export function directionText(dir) {
  return dir > 0 ? 'higher is better' : dir < 0 ? 'lower is better' : 'no direction set';
}

/* The change from a to b, coloured by the direction. */
export function deltaCell(a, b, dir) {
  if (typeof a !== 'number' || typeof b !== 'number')
    return h('span', { class: 'muted' }, '—');
  const d = diff(a, b);
  const better = dir === 0 || d === 0 ? 0 : (d > 0 ? 1 : -1) * dir;
  const tone = better > 0 ? 'better' : better < 0 ? 'worse' : 'same';
  const pc = a !== 0 ? (d / Math.abs(a)) * 100 : null;
  const pct = pc !== null ? ' (' + (pc >= 0 ? '+' : '−') + fmtApprox(Math.abs(pc)) + '%)' : '';
  const word = better > 0 ? 'better' : better < 0 ? 'worse' : dir === 0 ? '' : 'same';
  return h('span', { class: 'delta delta-' + tone, 'data-delta': String(d) },
           h('span', { 'aria-hidden': 'true', class: 'arrow' }, d > 0 ? '▲ ' : d < 0 ? '▼ ' : ''),
           fmtDelta(d) + pct, word ? h('span', { class: 'delta-word' }, ' ' + word) : null);
}

/* A scan verdict (M20's version "scan"): its state as a badge, or "—" without one. */
export function scanBadge(scan) {
  if (!scan || typeof scan !== 'object')
    return h('span', { class: 'muted', 'data-scan': 'none' }, '—');
  const st = String(scan.status || scan.state || scan.verdict || scan.result || 'unknown');
  const n = Array.isArray(scan.findings) ? scan.findings.length : 0;
  const tone = /^(clean|passed|ok|safe)$/.test(st) ? 'passed'
    : /^(failed|blocked|unsafe|malicious|error)$/.test(st) ? 'failed' : 'pending';
  return h('span', { 'data-scan': st }, badge(tone, st),
           n ? h('span', { class: 'muted small' }, ' ' + n + ' finding' + (n === 1 ? '' : 's'))
             : null);
}

/* Who published it (M21's version "publisher": an identity), or created_by. */
export function publisherText(v) {
  const p = v && v.publisher;
  if (p && typeof p === 'object') {
    const who = p.subject || p.sub || p.name || p.email || p.identity || p.id;
    const iss = p.issuer || p.iss;
    return h('span', { class: 'publisher' }, who ? String(who) : JSON.stringify(p),
             iss ? h('span', { class: 'muted small' }, ' via ' + String(iss)) : null,
             p.verified === true ? [' ', badge('passed', 'verified')] : null);
  }
  if (typeof p === 'string' && p)
    return h('span', { class: 'publisher' }, p);
  return h('span', null, (v && v.created_by) || '—');
}

function smokeLatency(t) {
  const lat = t.latency_ms;
  if (!lat || lat.p50 === undefined)
    return '—';
  return fmtNum(lat.p50) + ' / ' + fmtNum(lat.p95) + ' ms';
}

function optNum(x, unit) {
  return typeof x === 'number' ? fmtNum(x) + (unit || '')
    : h('span', { class: 'muted' }, '—');
}

/* Smoke tests with their throughput and cost (M26), one row each. */
export function smokeTable(tests) {
  if (!tests || tests.length === 0)
    return h('p', { class: 'empty' }, 'No smoke tests of this version.');
  const head = ['Test', 'State', 'Profile', 'GPU', 'p50 / p95', 'Throughput',
                'Cost per 1k requests', 'Finished'];
  return table('smoke-table', head, tests.map((t) => row(head, [
    mono(t.id), badge(t.state), t.profile || '—',
    t.gpu ? String(t.gpu.name || '') : (t.state === 'queued' || t.state === 'running' ? '—'
                                                                                      : 'CPU'),
    smokeLatency(t), optNum(t.throughput_rps, ' req/s'), optNum(t.cost_per_1k_requests),
    when(t.finished_at),
  ], { 'data-smoke': t.id })), 'Smoke tests');
}

/* Metrics of version a against version b (b may be null): one row per metric. */
export function metricsCompare(model, policy, a, b, id) {
  const names = [];
  for (const v of [a, b])
    for (const n of Object.keys((v && v.metrics) || {}).sort())
      if (!names.includes(n))
        names.push(n);
  if (names.length === 0)
    return h('p', { class: 'empty' }, 'No metrics reported.');
  const head = b ? ['Metric', 'v' + a.version, 'v' + b.version, 'Change', 'Direction']
    : ['Metric', 'Value', 'Direction'];
  const rows = names.map((n) => {
    const x = (a.metrics || {})[n], y = b ? (b.metrics || {})[n] : undefined;
    const dir = metricDirection(model, policy, n);
    const cells = b ? [h('strong', null, n), fmtNum(x), fmtNum(y), deltaCell(x, y, dir),
                       directionText(dir)]
      : [h('strong', null, n), h('strong', null, fmtNum(x)), directionText(dir)];
    return row(head, cells, { 'data-metric': n });
  });
  return table(id || 'metrics-table', head, rows, 'Metrics');
}
