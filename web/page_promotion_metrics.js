/* The promotion page's metrics: a table of baseline against candidate with
 * the change judged by the policy's direction, and a bar chart. */

import { add, h, s } from './ui_dom.js';
import { fmtDelta, fmtExact, fmtNum } from './ui_format.js';
import { row, table } from './ui_widgets.js';

/* Which way is better for a metric, from the policy's thresholds. */
function direction(policy, metric) {
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
  const head = ['Metric', 'Baseline' + (base ? ' v' + base.version : ''),
                'Candidate v' + cand.version, 'Change', 'Policy'];
  const rows = names.map((n) => {
    const c = cand.metrics ? cand.metrics[n] : undefined;
    const b = base && base.metrics ? base.metrics[n] : undefined;
    const dir = direction(p.policy, n);
    let delta = h('span', { class: 'muted' }, '—');
    if (typeof c === 'number' && typeof b === 'number') {
      const d = c - b;
      const better = dir === 0 || d === 0 ? 0 : (d > 0 ? 1 : -1) * dir;
      const tone = better > 0 ? 'better' : better < 0 ? 'worse' : 'same';
      const pc = (d / Math.abs(b)) * 100;
      const pct = b !== 0 ? ' (' + (pc >= 0 ? '+' : '−') + Math.abs(pc).toFixed(1) + '%)' : '';
      const word = better > 0 ? 'better' : better < 0 ? 'worse' : dir === 0 ? '' : 'same';
      delta = h('span', { class: 'delta delta-' + tone },
                h('span', { 'aria-hidden': 'true', class: 'arrow' },
                  d > 0 ? '▲ ' : d < 0 ? '▼ ' : ''),
                fmtDelta(d) + pct, word ? h('span', { class: 'delta-word' }, ' ' + word) : null);
    }
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

/* Horizontal bars per metric, baseline over candidate, scaled per metric. */
export function metricsChart(p, cand, base) {
  const names = metricNames(p.policy, cand, base).filter((n) =>
    typeof (cand.metrics || {})[n] === 'number' ||
    (base && typeof (base.metrics || {})[n] === 'number'));
  if (names.length === 0)
    return null;
  const narrow = window.matchMedia('(max-width: 640px)').matches;
  const W = narrow ? 330 : 560, labelW = narrow ? 104 : 150, valueW = narrow ? 46 : 70;
  const barH = 14, gap = 4, groupGap = 16, maxChars = narrow ? 14 : 20;
  const groupH = barH * 2 + gap;
  const legendH = 24;
  const H = legendH + names.length * (groupH + groupGap);
  const barMax = W - labelW - valueW;
  const svg = s('svg', { viewBox: '0 0 ' + W + ' ' + H, class: 'chart', role: 'img',
                         'aria-labelledby': 'chart-title', preserveAspectRatio: 'xMinYMin meet' });
  add(svg, s('title', { id: 'chart-title' },
             'Metrics: baseline' + (base ? ' v' + base.version : '') + ' and candidate v' +
             cand.version));
  add(svg, [
    s('rect', { x: labelW, y: 4, width: 12, height: 12, class: 'bar-base' }),
    s('text', { x: labelW + 18, y: 14, class: 'chart-legend' },
      'baseline' + (base ? ' v' + base.version : ' (none)')),
    s('rect', { x: labelW + (narrow ? 100 : 150), y: 4, width: 12, height: 12,
                class: 'bar-cand' }),
    s('text', { x: labelW + (narrow ? 118 : 168), y: 14, class: 'chart-legend' },
      'candidate v' + cand.version),
  ]);
  names.forEach((n, i) => {
    const y = legendH + i * (groupH + groupGap);
    const c = (cand.metrics || {})[n];
    const b = base ? (base.metrics || {})[n] : undefined;
    const max = Math.max(Math.abs(typeof c === 'number' ? c : 0),
                         Math.abs(typeof b === 'number' ? b : 0)) || 1;
    const g = s('g', { class: 'chart-row' });
    add(g, s('text', { x: labelW - 8, y: y + groupH / 2 + 4, class: 'chart-label',
                       'text-anchor': 'end' },
               s('title', null, n), n.length > maxChars ? n.slice(0, maxChars - 1) + '…' : n));
    const bar = (v, yy, cls) => {
      if (typeof v !== 'number')
        return s('text', { x: labelW + 4, y: yy + barH - 3, class: 'chart-value' }, 'no value');
      const w = Math.max(1, (Math.abs(v) / max) * barMax);
      return [s('rect', { x: labelW, y: yy, width: w.toFixed(1), height: barH, rx: 2,
                          class: cls }),
              s('text', { x: labelW + w + 6, y: yy + barH - 3, class: 'chart-value' },
                fmtNum(v))];
    };
    add(g, bar(b, y, 'bar-base'), bar(c, y + barH + gap, 'bar-cand'));
    add(svg, g);
  });
  return h('figure', { class: 'chart-fig' }, svg);
}
