/* The promotion page's evidence: candidate and baseline side by side, the
 * gates, and the smoke tests. */

import { enc, h, localPath } from './ui_dom.js';
import { fmtApprox, fmtExact, fmtNum, shortDigest } from './ui_format.js';
import { versionLink } from './ui_version.js';
import { badge, mono, notice, row, table, tagsList, when } from './ui_widgets.js';

function datasetsList(ds) {
  if (!ds || ds.length === 0)
    return h('span', { class: 'muted' }, 'none recorded');
  return h('ul', { class: 'plain datasets' },
           ds.map((d) => h('li', null,
                           h('a', { href: '#/datasets/' + enc(d.digest), title: d.digest },
                             d.name || shortDigest(d.digest)),
                           d.role ? h('span', { class: 'pill' }, d.role) : null,
                           d.uri ? h('span', { class: 'muted small block mono' }, d.uri) : null)));
}

function signatureCell(v, gates) {
  if (!v)
    return h('span', { class: 'muted' }, '—');
  const gate = (gates || []).find((g) => g.kind === 'signature');
  const sig = v.signature;
  if (!sig)
    return h('span', null, badge('failed', 'unsigned'));
  return h('span', null,
           gate ? badge(gate.status, gate.status === 'passed' ? 'valid' : gate.status)
                : badge('passed', 'signed'),
           ' key ', mono(String(sig.keyid || '').slice(0, 12) + '…', sig.keyid),
           localPath(sig.url) ? [' ', h('a', { href: sig.url, class: 'small' }, 'bundle')] : null);
}

function sourceCell(v) {
  if (!v || !v.source)
    return h('span', { class: 'muted' }, '—');
  return h('span', null, mono(String(v.source.commit || '').slice(0, 12), v.source.commit),
           v.source.repo ? h('span', { class: 'muted small block mono' }, v.source.repo) : null);
}

/* Baseline and candidate, one row per property. */
export function compareTable(p, cand, base) {
  const head = ['', base ? h('span', null, 'Baseline ', versionLink(p.model, base.version))
                      : 'Baseline',
                h('span', null, 'Candidate ', versionLink(p.model, cand.version))];
  const both = (label, f) => row(head, [h('strong', null, label),
                                        base ? f(base, false) : h('span', { class: 'muted' },
                                                                  'no baseline'),
                                        f(cand, true)]);
  const params = (v) => {
    const keys = Object.keys(v.params || {}).sort();
    return keys.length
      ? h('ul', { class: 'plain small params' }, keys.map((k) => h('li', { 'data-param': k },
        h('strong', null, k), ' ', typeof v.params[k] === 'number' ? fmtNum(v.params[k])
          : typeof v.params[k] === 'string' ? v.params[k] : JSON.stringify(v.params[k]))))
      : h('span', { class: 'muted' }, 'none recorded');
  };
  const rows = [
    both('Description', (v) => v.description ? h('span', { class: 'version-description' },
                                                  v.description)
                                              : h('span', { class: 'muted' }, 'none')),
    both('Params', params),
    both('Image', (v) => mono(v.image, v.image)),
    both('Artifact', (v) => h('span', null, mono(shortDigest(v.artifact && v.artifact.digest),
                                                 v.artifact && v.artifact.digest),
                              v.artifact && v.artifact.size !== undefined
                                ? h('span', { class: 'muted small' }, ' ' + v.artifact.size +
                                    ' bytes') : null)),
    both('Datasets', (v) => datasetsList(v.datasets)),
    both('Run', (v) => mono(v.run_id)),
    both('Source commit', sourceCell),
    both('Signature', (v, isCand) => signatureCell(v, isCand ? p.gates : null)),
    both('Published by', (v) => h('span', null, v.created_by || '—', ' ',
                                  h('span', { class: 'muted small' }, when(v.created_at)))),
    both('Tags', (v) => tagsList(v.tags)),
  ];
  if (cand.estimated_vram_gib !== undefined || (base && base.estimated_vram_gib !== undefined))
    rows.push(both('Estimated VRAM', (v) => v.estimated_vram_gib !== undefined
      ? fmtNum(v.estimated_vram_gib) + ' GiB' : '—'));
  return table('compare-table', head, rows, 'Baseline and candidate side by side');
}

