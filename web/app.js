/*
 * modelgate reviewer UI.
 *
 * Plain JavaScript, no build step, nothing loaded from elsewhere. Pages are
 * chosen by the URL hash: #/queue, #/promotions/ID, #/models, #/models/NAME,
 * #/datasets/DIGEST.
 *
 * Everything that came from the server (names, tags, comments, log tails) is
 * data: it only ever reaches the page through textContent, attribute values
 * set with setAttribute, or SVG text nodes. Nothing here uses innerHTML,
 * insertAdjacentHTML, document.write or eval, and no inline style is written
 * as a string (the server's Content-Security-Policy forbids it); sizes are set
 * through the CSSOM.
 */
'use strict';

(function () {
  const SVGNS = 'http://www.w3.org/2000/svg';
  const ACTIVE = ['evaluating', 'awaiting_approval', 'rolling_out'];
  const POLL_MS = 2000;

  const session = { me: null, csrf: null };
  let renderSeq = 0;       /* bumps on every navigation; stale async renders give up */
  let pollTimer = null;
  let flash = null;        /* a one-shot notice shown on the next page render */
  const drafts = {};       /* unsent review comments by promotion id */

  /* ---- DOM helpers ------------------------------------------------------ */

  /* h('a', {href: '#/x', class: 'c'}, 'text', child, [more]) */
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    setAttrs(el, attrs);
    add(el, children);
    return el;
  }

  function s(tag, attrs, ...children) {
    const el = document.createElementNS(SVGNS, tag);
    setAttrs(el, attrs);
    add(el, children);
    return el;
  }

  function setAttrs(el, attrs) {
    if (!attrs)
      return;
    for (const [k, v] of Object.entries(attrs)) {
      if (v === null || v === undefined || v === false)
        continue;
      if (k === 'class')
        el.setAttribute('class', v);
      else if (k.startsWith('on') && typeof v === 'function')
        el.addEventListener(k.slice(2), v);
      else
        el.setAttribute(k, v === true ? '' : String(v));
    }
  }

  /* Children are nodes or text; text always becomes a Text node. */
  function add(el, ...children) {
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false)
        continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }

  function clear(el) {
    while (el.firstChild)
      el.removeChild(el.firstChild);
  }

  /* Only this server's own paths ever become links. */
  function localPath(u) {
    return typeof u === 'string' && /^\/(?!\/)[\x21-\x7e]*$/.test(u) && !u.includes('\\');
  }

  function enc(x) {
    return encodeURIComponent(String(x));
  }

  /* ---- formatting ------------------------------------------------------- */

  function fmtNum(x) {
    if (typeof x !== 'number' || !isFinite(x))
      return x === null || x === undefined ? '—' : String(x);
    if (Number.isInteger(x))
      return String(x);
    const a = Math.abs(x);
    if (a >= 1000)
      return x.toFixed(1);
    return String(parseFloat(x.toPrecision(4)));
  }

  function fmtDelta(x) {
    if (x === 0)
      return '0';
    return (x > 0 ? '+' : '−') + fmtNum(Math.abs(x));
  }

  function ago(iso) {
    if (!iso)
      return '—';
    const t = Date.parse(iso);
    if (isNaN(t))
      return String(iso);
    let sec = Math.round((Date.now() - t) / 1000);
    const future = sec < 0;
    sec = Math.abs(sec);
    let txt;
    if (sec < 5)
      return future ? 'in a moment' : 'just now';
    if (sec < 60)
      txt = sec + ' s';
    else if (sec < 3600)
      txt = Math.floor(sec / 60) + ' min';
    else if (sec < 86400)
      txt = Math.floor(sec / 3600) + ' h';
    else
      txt = Math.floor(sec / 86400) + ' d';
    return future ? 'in ' + txt : txt + ' ago';
  }

  function when(iso) {
    if (!iso)
      return h('span', { class: 'muted' }, '—');
    return h('time', { datetime: iso, title: iso }, ago(iso));
  }

  function shortDigest(d) {
    if (typeof d !== 'string')
      return '—';
    const m = /^sha256:([0-9a-f]{12})[0-9a-f]*$/.exec(d);
    return m ? 'sha256:' + m[1] + '…' : d;
  }

  /* A long identifier: monospace, wraps anywhere, full value on hover. */
  function mono(text, full) {
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
  };

  function badge(st, label) {
    const tone = STATE_TONE[st] || 'neutral';
    return h('span', { class: 'badge badge-' + tone, 'data-state': st },
             label || STATE_LABEL[st] || String(st));
  }

  function hasRole(r) {
    const roles = (session.me && session.me.roles) || [];
    return roles.includes(r) || roles.includes('admin');
  }

  function routesText(routes) {
    if (!routes || routes.length === 0)
      return 'no traffic';
    return routes.map((r) => 'v' + r.version + ' ' + r.weight + '%').join(' · ');
  }

  /* ---- API -------------------------------------------------------------- */

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  async function api(method, path, body) {
    const opt = { method, headers: { Accept: 'application/json' }, credentials: 'same-origin',
                  cache: 'no-store' };
    if (body !== undefined) {
      opt.headers['Content-Type'] = 'application/json';
      opt.body = JSON.stringify(body);
    }
    if (method !== 'GET' && session.csrf)
      opt.headers['X-CSRF-Token'] = session.csrf;
    let res;
    try {
      res = await fetch(path, opt);
    } catch (e) {
      throw new ApiError(0, 'network', 'The server could not be reached.');
    }
    if (res.status === 204)
      return null;
    let data = null;
    try {
      data = await res.json();
    } catch (e) {
      data = null;
    }
    if (!res.ok) {
      const err = (data && data.error) || {};
      const e = new ApiError(res.status, err.code || 'http_' + res.status,
                             err.message || 'The server answered ' + res.status + '.');
      if (res.status === 401 && path !== '/ui/session') {
        session.me = null;
        session.csrf = null;
        flash = { tone: 'warn', text: 'Your session has ended. Sign in again.' };
        renderChrome();
        route();
      }
      throw e;
    }
    return data;
  }

  /* GET that yields null on 404 instead of throwing. */
  async function maybe(path) {
    try {
      return await api('GET', path);
    } catch (e) {
      if (e.status === 404)
        return null;
      throw e;
    }
  }

  /* ---- chrome: navigation and who is signed in -------------------------- */

  function renderChrome() {
    const nav = document.getElementById('nav');
    const who = document.getElementById('who');
    clear(nav);
    clear(who);
    if (!session.me)
      return;
    const cur = location.hash || '#/queue';
    const link = (href, label, match) =>
      h('a', { href, class: 'nav-link', 'aria-current': match.test(cur) ? 'page' : null }, label);
    add(nav, [link('#/queue', 'Review queue', /^#\/(queue|promotions)/),
              link('#/models', 'Models', /^#\/(models|datasets)/)]);
    add(who, [
      h('span', { class: 'who-name', title: 'roles: ' + session.me.roles.join(', ') },
        h('span', { class: 'who-label' }, 'Signed in as '), h('strong', null, session.me.name),
        h('span', { class: 'who-roles' }, ' (' + session.me.roles.join(', ') + ')')),
      h('button', { type: 'button', class: 'btn btn-small', id: 'sign-out', onclick: signOut },
        'Sign out'),
    ]);
  }

  async function signOut() {
    try {
      await api('DELETE', '/ui/session');
    } catch (e) {
      /* the session is gone either way */
    }
    session.me = null;
    session.csrf = null;
    flash = { tone: 'info', text: 'You have signed out.' };
    renderChrome();
    if (location.hash !== '#/queue')
      location.hash = '#/queue';
    else
      route();
  }

  /* ---- page scaffolding ------------------------------------------------- */

  function stopPoll() {
    if (pollTimer) {
      clearTimeout(pollTimer);
      pollTimer = null;
    }
  }

  function mount(...nodes) {
    const app = document.getElementById('app');
    clear(app);
    /* A notice stays while the page it was made for redraws itself, and goes
     * with the next navigation. */
    if (flash && flash.seq === undefined)
      flash.seq = renderSeq;
    if (flash && flash.seq !== renderSeq)
      flash = null;
    if (flash)
      add(app, notice(flash.tone, flash.text, 'flash'));
    add(app, nodes);
    const h1 = app.querySelector('h1');
    document.title = (h1 ? h1.textContent.replace(/\s+/g, ' ').trim() + ' · ' : '') + 'modelgate';
  }

  function notice(tone, text, id) {
    return h('div', { class: 'notice notice-' + tone, role: tone === 'bad' ? 'alert' : 'status',
                      id: id || null }, text);
  }

  function section(title, id, ...body) {
    const hid = id ? id + '-h' : null;
    return h('section', { class: 'card', id, 'aria-labelledby': hid },
             h('h2', { id: hid }, title), body);
  }

  function table(cls, head, rows, caption) {
    return h('div', { class: 'table-wrap' },
             h('table', { class: 'tbl ' + (cls || '') },
               caption ? h('caption', { class: 'sr-only' }, caption) : null,
               h('thead', null, h('tr', null, head.map((c) => h('th', { scope: 'col' }, c)))),
               h('tbody', null, rows)));
  }

  /* A row whose cells carry their column name for the narrow-screen layout. */
  function row(head, cells, attrs) {
    return h('tr', attrs || null,
             cells.map((c, i) => h('td', { 'data-label': head[i] }, c)));
  }

  function showError(e, what) {
    if (e && e.status === 401)
      return; /* already back at the sign-in page */
    let text = (what ? what + ': ' : '') + (e && e.message ? e.message : String(e));
    if (e && e.status === 403 && e.code === 'forbidden')
      text += ' Your token may lack the reader role, which every page needs.';
    mount(notice('bad', text, 'page-error'));
  }

  /* ---- sign in ---------------------------------------------------------- */

  function renderSignIn() {
    const input = h('input', { id: 'token', name: 'token', type: 'password', autocomplete: 'off',
                               spellcheck: 'false', required: true,
                               'aria-describedby': 'token-help' });
    const err = h('div', { class: 'form-error', id: 'signin-error', role: 'alert' });
    const btn = h('button', { type: 'submit', class: 'btn btn-primary', id: 'sign-in' },
                  'Sign in');
    const form = h('form', { class: 'signin', id: 'signin-form', novalidate: true },
                   h('h1', null, 'Sign in'),
                   h('p', { id: 'token-help', class: 'muted' },
                     'Paste an API token. It is traded for a session cookie; the page does not ' +
                     'keep the token.'),
                   h('label', { for: 'token' }, 'API token'), input, err,
                   h('div', { class: 'actions' }, btn));
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      err.textContent = '';
      const token = input.value.trim();
      if (!token) {
        err.textContent = 'Paste a token first.';
        input.focus();
        return;
      }
      btn.disabled = true;
      try {
        const me = await api('POST', '/ui/session', { token });
        session.me = { name: me.name, roles: me.roles || [] };
        session.csrf = me.csrf;
        input.value = '';
        renderChrome();
        route();
      } catch (e) {
        err.textContent = e.status === 401 ? 'That token is unknown or was revoked.' : e.message;
        btn.disabled = false;
        input.focus();
      }
    });
    mount(form);
    input.focus();
  }

  /* ---- review queue ----------------------------------------------------- */

  /* The approval group still short, as the approval gate says it ("risk: 0 of 1"). */
  function missingGroup(p) {
    const g = (p.gates || []).find((x) => x.kind === 'approval');
    const m = g && /;\s*([a-z0-9-]+: \d+ of \d+)/.exec(g.detail || '');
    return m ? m[1] : null;
  }

  function approvalsOf(p) {
    const required = (p.policy && p.policy.approvals && p.policy.approvals.required) || 0;
    const given = (p.approvals || []).filter((a) => a.decision === 'approve').length;
    return { required, given, needed: Math.max(0, required - given) };
  }

  function byNewest(a, b) {
    return String(b.created_at).localeCompare(String(a.created_at));
  }

  function promoTitle(p) {
    return p.model + ' v' + p.version + ' → ' + p.alias;
  }

  async function renderQueue(seq) {
    const [waiting, recent] = await Promise.all([
      api('GET', '/api/v1/promotions?state=awaiting_approval&limit=200'),
      api('GET', '/api/v1/promotions?limit=100'),
    ]);
    if (seq !== renderSeq)
      return;
    const items = (waiting.items || []).slice().sort(byNewest);
    const head = ['Promotion', 'Model', 'Version', 'Alias', 'Requested by', 'Age',
                  'Approvals needed', 'You'];
    const rows = items.map((p) => {
      const a = approvalsOf(p);
      const mayDecide = !p.viewer || p.viewer.can_decide;
      return row(head, [
        h('a', { href: '#/promotions/' + enc(p.id), class: 'strong-link' }, promoTitle(p)),
        h('a', { href: '#/models/' + enc(p.model) }, p.model),
        'v' + p.version,
        p.alias,
        p.created_by,
        when(p.created_at),
        h('span', { class: 'needed' },
          h('strong', null, a.needed + ' more'),
          h('span', { class: 'muted' }, ' (' + a.given + ' of ' + a.required + ' given)'),
          missingGroup(p) ? h('span', { class: 'block muted small missing-group' },
                              'still needed: ' + missingGroup(p)) : null),
        mayDecide ? h('span', { class: 'may-decide' }, 'may decide')
                  : h('span', { class: 'read-only muted small', title: p.viewer.reason },
                      'read-only: ' + p.viewer.reason),
      ], { 'data-promotion': p.id, 'data-may-decide': mayDecide ? 'yes' : 'no' });
    });
    const others = (recent.items || []).filter((p) => p.state !== 'awaiting_approval')
      .sort(byNewest).slice(0, 20);
    const rhead = ['Promotion', 'State', 'Requested by', 'Updated'];
    const rrows = others.map((p) => row(rhead, [
      h('a', { href: '#/promotions/' + enc(p.id) }, promoTitle(p)),
      badge(p.state),
      p.created_by,
      when(p.updated_at || p.created_at),
    ], { 'data-promotion': p.id }));

    mount(
      h('div', { class: 'page-head' },
        h('div', null,
          h('h1', null, 'Review queue'),
          h('p', { class: 'muted' }, 'Promotions waiting for approval, newest first.')),
        h('button', { type: 'button', class: 'btn', onclick: () => route() }, 'Refresh')),
      h('section', { class: 'card', id: 'queue', 'aria-label': 'Waiting for approval' },
        items.length
          ? table('queue-table', head, rows, 'Promotions waiting for approval')
          : h('p', { class: 'empty', id: 'queue-empty' }, 'Nothing is waiting for review.')),
      section('Recent promotions', 'recent',
              others.length ? table('recent-table', rhead, rrows, 'Recent promotions')
                            : h('p', { class: 'empty' }, 'No other promotions yet.')));
  }

  /* ---- promotion page --------------------------------------------------- */

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
          allow = ' (±' + fmtNum(t.max_regression) + ')';
        else if (t.max_regression_pct !== undefined)
          allow = ' (±' + fmtNum(t.max_regression_pct) + '%)';
        parts.push(t.op + ' baseline' + allow);
      } else {
        parts.push(t.op + ' ' + fmtNum(t.value));
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

  function metricsTable(p, cand, base) {
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
        fmtNum(b), h('strong', null, fmtNum(c)), delta,
        thresholdText(p.policy, n) || h('span', { class: 'muted' }, '—'),
      ], { 'data-metric': n });
    });
    return table('metrics-table', head, rows, 'Metrics, baseline against candidate');
  }

  /* Horizontal bars per metric, baseline over candidate, scaled per metric. */
  function metricsChart(p, cand, base) {
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

  function tagsList(tags) {
    const keys = Object.keys(tags || {}).sort();
    if (keys.length === 0)
      return h('span', { class: 'muted' }, 'none');
    return h('ul', { class: 'tags' },
             keys.map((k) => h('li', { class: 'tag' },
                               h('span', { class: 'tag-k' }, k), h('span', { class: 'tag-v' },
                                                                     String(tags[k])))));
  }

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
  function compareTable(p, cand, base) {
    const head = ['', 'Baseline' + (base ? ' v' + base.version : ''),
                  'Candidate v' + cand.version];
    const both = (label, f) => row(head, [h('strong', null, label),
                                          base ? f(base, false) : h('span', { class: 'muted' },
                                                                    'no baseline'),
                                          f(cand, true)]);
    const rows = [
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

  function gatesTable(p, appr) {
    const head = ['Gate', 'Kind', 'Status', 'Observed', 'Expected', 'Detail'];
    const gates = (p.gates || []).slice();
    const rows = gates.map((g) => row(head, [
      h('strong', null, g.name), g.kind, badge(g.status),
      g.observed === null || g.observed === undefined ? h('span', { class: 'muted' }, '—')
        : typeof g.observed === 'number' ? fmtNum(g.observed)
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
  function smokeList(tests, gates) {
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

  /* The traffic split as a bar; `hot` (default: the newest version routed) is blue. */
  function splitBar(routes, hot) {
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

  function rolloutView(p) {
    const ro = p.rollout || { steps: [], step_index: -1, weight: 0 };
    const steps = h('ol', { class: 'steps' }, (ro.steps || []).map((w, i) => {
      const st = i < ro.step_index || (i === ro.step_index && p.state === 'succeeded') ? 'done'
        : i === ro.step_index ? 'current' : 'todo';
      return h('li', { class: 'step step-' + st, 'aria-current': st === 'current' ? 'step' : null },
               h('span', { class: 'step-n' }, String(i + 1)),
               h('span', null, w + '%'),
               h('span', { class: 'sr-only' }, ' (' + st + ')'));
    }));
    const w = ro.weight || 0;
    const routes = [];
    if (p.baseline_version && w < 100)
      routes.push({ version: p.baseline_version, weight: 100 - w });
    if (w > 0)
      routes.push({ version: p.version, weight: w });
    const policy = (p.policy && p.policy.rollout) || {};
    return h('div', { class: 'rollout' },
             h('p', { id: 'rollout-weight', class: 'big' }, 'Candidate weight: ',
               h('strong', null, w + '%'),
               ro.next_step_at ? h('span', { class: 'muted small' }, ' · next step ',
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
        h('span', { class: 'muted small' }, when(e.at)),
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
        flash = { tone: 'good', text: decision === 'approve'
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

  async function loadPromotion(id, pIn) {
    const p = pIn || await api('GET', '/api/v1/promotions/' + enc(id));
    const vbase = '/api/v1/models/' + enc(p.model) + '/versions/';
    const [cand, base, smoke] = await Promise.all([
      api('GET', vbase + enc(p.version)),
      p.baseline_version ? maybe(vbase + enc(p.baseline_version)) : Promise.resolve(null),
      maybe(vbase + enc(p.version) + '/smoke-tests?limit=6'),
    ]);
    return { p, cand, base, smoke: (smoke && smoke.items) || [] };
  }

  async function renderPromotion(seq, id, pIn) {
    let data = await loadPromotion(id, pIn);
    if (seq !== renderSeq)
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
              ' · baseline ', p.baseline_version ? 'v' + p.baseline_version + ' (last known good)'
                                                 : 'none (first release)',
              p.reason ? [' · reason: ', h('span', { class: 'reason' }, p.reason)] : null))),
        h('div', { class: 'layout' },
          h('div', { class: 'main-col' },
            section('Metrics', 'metrics', metricsTable(p, cand, base),
                    metricsChart(p, cand, base)),
            section('Candidate and baseline', 'compare', compareTable(p, cand, base)),
            section('Gates', 'gates', gatesTable(p, appr)),
            section('Smoke tests', 'smoke', smokeList(smoke, p.gates))),
          h('div', { class: 'side-col' },
            decisionPanel(p, cand, (np) => {
              data = Object.assign({}, data, { p: np });
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
        pollTimer = setTimeout(refresh, POLL_MS);
    };

    const refresh = async () => {
      try {
        const d = await loadPromotion(id);
        if (seq !== renderSeq)
          return;
        const key = JSON.stringify([d.p, d.smoke]);
        if (key !== last) {
          last = key;
          data = d;
          draw(d);
        }
        schedule();
      } catch (e) {
        if (seq === renderSeq && e.status !== 401)
          schedule();
      }
    };

    last = JSON.stringify([data.p, data.smoke]);
    draw(data);
    schedule();
  }

  /* ---- models ----------------------------------------------------------- */

  async function renderModels(seq) {
    const list = await api('GET', '/api/v1/models?limit=200');
    if (seq !== renderSeq)
      return;
    const head = ['Model', 'Description', 'Latest', 'Aliases', 'Published by'];
    const rows = (list.items || []).map((m) => row(head, [
      h('a', { href: '#/models/' + enc(m.name), class: 'strong-link' }, m.name),
      m.description || h('span', { class: 'muted' }, '—'),
      m.latest_version ? 'v' + m.latest_version : '—',
      (m.aliases || []).length
        ? h('ul', { class: 'plain' }, m.aliases.map((a) =>
          h('li', null, h('strong', null, a.alias), ': ', routesText(a.routes))))
        : h('span', { class: 'muted' }, 'none'),
      m.created_by,
    ]));
    mount(h('div', { class: 'page-head' }, h('h1', null, 'Models')),
          h('section', { class: 'card' },
            rows.length ? table('models-table', head, rows, 'Models')
                        : h('p', { class: 'empty' }, 'No models yet.')));
  }

  /* Mark the history entry that made the last-known-good version whole. */
  function lkgGeneration(history, lkg) {
    if (!lkg)
      return null;
    for (const e of history) {
      const r = e.routes || [];
      if (r.length === 1 && r[0].version === lkg.version && r[0].weight === 100)
        return e.generation;
    }
    return null;
  }

  function rollbackDialog(model, a, onDone) {
    const newest = (a.routes || []).reduce((m, r) => Math.max(m, r.version), 0);
    const reason = h('textarea', { id: 'rollback-reason', rows: '3', maxlength: '1000',
                                   required: true });
    const err = h('div', { class: 'form-error', id: 'rollback-error', role: 'alert' });
    const ok = h('button', { type: 'button', class: 'btn btn-bad', id: 'rollback-confirm' },
                 'Roll back');
    const cancel = h('button', { type: 'button', class: 'btn', id: 'rollback-cancel' }, 'Cancel');
    const dlg = h('dialog', { class: 'dialog', id: 'rollback-dialog',
                              'aria-labelledby': 'rollback-title' },
                  h('h2', { id: 'rollback-title' }, 'Roll back ' + a.alias + '?'),
                  h('p', null, 'All traffic of ', h('strong', null, model + ' / ' + a.alias),
                    ' moves to the most recent known-good version other than v' + newest +
                    (a.last_known_good && a.last_known_good.version !== newest
                      ? ' (v' + a.last_known_good.version + ')' : '') +
                    '. v' + newest + ' is marked bad for this alias, and any active promotion ' +
                    'ends as rolled back. No gates are checked.'),
                  h('label', { for: 'rollback-reason' }, 'Reason (required)'), reason, err,
                  h('div', { class: 'actions' }, cancel, ok));
    cancel.addEventListener('click', () => dlg.close());
    dlg.addEventListener('close', () => dlg.remove());
    ok.addEventListener('click', async () => {
      const why = reason.value.trim();
      if (!why) {
        err.textContent = 'Say why you roll back: a reason is required.';
        reason.focus();
        return;
      }
      ok.disabled = cancel.disabled = true;
      try {
        const na = await api('POST', '/api/v1/models/' + enc(model) + '/aliases/' + enc(a.alias) +
                             '/rollback', { reason: why });
        dlg.close();
        flash = { tone: 'good', text: 'Rolled back ' + a.alias + ': ' + routesText(na.routes) + '.' };
        onDone();
      } catch (e) {
        err.textContent = e.message;
        ok.disabled = cancel.disabled = false;
      }
    });
    document.body.append(dlg);
    dlg.showModal();
    reason.focus();
  }

  function aliasCard(model, a, history, versionsByN) {
    const lkg = a.last_known_good;
    const lkgGen = lkgGeneration(history, lkg);
    const gens = a.generation;
    const dhead = ['Gateway', 'State', 'Generation', 'Attempts', 'Last error', 'Acknowledged'];
    const drows = (a.deliveries || []).map((d) => row(dhead, [
      h('strong', null, d.gateway), badge(d.state),
      String(d.generation) + (d.generation !== gens ? ' (alias at ' + gens + ')' : ''),
      String(d.attempts),
      d.last_error ? h('span', { class: 'error-text' }, d.last_error)
                   : h('span', { class: 'muted' }, '—'),
      when(d.acked_at),
    ], { 'data-gateway': d.gateway }));
    const hhead = ['Gen.', 'Routes', 'Change', 'By', 'Reason', 'When'];
    const hrows = history.map((e) => row(hhead, [
      String(e.generation),
      h('span', null, routesText(e.routes),
        e.generation === lkgGen ? [' ', h('span', { class: 'badge badge-good lkg',
                                                     title: 'last known good' }, 'LKG')] : null),
      h('span', null, e.kind || '—',
        e.promotion ? [' ', h('a', { href: '#/promotions/' + enc(e.promotion), class: 'small' },
                              'promotion')] : null),
      e.by || '—',
      e.reason || h('span', { class: 'muted' }, '—'),
      when(e.at),
    ], { 'data-generation': e.generation, class: e.generation === lkgGen ? 'is-lkg' : null }));

    const canRollback = hasRole('deployer');
    const head = h('div', { class: 'alias-head' },
                   h('h2', { id: 'alias-' + a.alias + '-h' }, a.alias),
                   a.protected ? h('span', { class: 'pill', title: 'a policy protects this alias; ' +
                                             'it moves only through promotions' }, 'protected')
                               : null,
                   a.promotion ? h('a', { href: '#/promotions/' + enc(a.promotion),
                                          class: 'pill pill-info' }, 'promotion in progress')
                               : null,
                   h('span', { class: 'spacer' }),
                   canRollback
                     ? h('button', { type: 'button', class: 'btn btn-bad', id: 'rollback-' + a.alias,
                                     'aria-label': 'Roll back ' + a.alias + ' of ' + model,
                                     disabled: lkg ? null : true,
                                     title: lkg ? null : 'there is no known-good version to go to',
                                     onclick: () => rollbackDialog(model, a, () => route()) },
                         'Roll back…')
                     : null);
    return h('section', { class: 'card alias', id: 'alias-' + a.alias,
                          'aria-labelledby': 'alias-' + a.alias + '-h' },
             head,
             h('p', { class: 'muted' }, 'Generation ' + a.generation + ' · updated ',
               when(a.updated_at)),
             h('h3', null, 'Traffic split'),
             splitBar(a.routes),
             h('p', { class: 'lkg-line' }, 'Last known good: ',
               lkg ? h('strong', { id: 'lkg-' + a.alias }, 'v' + lkg.version) : 'none',
               lkg ? h('span', { class: 'muted' }, ' since ', when(lkg.since)) : null,
               (a.routes || []).some((r) => {
                 const v = versionsByN[r.version];
                 return v && (v.bad_for || []).includes(a.alias);
               }) ? [' · ', badge('failed', 'routes a version marked bad')] : null),
             h('h3', null, 'Delivery'),
             drows.length ? table('deliveries-table', dhead, drows, 'Delivery per gateway')
                          : h('p', { class: 'empty' }, 'No gateways deliver this alias.'),
             h('h3', null, 'History'),
             hrows.length ? table('history-table', hhead, hrows, 'Alias history')
                          : h('p', { class: 'empty' }, 'No history.'));
  }

  async function renderModel(seq, name) {
    const base = '/api/v1/models/' + enc(name);
    const [model, aliases, versions] = await Promise.all([
      api('GET', base), api('GET', base + '/aliases'), api('GET', base + '/versions?limit=50'),
    ]);
    const items = aliases.items || [];
    const histories = await Promise.all(items.map((a) =>
      api('GET', base + '/aliases/' + enc(a.alias) + '/history?limit=20')
        .then((r) => r.items || [])));
    if (seq !== renderSeq)
      return;
    const versionsByN = {};
    for (const v of versions.items || [])
      versionsByN[v.version] = v;

    const vhead = ['Version', 'Published', 'By', 'Metrics', 'Tags', 'Bad for'];
    const vrows = (versions.items || []).map((v) => row(vhead, [
      h('strong', null, 'v' + v.version), when(v.created_at), v.created_by,
      Object.keys(v.metrics || {}).length
        ? h('ul', { class: 'plain small' }, Object.keys(v.metrics).sort().map((k) =>
          h('li', null, k + ' ', h('strong', null, fmtNum(v.metrics[k])))))
        : h('span', { class: 'muted' }, '—'),
      tagsList(v.tags),
      (v.bad_for || []).length ? v.bad_for.join(', ') : h('span', { class: 'muted' }, '—'),
    ], { 'data-version': v.version }));

    mount(
      h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' },
        h('a', { href: '#/models' }, 'Models'), ' / ', h('span', null, model.name)),
      h('div', { class: 'page-head' },
        h('div', null, h('h1', null, model.name),
          h('p', { class: 'muted' }, model.description || 'No description.',
            ' · by ' + (model.created_by || '—')),
          tagsList(model.tags)),
        h('button', { type: 'button', class: 'btn', onclick: () => route() }, 'Refresh')),
      items.length ? items.map((a, i) => aliasCard(model.name, a, histories[i], versionsByN))
                   : h('section', { class: 'card' }, h('p', { class: 'empty' }, 'No aliases yet.')),
      section('Versions', 'versions',
              vrows.length ? table('versions-table', vhead, vrows, 'Versions')
                           : h('p', { class: 'empty' }, 'No versions yet.')));
  }

  /* ---- datasets --------------------------------------------------------- */

  async function renderDataset(seq, digest) {
    const base = '/api/v1/datasets/' + enc(digest);
    const [ds, users] = await Promise.all([maybe(base), maybe(base + '/versions')]);
    if (seq !== renderSeq)
      return;
    const crumbs = h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' },
                     h('a', { href: '#/models' }, 'Models'), ' / ', h('span', null, 'dataset'));
    if (!ds) {
      mount(crumbs, h('h1', null, 'Dataset'), h('p', null, mono(digest)),
            notice('warn', 'This digest is not registered as a dataset, so its lineage is ' +
                           'unknown.'));
      return;
    }
    const link = (d) => h('li', null, h('a', { href: '#/datasets/' + enc(d), title: d },
                                          shortDigest(d)));
    const uhead = ['Model', 'Version', 'Role', 'Via'];
    const urows = ((users && users.items) || []).map((u) => row(uhead, [
      h('a', { href: '#/models/' + enc(u.model) }, u.model), 'v' + u.version, u.role || '—',
      (u.via || []).length ? h('ul', { class: 'plain' }, u.via.map(link))
                           : h('span', { class: 'muted' }, 'direct'),
    ]));
    mount(crumbs,
          h('div', { class: 'page-head' },
            h('div', null, h('h1', null, ds.name || 'Dataset'),
              h('p', { class: 'muted' }, ds.description || ''))),
          h('section', { class: 'card' },
            h('dl', { class: 'facts' },
              h('dt', null, 'Digest'), h('dd', null, mono(ds.digest)),
              h('dt', null, 'Location'), h('dd', null, ds.uri ? mono(ds.uri) : '—'),
              h('dt', null, 'Registered'), h('dd', null, when(ds.created_at)),
              h('dt', null, 'Derived from'),
              h('dd', null, (ds.parents || []).length
                ? h('ul', { class: 'plain' }, ds.parents.map(link)) : 'nothing registered'),
              h('dt', null, 'Used to derive'),
              h('dd', null, (ds.children || []).length
                ? h('ul', { class: 'plain' }, ds.children.map(link)) : 'nothing registered'))),
          section('Model versions trained or evaluated on it', 'dataset-users',
                  urows.length ? table('users-table', uhead, urows, 'Versions using this dataset')
                               : h('p', { class: 'empty' }, 'None.')));
  }

  /* ---- router ----------------------------------------------------------- */

  async function route() {
    stopPoll();
    const seq = ++renderSeq;
    renderChrome();
    if (!session.me) {
      renderSignIn();
      return;
    }
    let parts;
    try {
      parts = (location.hash || '#/queue').replace(/^#\/?/, '').split('/')
        .map((x) => decodeURIComponent(x));
    } catch (e) {
      parts = ['?'];
    }
    try {
      if (parts[0] === '' || parts[0] === 'queue')
        await renderQueue(seq);
      else if (parts[0] === 'promotions' && parts[1])
        await renderPromotion(seq, parts[1]);
      else if (parts[0] === 'models' && parts[1])
        await renderModel(seq, parts[1]);
      else if (parts[0] === 'models')
        await renderModels(seq);
      else if (parts[0] === 'datasets' && parts[1])
        await renderDataset(seq, parts.slice(1).join('/'));
      else
        mount(h('h1', null, 'Not found'),
              h('p', null, 'No such page. ', h('a', { href: '#/queue' }, 'Go to the review queue.')));
    } catch (e) {
      if (seq === renderSeq)
        showError(e, e.status === 404 ? 'Not found' : 'Could not load this page');
    }
  }

  async function start() {
    try {
      const me = await api('GET', '/ui/session');
      session.me = { name: me.name, roles: me.roles || [] };
      session.csrf = me.csrf;
    } catch (e) {
      session.me = null;
    }
    window.addEventListener('hashchange', () => {
      window.scrollTo(0, 0);
      route();
    });
    route();
  }

  /* Expose nothing globally; start when the document is parsed (the script is deferred). */
  start();
})();
