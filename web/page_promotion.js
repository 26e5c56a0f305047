/* #/promotions/ID: one promotion, its decision panel, and a poll that follows
 * it while it is active. */

import { compareTable, gatesTable, smokeList } from './page_promotion_evidence.js';
import { metricsChart, metricsTable } from './page_promotion_metrics.js';
import { analysisCharts } from './page_promotion_analysis.js';
import { schemaDiff, vramInputs } from './page_promotion_schema.js';
import { api, maybe } from './ui_api.js';
import { add, enc, h } from './ui_dom.js';
import { ago } from './ui_format.js';
import { approvalsOf, missingGroup, promoTitle } from './ui_promotion.js';
import { drafts, hasRole, session, stopPoll, view } from './ui_state.js';
import { versionLink } from './ui_version.js';
import { badge, mount, section, splitBar, when } from './ui_widgets.js';

const ACTIVE = ['evaluating', 'awaiting_approval', 'rolling_out'];
const POLL_MS = 2000;

function approvalsList(p) {
  const list = p.approvals || [];
  if (list.length === 0)
    return h('p', { class: 'empty' }, 'No decisions yet.');
  return h('ol', { class: 'plain approvals' }, list.map((a) =>
    h('li', { class: 'approval', 'data-by': a.by },
      h('div', { class: 'approval-head' }, badge(a.decision), ' ', h('strong', null, a.by), ' ',
        h('span', { class: 'muted small' }, when(a.at))),
      a.comment ? h('p', { class: 'comment' }, a.comment)
                : h('p', { class: 'comment muted' }, 'No comment.'))));
}

/* API.md "Routing strategies": the phases a rollout goes through before its steps. */
const PHASE_ORDER = ['shadow', 'internal', 'steps'];

function phaseText(p, policy) {
  const base = p.baseline_version ? 'v' + p.baseline_version : 'the baseline';
  const cand = 'v' + p.version;
  switch ((p.rollout || {}).phase) {
  case 'shadow':
    return 'Shadow: ' + cand + ' gets a copy of every request while ' + base +
      ' answers them; its smoke test must pass before the phase ends.';
  case 'internal': {
    const i = policy.internal || {};
    return 'Internal: only requests with ' + (i.header || 'the internal header') + ': ' +
      (i.value || '…') + ' reach ' + cand + '; everyone else gets ' + base + '.';
  }
  case 'steps':
    return 'Weighted steps.';
  default:
    return 'Not started.';
  }
}

function phaseItems(p, policy) {
  const ro = p.rollout || {};
  const at = PHASE_ORDER.indexOf(ro.phase);
  const items = [];
  if (policy.shadow_seconds > 0)
    items.push({ phase: 'shadow', label: 'shadow ' + policy.shadow_seconds + ' s' });
  if (policy.internal)
    items.push({ phase: 'internal', label: 'internal ' + policy.internal.seconds + ' s' });
  return items.map((it) => {
    const i = PHASE_ORDER.indexOf(it.phase);
    const st = at > i || (at === i && p.state === 'succeeded') ? 'done'
      : at === i ? 'current' : 'todo';
    return h('li', { class: 'step step-phase step-' + st, 'data-phase': it.phase,
                     'aria-current': st === 'current' ? 'step' : null },
             h('span', null, it.label), h('span', { class: 'sr-only' }, ' (' + st + ')'));
  });
}

