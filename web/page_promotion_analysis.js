/* The promotion page's live canary analysis: per metric, candidate against baseline in
 * every recorded interval (failing intervals marked), the streaks, and the newest
 * interval's verdicts in words. Redrawn by the page's poll while the rollout runs. */

import { add, h, s } from './ui_dom.js';
import { fmtNum } from './ui_format.js';
import { row, table } from './ui_widgets.js';

const SHOWN = 120; /* intervals per chart: the newest */

function metricNames(intervals) {
  const names = [];
  for (const iv of intervals)
    for (const m of iv.metrics || [])
      if (typeof m.name === 'string' && !names.includes(m.name))
        names.push(m.name);
  return names;
}

/* One metric's chart: x the interval, y its value; baseline dashed grey, candidate solid
 * blue; a failed interval is a red dot on the candidate, an inconclusive one a hollow ring. */
function metricChart(name, intervals) {
  const pts = intervals.map((iv) => {
    const m = (iv.metrics || []).find((x) => x.name === name) || {};
    return { c: m.candidate, b: m.baseline, v: m.verdict || iv.verdict, at: iv.at,
             detail: m.detail || '' };
  });
  const vals = pts.flatMap((p) => [p.c, p.b]).filter((v) => typeof v === 'number');
  const W = 560, H = 140, L = 56, R = 8, T = 10, B = 18;
  const svg = s('svg', { viewBox: '0 0 ' + W + ' ' + H, class: 'chart analysis-chart',
                         role: 'img', 'data-metric': name,
                         preserveAspectRatio: 'xMinYMin meet' });
  add(svg, s('title', null, name + ': candidate against baseline per interval'));
  const max = vals.length ? Math.max(...vals) : 1, min = vals.length ? Math.min(0, ...vals) : 0;
  const span = max - min || 1;
  const x = (i) => L + (pts.length > 1 ? (i / (pts.length - 1)) * (W - L - R) : 0);
  const y = (v) => T + (1 - (v - min) / span) * (H - T - B);
  add(svg, [
    s('line', { x1: L, y1: y(min), x2: W - R, y2: y(min), class: 'axis' }),
    s('text', { x: L - 6, y: y(max) + 4, 'text-anchor': 'end', class: 'chart-value' },
      fmtNum(max)),
    s('text', { x: L - 6, y: y(min) + 4, 'text-anchor': 'end', class: 'chart-value' },
      fmtNum(min)),
  ]);
  const line = (key, cls) => {
    let d = '';
    pts.forEach((p, i) => {
      if (typeof p[key] !== 'number')
        return;
      d += (d && typeof pts[i - 1][key] === 'number' ? ' L' : ' M') + x(i).toFixed(1) + ' ' +
           y(p[key]).toFixed(1);
    });
    return d ? s('path', { d: d.trim(), class: cls }) : null;
  };
  add(svg, line('b', 'line-base'), line('c', 'line-cand'));
  pts.forEach((p, i) => {
    if (p.v !== 'failed' && p.v !== 'inconclusive')
      return;
    const yy = typeof p.c === 'number' ? y(p.c) : y(min);
    add(svg, s('circle', { cx: x(i).toFixed(1), cy: yy.toFixed(1), r: 4,
                           class: p.v === 'failed' ? 'mark-failed' : 'mark-inconclusive' },
               s('title', null, p.at + ' ' + p.v + ': ' + p.detail)));
  });
  return h('figure', { class: 'chart-fig' }, h('figcaption', { class: 'small' },
                                               h('strong', null, name)), svg);
}

export function analysisView(p) {
  const a = p.analysis;
  if (!a)
    return null;
  const all = a.intervals || [];
  if (all.length === 0)
    return h('p', { class: 'empty', id: 'analysis-none' },
             'No interval measured yet: the first comes one interval after the phase starts.');
  const shown = all.slice(-SHOWN);
  const last = all[all.length - 1];
  const head = ['Metric', 'Verdict', 'Candidate', 'Baseline', 'Why'];
  const rows = (last.metrics || []).map((m) => row(head, [
    h('strong', null, m.name),
    h('span', { class: 'verdict verdict-' + m.verdict }, m.verdict),
    fmtNum(m.candidate), fmtNum(m.baseline), m.detail || '',
  ], { 'data-metric': m.name }));
  return [
    h('p', { id: 'analysis-summary' },
      'Last interval ', h('strong', { class: 'verdict verdict-' + last.verdict }, last.verdict),
      ' (' + (last.phase || '') + (typeof last.weight === 'number' ? ', ' + last.weight + '%' : '') +
      ') · ' + a.consecutive_failures + ' failed and ' + a.consecutive_inconclusive +
      ' inconclusive in a row · ' + all.length + ' intervals recorded'),
    h('p', { class: 'muted small' },
      'Baseline dashed, candidate solid; a red dot marks a failed interval, a ring one without ' +
      'data.'),
    metricNames(shown).map((n) => metricChart(n, shown)),
    table('analysis-table', head, rows, 'The newest interval, metric by metric'),
  ];
}