export function gatesTable(p, appr) {
  const head = ['Gate', 'Kind', 'Status', 'Observed', 'Expected', 'Detail'];
  const gates = (p.gates || []).slice();
  const rows = gates.map((g) => row(head, [
    h('strong', null, g.name), g.kind, badge(g.status),
    g.observed === null || g.observed === undefined ? h('span', { class: 'muted' }, '—')
      : typeof g.observed === 'number' ? fmtExact(g.observed)
      : /sha256:/.test(String(g.observed)) ? mono(String(g.observed)) : String(g.observed),
    g.expected === null || g.expected === undefined ? h('span', { class: 'muted' }, '—')
      : String(g.expected),
    g.detail ? String(g.detail) : h('span', { class: 'muted' }, '—'),
  ], { 'data-gate': g.kind, class: 'gate-' + g.status }));
  if (appr.required > 0 && !gates.some((g) => g.kind === 'approval')) {
    const st = p.state === 'rejected' && (p.approvals || []).some((a) => a.decision === 'reject')
      ? 'failed' : appr.needed === 0 ? 'passed' : 'pending';
    rows.push(row(head, [h('strong', null, 'approvals'), 'approval', badge(st),
                         appr.given + ' approval' + (appr.given === 1 ? '' : 's'),
                         '≥ ' + appr.required + ' distinct reviewers',
                         appr.needed ? appr.needed + ' more needed' : 'enough'],
                  { 'data-gate': 'approval' }));
  }
  if (rows.length === 0)
    return h('p', { class: 'empty' }, 'The policy has no gates for this alias.');
  return table('gates-table', head, rows, 'Gates');
}

function smokeGpu(t) {
  if (t.gpu)
    return t.gpu.name + (t.gpu.uuid ? ' (' + t.gpu.uuid + ')' : '');
  if (t.state === 'queued' || t.state === 'running')
    return '—';
  return 'CPU (no GPU)';
}

function smokeLatency(t) {
  const lat = t.latency_ms;
  if (!lat || lat.p50 === undefined)
    return '—';
  return fmtNum(lat.p50) + ' ms / ' + fmtNum(lat.p95) + ' ms';
}

/* The test the smoke gate looked at (or the newest) in full, earlier ones
 * in a short table. */
export function smokeList(tests, gates) {
  if (!tests || tests.length === 0)
    return h('p', { class: 'empty' }, 'No smoke tests for the candidate yet.');
  const gate = (gates || []).find((g) => g.kind === 'smoke');
  const m = gate && gate.detail ? /\b(smk_[0-9a-z]+)\b/.exec(String(gate.detail)) : null;
  const main = (m && tests.find((t) => t.id === m[1])) || tests[0];
  const rest = tests.filter((t) => t !== main);
  const facts = h('dl', { class: 'facts' },
                  h('dt', null, 'State'), h('dd', null, badge(main.state)),
                  h('dt', null, 'Profile'), h('dd', null, main.profile || '—'),
                  h('dt', null, 'GPU'), h('dd', null, smokeGpu(main)),
                  h('dt', null, 'p50 / p95'), h('dd', { class: 'smoke-latency' }, smokeLatency(main)),
                  h('dt', null, 'Duration'),
                  h('dd', null, main.duration_ms !== null && main.duration_ms !== undefined
                    ? fmtNum(main.duration_ms) + ' ms' : '—'),
                  h('dt', null, 'Exit code'),
                  h('dd', null, main.exit_code !== null && main.exit_code !== undefined
                    ? String(main.exit_code) : '—'),
                  h('dt', null, 'Finished'), h('dd', null, when(main.finished_at)),
                  typeof main.throughput_rps === 'number'
                    ? [h('dt', null, 'Throughput'),
                       h('dd', { class: 'smoke-throughput' }, fmtNum(main.throughput_rps) +
                         ' req/s')] : null,
                  typeof main.cost_per_1k_requests === 'number'
                    ? [h('dt', null, 'Cost per 1k requests'),
                       h('dd', { class: 'smoke-cost' }, fmtNum(main.cost_per_1k_requests))]
                    : null,
                  main.peak_gpu_memory_mib ? [h('dt', null, 'Peak GPU memory'),
                                              h('dd', null, main.peak_gpu_memory_mib + ' MiB')]
                                           : null);
  const checks = (main.checks || []).length
    ? h('ul', { class: 'plain checks' }, main.checks.map((c) =>
      h('li', null, badge(c.passed ? 'passed' : 'failed', c.passed ? 'pass' : 'fail'), ' ',
        h('strong', null, c.name), c.detail ? h('span', { class: 'muted' }, ' — ' + c.detail)
                                             : null)))
    : h('p', { class: 'muted small' }, 'No checks reported.');
  const rhead = ['Test', 'State', 'Trigger', 'GPU', 'p50 / p95', 'Finished'];
  const rrows = rest.map((t) => row(rhead, [
    mono(t.id), badge(t.state), t.trigger || '—', smokeGpu(t), smokeLatency(t),
    when(t.finished_at)], { 'data-smoke': t.id }));
  return h('div', { class: 'smokes' },
           h('article', { class: 'smoke', 'data-smoke': main.id },
             h('h3', null, 'Test ', mono(main.id),
               m && main.id === m[1]
                 ? h('span', { class: 'muted small' }, ' · the one the smoke gate used') : null),
             facts,
             main.reason ? notice('bad', main.reason) : null,
             h('h4', null, 'Checks'), checks,
             h('details', { class: 'log', open: true },
               h('summary', null, 'Log tail'),
               h('pre', { class: 'log-tail', tabindex: '0', 'aria-label': 'Log tail' },
                 main.log_tail || '(empty)'))),
           rest.length ? [h('h4', null, 'Other tests of this version'),
                          table('smoke-table', rhead, rrows, 'Other smoke tests')] : null);
}

