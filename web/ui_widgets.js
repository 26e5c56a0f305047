/* Building blocks every page uses: badges, tables, cards, notices, and mount(),
 * which puts a page into #app. */

import { add, clear, h } from './ui_dom.js';
import { ago, routesText } from './ui_format.js';
import { view } from './ui_state.js';

export function when(iso) {
  if (!iso)
    return h('span', { class: 'muted' }, '—');
  return h('time', { datetime: iso, title: iso }, ago(iso));
}

/* A long identifier: monospace, wraps anywhere, full value on hover. */
export function mono(text, full) {
  if (text === null || text === undefined || text === '')
    return h('span', { class: 'muted' }, '—');
  return h('code', { class: 'mono', title: full || text }, text);
}

const STATE_LABEL = {
  evaluating: 'evaluating',
  awaiting_approval: 'awaiting approval',
  rolling_out: 'rolling out',
  succeeded: 'succeeded',
  rejected: 'rejected',
  aborted: 'aborted',
  rolled_back: 'rolled back',
  passed: 'passed',
  failed: 'failed',
  pending: 'pending',
  running: 'running',
  skipped: 'skipped',
  queued: 'queued',
  error: 'error',
  in_sync: 'in sync',
  failing: 'failing',
  approve: 'approved',
  reject: 'rejected',
};

const STATE_TONE = {
  evaluating: 'info', awaiting_approval: 'warn', rolling_out: 'info', succeeded: 'good',
  rejected: 'bad', aborted: 'bad', rolled_back: 'bad', passed: 'good', failed: 'bad',
  pending: 'warn', running: 'info', skipped: 'neutral', queued: 'neutral', error: 'bad',
  in_sync: 'good', failing: 'bad', approve: 'good', reject: 'bad',
  ready: 'good', archived: 'neutral', deleted: 'bad',
};

export function badge(st, label) {
  const tone = STATE_TONE[st] || 'neutral';
  return h('span', { class: 'badge badge-' + tone, 'data-state': st },
           label || STATE_LABEL[st] || String(st));
}

export function mount(...nodes) {
  const app = document.getElementById('app');
  clear(app);
  /* A notice stays while the page it was made for redraws itself, and goes
   * with the next navigation. */
  if (view.flash && view.flash.seq === undefined)
    view.flash.seq = view.seq;
  if (view.flash && view.flash.seq !== view.seq)
    view.flash = null;
  if (view.flash)
    add(app, notice(view.flash.tone, view.flash.text, 'flash'));
  add(app, nodes);
  const h1 = app.querySelector('h1');
  document.title = (h1 ? h1.textContent.replace(/\s+/g, ' ').trim() + ' · ' : '') + 'modelgate';
}

export function notice(tone, text, id) {
  return h('div', { class: 'notice notice-' + tone, role: tone === 'bad' ? 'alert' : 'status',
                    id: id || null }, text);
}

export function section(title, id, ...body) {
  const hid = id ? id + '-h' : null;
  return h('section', { class: 'card', id, 'aria-labelledby': hid },
           h('h2', { id: hid }, title), body);
}

export function table(cls, head, rows, caption) {
  return h('div', { class: 'table-wrap' },
           h('table', { class: 'tbl ' + (cls || '') },
             caption ? h('caption', { class: 'sr-only' }, caption) : null,
             h('thead', null, h('tr', null, head.map((c) => h('th', { scope: 'col' }, c)))),
             h('tbody', null, rows)));
}

/* A row whose cells carry their column name for the narrow-screen layout. */
export function row(head, cells, attrs) {
  return h('tr', attrs || null,
           cells.map((c, i) => h('td', { 'data-label': head[i] instanceof Node
                                                  ? head[i].textContent : head[i] }, c)));
}

export function showError(e, what) {
  if (e && e.status === 401)
    return; /* already back at the sign-in page */
  let text = (what ? what + ': ' : '') + (e && e.message ? e.message : String(e));
  if (e && e.status === 403 && e.code === 'forbidden')
    text += ' Your token may lack the reader role, which every page needs.';
  mount(notice('bad', text, 'page-error'));
}

export function tagsList(tags) {
  const keys = Object.keys(tags || {}).sort();
  if (keys.length === 0)
    return h('span', { class: 'muted' }, 'none');
  return h('ul', { class: 'tags' },
           keys.map((k) => h('li', { class: 'tag' },
                             h('span', { class: 'tag-k' }, k), h('span', { class: 'tag-v' },
                                                                   String(tags[k])))));
}

/* The traffic split as a bar; `hot` (default: the newest version routed) is blue. */
export function splitBar(routes, hot) {
  const bar = h('div', { class: 'split', role: 'img',
                         'aria-label': 'Traffic split: ' + routesText(routes) });
  const newest = hot || (routes || []).reduce((m, r) => Math.max(m, r.version), 0);
  (routes || []).forEach((r, i) => {
    const tone = r.version === newest ? 'new' : String(i % 3);
    const seg = h('div', { class: 'split-seg split-seg-' + tone },
                  h('span', { class: 'split-label' }, 'v' + r.version + ' ' + r.weight + '%'));
    seg.style.width = r.weight + '%';   /* CSSOM, allowed by the CSP */
    if (r.weight < 12)
      seg.classList.add('split-seg-narrow');
    add(bar, seg);
  });
  if (!routes || routes.length === 0)
    add(bar, h('div', { class: 'split-empty' }, 'no traffic'));
  return bar;
}