function rolloutView(p) {
  const ro = p.rollout || { steps: [], step_index: -1, weight: 0 };
  const policy = (p.policy && p.policy.rollout) || {};
  const stepItems = (ro.steps || []).map((w, i) => {
    const st = i < ro.step_index || (i === ro.step_index && p.state === 'succeeded') ? 'done'
      : i === ro.step_index ? 'current' : 'todo';
    return h('li', { class: 'step step-' + st, 'aria-current': st === 'current' ? 'step' : null },
             h('span', { class: 'step-n' }, String(i + 1)),
             h('span', null, w + '%'),
             h('span', { class: 'sr-only' }, ' (' + st + ')'));
  });
  const steps = h('ol', { class: 'steps' }, phaseItems(p, policy).concat(stepItems));
  const w = ro.weight || 0;
  const routes = [];
  if (p.baseline_version && w < 100)
    routes.push({ version: p.baseline_version, weight: 100 - w });
  if (w > 0)
    routes.push({ version: p.version, weight: w });
  return h('div', { class: 'rollout' },
           h('p', { id: 'rollout-phase', 'data-phase': ro.phase || '' }, 'Phase: ',
             h('strong', null, ro.phase || 'none'), ' · ', phaseText(p, policy)),
           h('p', { id: 'rollout-weight', class: 'big' }, 'Candidate weight: ',
             h('strong', null, w + '%'),
             ro.next_step_at ? h('span', { class: 'muted small' },
                                 ro.phase === 'steps' ? ' · next step ' : ' · phase ends ',
                                 when(ro.next_step_at)) : null),
           steps,
           ACTIVE.includes(p.state) || p.state === 'succeeded' ? splitBar(routes, p.version) : null,
           h('p', { class: 'muted small' },
             'Bake time ' + (policy.bake_seconds !== undefined ? policy.bake_seconds + ' s' : '—') +
             ' per step, ' + (policy.auto_advance === false ? 'advanced by a deployer.'
                                                            : 'advances automatically.')));
}

function eventsList(p) {
  const ev = (p.events || []).slice().reverse();
  if (ev.length === 0)
    return h('p', { class: 'empty' }, 'No events.');
  return h('ol', { class: 'plain events' }, ev.map((e) =>
    h('li', null, h('span', { class: 'event-type' }, e.type), ' ',
      h('span', { class: 'muted small' }, when(e.at), e.by ? ' by ' + e.by : null),
      e.detail ? h('span', { class: 'block' }, e.detail) : null)));
}

/* Why the signed-in user may not decide, or null when they may. */
function whyNot(p, cand) {
  const me = session.me.name;
  if (!hasRole('reviewer'))
    return { id: 'not-reviewer', text: 'Only reviewers decide on promotions. You are signed in as ' +
             me + ' (' + session.me.roles.join(', ') + ').' };
  const reasons = [];
  if (cand && cand.created_by === me)
    reasons.push('you published version ' + cand.version);
  if (p.created_by === me)
    reasons.push('you requested this promotion');
  if (reasons.length)
    return { id: 'self-approval', self: true,
             text: 'You cannot approve or reject this promotion: ' + reasons.join(' and ') +
                   '. A different reviewer has to decide, so that no change reaches ' +
                   'production on one person\'s word.' };
  /* The server's word on the rest: teams, metric contributors, every rule. */
  if (p.viewer && !p.viewer.can_decide && p.state === 'awaiting_approval' &&
      !(p.approvals || []).some((a) => a.by === me))
    return { id: /appended a metric/.test(p.viewer.reason || '') ? 'self-approval' : 'not-allowed',
             self: /appended a metric/.test(p.viewer.reason || ''),
             text: 'You cannot approve or reject this promotion: ' + p.viewer.reason + '.' };
  const mine = (p.approvals || []).find((a) => a.by === me);
  if (mine)
    return { id: 'already-decided', text: 'You ' + (mine.decision === 'approve' ? 'approved'
                                                                                  : 'rejected') +
             ' this promotion ' + ago(mine.at) + '.' };
  return null;
}