/* The newest passed test of a list (newest first), or null. */
function latestPassed(tests) {
  return (tests || []).find((t) => t.state === 'passed') || null;
}

function costDelta(c, b, lowerIsBetter) {
  if (typeof c !== 'number' || typeof b !== 'number')
    return h('span', { class: 'muted' }, '—');
  const d = c - b;
  const pct = b !== 0 ? ' (' + (d >= 0 ? '+' : '') + fmtApprox(100 * d / b) + ' %)' : '';
  const worse = lowerIsBetter ? d > 0 : d < 0;
  return h('span', { class: d === 0 ? 'muted' : worse ? 'delta-worse' : 'delta-better' },
           (d >= 0 ? '+' : '') + fmtApprox(d) + pct);
}

/* What serving costs (API.md "Quotas and cost"): throughput and cost per thousand requests
 * of the candidate's and the baseline's latest passed smoke tests, with the delta. */
export function costTable(p, candTests, baseTests) {
  const c = latestPassed(candTests), b = latestPassed(baseTests);
  if (!c)
    return h('p', { class: 'empty' },
             'No passed smoke test of the candidate yet: nothing measured its cost.');
  const val = (t, k) => (t && typeof t[k] === 'number' ? t[k] : null);
  const head = ['', 'Baseline' + (p.baseline_version ? ' v' + p.baseline_version : ''),
                'Candidate v' + p.version, 'Delta'];
  const rows = [
    row(head, ['Throughput (requests/s)', fmtNum(val(b, 'throughput_rps')),
               fmtNum(val(c, 'throughput_rps')),
               costDelta(val(c, 'throughput_rps'), val(b, 'throughput_rps'), false)],
        { 'data-cost': 'throughput_rps' }),
    row(head, ['Cost per 1,000 requests', fmtNum(val(b, 'cost_per_1k_requests')),
               fmtNum(val(c, 'cost_per_1k_requests')),
               costDelta(val(c, 'cost_per_1k_requests'), val(b, 'cost_per_1k_requests'), true)],
        { 'data-cost': 'cost_per_1k_requests' }),
  ];
  const why = val(c, 'throughput_rps') === null
    ? 'The candidate\'s smoke test measured no throughput: its output needs throughput_rps or ' +
      'latencies_ms.'
    : val(c, 'cost_per_1k_requests') === null
      ? 'No cost is configured for smoke profile \'' + (c.profile || '') + '\' (--smoke-profile-cost).'
      : null;
  return h('div', null, table('cost', head, rows, 'Serving cost'), why ? h('p', { class: 'muted small' }, why) : null);
}
