/* The promotion page's live analysis (M19's promotion "analysis"): one chart per metric,
 * candidate against baseline per interval, failing intervals marked. Drawn only when the
 * server sends an analysis; tolerant of the two shapes an interval's metrics may take. */

import { add, h, s } from './ui_dom.js';
import { fmtNum } from './ui_format.js';
import { badge } from './ui_widgets.js';

function failed(x) {
  if (!x || typeof x !== 'object')
    return false;
  return x.passed === false || x.failed === true || x.ok === false ||
    /^(failed|failing|fail)$/.test(String(x.status || x.state || ''));
}

/* {metric: [{i, candidate, baseline, failed}]} from analysis.intervals. */
function series(analysis) {
  const out = {};
  (analysis.intervals || []).forEach((iv, i) => {
    let ms = iv.metrics || {};
    if (Array.isArray(ms))
      ms = Object.fromEntries(ms.map((m) => [m.metric || m.name, m]));
    for (const [name, m] of Object.entries(ms)) {
      if (!name || !m || typeof m !== 'object')
        continue;
      (out[name] = out[name] || []).push({ i, candidate: m.candidate, baseline: m.baseline,
                                           failed: failed(m) || (failed(iv) && !('passed' in m)) });
    }
  });
  return out;
}

function chart(name, pts, n) {
  const W = 520, H = 150, L = 56, R = 10, T = 12, B = 24;
  const vals = pts.flatMap((p) => [p.candidate, p.baseline]).filter((v) => typeof v === 'number');
  if (vals.length === 0)
    return null;
  let lo = Math.min(...vals), hi = Math.max(...vals);
  if (lo === hi) {
    lo -= Math.abs(lo) * 0.01 || 1;
    hi += Math.abs(hi) * 0.01 || 1;
  }
  const x = (i) => L + (n > 1 ? (i / (n - 1)) * (W - L - R) : (W - L - R) / 2);
  const y = (v) => T + (1 - (v - lo) / (hi - lo)) * (H - T - B);
  const line = (k, cls) => {
    const p = pts.filter((q) => typeof q[k] === 'number');
    return p.length ? s('polyline', { class: cls, fill: 'none',
                                     points: p.map((q) => x(q.i).toFixed(1) + ',' +
                                                          y(q[k]).toFixed(1)).join(' ') })
      : null;
  };
  const nfail = pts.filter((p) => p.failed).length;
  const svg = s('svg', { viewBox: '0 0 ' + W + ' ' + H, class: 'chart analysis-chart', role: 'img',
                         'aria-label': name + ': candidate against baseline over ' + n +
                           ' intervals, ' + nfail + ' failing' });
  add(svg,
      s('text', { x: L - 6, y: T + 4, 'text-anchor': 'end', class: 'chart-value' }, fmtNum(hi)),
      s('text', { x: L - 6, y: H - B, 'text-anchor': 'end', class: 'chart-value' }, fmtNum(lo)),
      s('line', { x1: L, y1: H - B, x2: W - R, y2: H - B, class: 'axis' }),
      pts.filter((p) => p.failed).map((p) =>
        s('rect', { x: (x(p.i) - 5).toFixed(1), y: T, width: 10, height: H - T - B,
                    class: 'fail-band' })),
      line('baseline', 'line-base'), line('candidate', 'line-cand'),
      pts.filter((p) => p.failed && typeof p.candidate === 'number').map((p) =>
        s('circle', { cx: x(p.i).toFixed(1), cy: y(p.candidate).toFixed(1), r: 4,
                      class: 'fail-dot' })),
      s('text', { x: L, y: H - 6, class: 'chart-legend' }, 'interval 1'),
      s('text', { x: W - R, y: H - 6, 'text-anchor': 'end', class: 'chart-legend' },
        'interval ' + n));
  return h('figure', { class: 'chart-fig', 'data-analysis-metric': name },
           h('figcaption', null, h('strong', null, name), ' ',
             nfail ? badge('failed', nfail + ' failing') : badge('passed', 'no failing interval')),
           svg);
}

/* The analysis section's body, or null when there is no analysis. */
export function analysisCharts(analysis) {
  if (!analysis || typeof analysis !== 'object')
    return null;
  const n = (analysis.intervals || []).length;
  const byMetric = series(analysis);
  const figs = Object.keys(byMetric).sort().map((k) => chart(k, byMetric[k], n)).filter(Boolean);
  return h('div', { class: 'analysis' },
           h('p', null, 'State: ', badge(String(analysis.state || analysis.status || 'running')),
             ' · ' + n + ' interval' + (n === 1 ? '' : 's') + ' · ',
             h('span', { class: 'legend-cand' }, 'candidate'), ' against ',
             h('span', { class: 'legend-base' }, 'baseline'), '; failing intervals marked red.'),
           figs.length ? figs : h('p', { class: 'empty' }, 'No interval measured yet.'));
}