function decisionPanel(p, cand, onDone) {
  const appr = approvalsOf(p);
  const box = h('section', { class: 'card decide', id: 'decision', 'aria-labelledby': 'decide-h' },
                h('h2', { id: 'decide-h' }, 'Decision'));
  add(box, h('p', { class: 'big', id: 'approval-count' },
             h('strong', null, appr.given + ' of ' + appr.required), ' approvals',
             p.state === 'awaiting_approval'
               ? h('span', { class: 'muted' }, ' · ' + appr.needed + ' more needed') : null,
             p.state === 'awaiting_approval' && missingGroup(p)
               ? h('span', { class: 'block', id: 'missing-group' },
                   'Still needed from a team: ' + missingGroup(p)) : null));
  if (p.state !== 'awaiting_approval') {
    const text = {
      evaluating: 'Gates are still being evaluated; decisions open once they pass.',
      rolling_out: 'Approved. The rollout is in progress.',
      succeeded: 'Approved and fully rolled out.',
      rejected: 'This promotion was rejected.',
      aborted: 'This promotion was aborted.',
      rolled_back: 'This promotion was rolled back.',
    }[p.state] || 'Nothing to decide.';
    add(box, h('p', { id: 'decision-closed' }, text));
    return box;
  }
  const why = whyNot(p, cand);
  if (why) {
    add(box, h('div', { class: 'notice ' + (why.self ? 'notice-warn' : 'notice-info'),
                        id: why.id, role: 'note' }, why.text));
    return box;
  }
  const ta = h('textarea', { id: 'comment', rows: '4', maxlength: '4000',
                             'aria-describedby': 'comment-help', oninput: () => {
                               drafts[p.id] = ta.value;
                               err.textContent = '';
                             } });
  ta.value = drafts[p.id] || '';
  const err = h('div', { class: 'form-error', id: 'decision-error', role: 'alert' });
  const send = async (decision) => {
    const comment = ta.value.trim();
    err.textContent = '';
    if (decision === 'reject' && !comment) {
      err.textContent = 'Say why you reject: a comment is required.';
      ta.focus();
      return;
    }
    approve.disabled = reject.disabled = true;
    try {
      const body = { decision };
      if (comment)
        body.comment = comment;
      const np = await api('POST', '/api/v1/promotions/' + enc(p.id) + '/approvals', body);
      delete drafts[p.id];
      view.flash = { tone: 'good', text: decision === 'approve'
        ? 'You approved this promotion.' : 'You rejected this promotion.' };
      onDone(np);
    } catch (e) {
      err.textContent = e.message;
      approve.disabled = reject.disabled = false;
    }
  };
  const approve = h('button', { type: 'button', class: 'btn btn-good', id: 'approve',
                                onclick: () => send('approve') }, 'Approve');
  const reject = h('button', { type: 'button', class: 'btn btn-bad', id: 'reject',
                               onclick: () => send('reject') }, 'Reject');
  add(box, h('label', { for: 'comment' }, 'Comment'),
      h('p', { id: 'comment-help', class: 'muted small' },
        'Optional when approving, required when rejecting. Shown to everyone as plain text.'),
      ta, err, h('div', { class: 'actions' }, approve, reject));
  return box;
}

/* Who ended a finished promotion, as far as it says: the rejecting reviewer, else the
 * last event's detail. */
function endedLine(p) {
  const last = (p.events || [])[(p.events || []).length - 1];
  const rej = (p.approvals || []).filter((a) => a.decision === 'reject').pop();
  const by = p.state === 'rejected' && rej ? rej.by
    : (last && last.by) || null;
  return h('div', { class: 'notice notice-info finished-note', id: 'promo-ended', role: 'status' },
           'Finished: ', h('strong', null, badge(p.state)), ' ',
           when(p.updated_at || (last && last.at)),
           by ? [' by ', h('strong', { id: 'promo-ended-by' }, by)] : null,
           last && last.detail ? h('span', { class: 'block small' }, last.detail) : null,
           h('span', { class: 'block small' }, 'Nothing on this page changes any more.'));
}

async function loadPromotion(id, pIn) {
  const p = pIn || await api('GET', '/api/v1/promotions/' + enc(id));
  const vbase = '/api/v1/models/' + enc(p.model) + '/versions/';
  const [cand, base, smoke, model] = await Promise.all([
    api('GET', vbase + enc(p.version)),
    p.baseline_version ? maybe(vbase + enc(p.baseline_version)) : Promise.resolve(null),
    maybe(vbase + enc(p.version) + '/smoke-tests?limit=6'),
    maybe('/api/v1/models/' + enc(p.model)),
  ]);
  /* Metric directions the model declares, for the metrics table and chart. */
  const pm = Object.assign({}, p, { model_info: model ? { metric_directions: model.metric_directions } : null });
  return { p: pm, cand, base, smoke: (smoke && smoke.items) || [] };
}

