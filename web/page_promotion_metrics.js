/* The promotion page's metrics: a table of baseline against candidate with
 * the change judged by the policy's direction, and a bar chart. */

import { add, h, s } from './ui_dom.js';
import { diff, fmtApprox, fmtExact } from './ui_format.js';
import { deltaCell, metricDirection, versionLink } from './ui_version.js';
import { row, table } from './ui_widgets.js';

/* Which way is better: the model's metric_directions (the page hands the model in as
 * p.model_info), then the policy's thresholds. */
function direction(p, metric) {
  return metricDirection(p.model_info, p.policy, metric);
}

function thresholdText(policy, metric) {
  const parts = [];
  for (const t of (policy && policy.thresholds) || []) {
    if (t.metric !== metric)
      continue;
    if (t.baseline) {
      let allow = '';
      if (t.max_regression !== undefined)
        allow = ' (±' + fmtExact(t.max_regression) + ')';
      else if (t.max_regression_pct !== undefined)
        allow = ' (±' + fmtExact(t.max_regression_pct) + '%)';
      parts.push(t.op + ' baseline' + allow);
    } else {
      parts.push(t.op + ' ' + fmtExact(t.value));
    }
  }
  return parts.join(', ');
}

function metricNames(policy, cand, base) {
  const names = [];
  const push = (n) => {
    if (!names.includes(n))
      names.push(n);
  };
  for (const t of (policy && policy.thresholds) || [])
    if (typeof t.metric === 'string')
      push(t.metric);
  for (const v of [cand, base])
    for (const n of Object.keys((v && v.metrics) || {}).sort())
      push(n);
  return names;
}

export function metricsTable(p, cand, base) {
  const names = metricNames(p.policy, cand, base);
  if (names.length === 0)
    return h('p', { class: 'empty' }, 'Neither version reports metrics.');
  const head = ['Metric', base ? h('span', null, 'Baseline ', versionLink(p.model, base.version))
                             : 'Baseline',
                h('span', null, 'Candidate ', versionLink(p.model, cand.version)), 'Change',
                'Policy'];
  const rows = names.map((n) => {
    const c = cand.metrics ? cand.metrics[n] : undefined;
    const b = base && base.metrics ? base.metrics[n] : undefined;
    const dir = direction(p, n);
    const delta = deltaCell(b, c, dir);
    const dirNote = dir > 0 ? 'higher is better' : dir < 0 ? 'lower is better' : '';
    return row(head, [
      h('span', null, h('strong', null, n),
        dirNote ? h('span', { class: 'muted small block' }, dirNote) : null),
      fmtExact(b), h('strong', null, fmtExact(c)), delta,
      thresholdText(p.policy, n) || h('span', { class: 'muted' }, '—'),
    ], { 'data-metric': n });
  });
  return table('metrics-table', head, rows, 'Metrics, baseline against candidate');
}

/* The change of each metric, candidate against baseline, as a bar from zero: relative
 * (%) so that metrics of any size share one scale, green when better, red when worse.
 * Bars that start at zero and show raw values make 0.942 and 0.95 look the same. */
export function metricsChart(p, cand, base) {
  if (!base)
    return null;
  const names = metricNames(p.policy, cand, base).filter((n) =>
    typeof (cand.metrics || {})[n] === 'number' && typeof (base.metrics || {})[n] === 'number' &&
    base.metrics[n] !== 0);
  if (names.length === 0)
    return null;
  const narrow = window.matchMedia('(max-width: 640px)').matches;
  const W = narrow ? 330 : 560, labelW = narrow ? 104 : 150, valueW = narrow ? 70 : 90;
  const barH = 16, gap = 10, maxChars = narrow ? 14 : 20;
  const pct = names.map((n) => (diff(base.metrics[n], cand.metrics[n]) /
                               Math.abs(base.metrics[n])) * 100);
  const max = Math.max(...pct.map(Math.abs)) || 1;
  const half = (W - labelW - valueW) / 2, zero = labelW + half;
  const H = names.length * (barH + gap) + 22;
  const svg = s('svg', { viewBox: '0 0 ' + W + ' ' + H, class: 'chart', role: 'img',
                         'aria-labelledby': 'chart-title', preserveAspectRatio: 'xMinYMin meet' });
  add(svg, s('title', { id: 'chart-title' },
             'Change of each metric from baseline v' + base.version + ' to candidate v' +
             cand.version + ', in percent'),
      s('line', { x1: zero, y1: 0, x2: zero, y2: H - 18, class: 'axis' }),
      s('text', { x: zero, y: H - 4, 'text-anchor': 'middle', class: 'chart-legend' },
        'no change'));
  names.forEach((n, i) => {
    const y = i * (barH + gap) + 2;
    const dir = direction(p, n);
    const better = dir === 0 || pct[i] === 0 ? 0 : Math.sign(pct[i]) * dir;
    const w = Math.max(1, (Math.abs(pct[i]) / max) * half);
    const x = pct[i] >= 0 ? zero : zero - w;
    add(svg, s('g', { class: 'chart-row', 'data-metric': n },
               s('text', { x: labelW - 8, y: y + barH - 4, class: 'chart-label',
                           'text-anchor': 'end' },
                 s('title', null, n), n.length > maxChars ? n.slice(0, maxChars - 1) + '…' : n),
               s('rect', { x: x.toFixed(1), y, width: w.toFixed(1), height: barH, rx: 2,
                           class: 'bar-delta bar-' + (better > 0 ? 'better' : better < 0
                             ? 'worse' : 'same') }),
               /* The value right of the bar, or right of zero for a fall: never over the
                * metric's name. */
               s('text', { x: (pct[i] >= 0 ? x + w + 6 : zero + 6).toFixed(1), y: y + barH - 4,
                           class: 'chart-value' },
                 (pct[i] > 0 ? '+' : pct[i] < 0 ? '−' : '') + fmtApprox(Math.abs(pct[i])) + '%')));
  });
  return h('figure', { class: 'chart-fig' }, svg,
           h('figcaption', { class: 'muted small' }, 'Change from the baseline in percent; ' +
             'green is better, red is worse, grey has no direction.'));
}