export async function renderPromotion(seq, id, pIn) {
  let data = await loadPromotion(id, pIn);
  if (seq !== view.seq)
    return;
  let last = '';

  const draw = (d) => {
    const { p, cand, base, smoke } = d;
    const appr = approvalsOf(p);
    /* Keep the reviewer's place if the page redraws while they type. */
    const active = document.activeElement;
    const typing = active && active.id === 'comment';
    const sel = typing ? [active.selectionStart, active.selectionEnd] : null;
    const scrollY = window.scrollY;

    const finished = !ACTIVE.includes(p.state);
    mount(
      h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' },
        h('a', { href: '#/queue' }, 'Review queue'), ' / ',
        h('a', { href: '#/models/' + enc(p.model) }, p.model), ' / ',
        h('span', null, 'promotion ' + p.id)),
      h('div', { class: 'page-head' },
        h('div', null,
          h('h1', null, h('span', { id: 'promo-title' }, promoTitle(p)), ' ',
            h('span', { id: 'promo-state' }, badge(p.state))),
          h('p', { class: 'muted' },
            'Requested by ', h('strong', null, p.created_by), ' ', when(p.created_at),
            ' · candidate ', versionLink(p.model, p.version),
            ' · baseline ', p.baseline_version ? [versionLink(p.model, p.baseline_version),
                                                  ' (last known good)']
                                               : 'none (first release)',
            p.reason ? [' · reason: ', h('span', { class: 'reason' }, p.reason)] : null))),
      finished ? endedLine(p) : null,
      h('div', { class: 'layout' + (finished ? ' is-finished' : ''), 'data-finished':
                 finished ? 'yes' : 'no' },
        h('div', { class: 'main-col' },
          section('Metrics', 'metrics', metricsTable(p, cand, base),
                  metricsChart(p, cand, base)),
          section('Gates', 'gates', gatesTable(p, appr)),
          p.analysis ? section('Live analysis', 'analysis', analysisCharts(p.analysis)) : null,
          section('Candidate and baseline', 'compare', compareTable(p, cand, base)),
          section('Inputs and outputs', 'schema', schemaDiff(p, cand, base)),
          section('Memory estimate', 'vram', vramInputs(cand, base)),
          section('Smoke tests', 'smoke', smokeList(smoke, p.gates))),
        h('div', { class: 'side-col' },
          decisionPanel(p, cand, (np) => {
            data = Object.assign({}, data, { p: Object.assign({}, np, { model_info: data.p.model_info }) });
            draw(data);
            refresh();
          }),
          section('Approvals', 'approvals', approvalsList(p)),
          section('Rollout', 'rollout', rolloutView(p)),
          section('Events', 'events', eventsList(p)))));

    if (typing) {
      const ta = document.getElementById('comment');
      if (ta) {
        ta.focus();
        ta.setSelectionRange(sel[0], sel[1]);
      }
    }
    window.scrollTo(0, scrollY);
  };

  const schedule = () => {
    stopPoll();
    if (ACTIVE.includes(data.p.state) || data.smoke.some((t) => t.state === 'queued' ||
                                                                 t.state === 'running'))
      view.pollTimer = setTimeout(refresh, POLL_MS);
  };

  const refresh = async () => {
    try {
      const d = await loadPromotion(id);
      if (seq !== view.seq)
        return;
      const key = JSON.stringify([d.p, d.smoke]);
      if (key !== last) {
        last = key;
        data = d;
        draw(d);
      }
      schedule();
    } catch (e) {
      if (seq === view.seq && e.status !== 401)
        schedule();
    }
  };

  last = JSON.stringify([data.p, data.smoke]);
  draw(data);
  schedule();
}
