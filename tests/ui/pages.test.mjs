// M24's reviewer pages in a real headless Chromium against a real modelgated, signed in
// with a reviewer-only token: the model card (with XSS attempts that must do nothing),
// version, compare, activity and search pages, the promotion page's order and deltas.
// Every page: content present, every version link opens its page, no console error, the
// CSP unchanged, no serious axe-core violation, screenshots at 1280 and 420 px wide in
// $MG_BUILD_DIR/ui-artifacts/m24-*.png.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdtemp, mkdir, readFile, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { chromium } from 'playwright-core';

const require = createRequire(import.meta.url);
const AXE = require.resolve('axe-core/axe.min.js');
const MODELGATED = process.env.MODELGATED;
const BUILD_DIR = process.env.MG_BUILD_DIR || (MODELGATED ? path.dirname(MODELGATED) : '.');
const ARTIFACTS = path.join(BUILD_DIR, 'ui-artifacts');
const CHROMIUM = process.env.MG_CHROMIUM || '/usr/bin/chromium';
const SLOW = process.env.MG_SANITIZE ? 3 : 1;

const README = [
  '# Fraud scorer',
  '',
  'Scores *card-not-present* payments. Runbook: [wiki](https://wiki.example/fraud).',
  '',
  '<script>window.__xss = 1; alert("script")</script>',
  '',
  'Inline <img src=x onerror="window.__xss=2;alert(2)"> and <b onmouseover=alert(3)>bold</b>.',
  '',
  '[click me](javascript:window.__xss=3) [data link](data:text/html;base64,PHNjcmlwdD5hbGVydCg0KTwvc2NyaXB0Pg==)',
  '![pixel](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoNSk+)',
  '',
  '- trained on November data',
  '- evaluated on the holdout',
  '',
  '```',
  '<script>alert(6)</script>',
  '```',
].join('\n');

let tmp, server, base, admin, browser, promo;
const tokens = {};
const dialogs = [];
const pageErrors = [];
let csp;

async function call(token, method, p, body) {
  const headers = {};
  if (token)
    headers.Authorization = 'Bearer ' + token;
  let payload;
  if (body instanceof Uint8Array) {
    headers['Content-Type'] = 'application/octet-stream';
    payload = body;
  } else if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    payload = JSON.stringify(body);
  }
  const res = await fetch(base + p, { method, headers, body: payload });
  const text = await res.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  return { status: res.status, json, text, headers: res.headers };
}

async function must(token, method, p, body) {
  const r = await call(token, method, p, body);
  assert.ok(r.status < 400, `${method} ${p} → ${r.status} ${r.text}`);
  return r.json;
}

async function waitFor(what, fn, timeoutMs = 15000 * SLOW) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v)
      return v;
    if (Date.now() > end)
      throw new Error('timed out waiting for ' + what);
    await sleep(100);
  }
}

async function startServer() {
  tmp = await mkdtemp(path.join(tmpdir(), 'mg-ui24-'));
  const data = path.join(tmp, 'data');
  const portFile = path.join(tmp, 'port');
  const log = [];
  server = spawn(MODELGATED, ['--data-dir', data, '--listen', '127.0.0.1:0', '--port-file',
                              portFile], { stdio: ['ignore', 'ignore', 'pipe'] });
  server.stderr.on('data', (b) => log.push(b.toString()));
  await waitFor('modelgated to listen', async () => existsSync(portFile) &&
    (await readFile(portFile, 'utf8')).trim().length > 0, 20000 * SLOW);
  base = 'http://127.0.0.1:' + (await readFile(portFile, 'utf8')).trim();
  admin = (await readFile(path.join(data, 'admin.token'), 'utf8')).trim();
}

async function seed() {
  for (const [name, r] of Object.entries({ pub: ['publisher', 'reader'],
                                           dep: ['deployer', 'reader'],
                                           rev: ['reviewer'] }))
    tokens[name] = (await must(admin, 'POST', '/api/v1/tokens', { name, roles: r })).token;
  const pub = tokens.pub;
  await must(pub, 'POST', '/api/v1/models', {
    name: 'fraud', description: 'Card-not-present fraud scorer', readme: README,
    metric_directions: { auc: 'higher', p95_ms: 'lower', recall: 'higher' },
  });
  const H = 'sha256:' + 'e'.repeat(64);
  await must(pub, 'POST', '/api/v1/datasets', { digest: H, name: 'fraud-nov', uri: 's3://d/nov/' });
  for (const [i, m] of [{ auc: 0.931, p95_ms: 42, recall: 0.7 },
                        { auc: 0.942, p95_ms: 44.5, recall: 0.71 },
                        { auc: 0.95, p95_ms: 40.1, recall: 0.69 }].entries()) {
    const b = await must(pub, 'POST', '/api/v1/blobs', new TextEncoder().encode('weights ' + i));
    await must(pub, 'POST', '/api/v1/models/fraud/versions', {
      artifact: b.digest, description: 'retrain ' + (i + 1) + ' <b>not bold</b>',
      params: { lr: [0.1, 0.2, 0.3][i], epochs: 10 + i, optimizer: 'adam' }, metrics: m,
      datasets: [{ digest: H, name: 'fraud-nov', role: 'train' }], tags: { team: 'risk' },
      run_id: 'run-' + (i + 1),
    });
  }
  await must(tokens.dep, 'PUT', '/api/v1/models/fraud/aliases/production', { version: 2 });
  await must(admin, 'PUT', '/api/v1/models/fraud/policies/production', {
    thresholds: [{ metric: 'auc', op: '>=', value: 0.9 }], approvals: { required: 1 },
    rollout: { steps: [50, 100], bake_seconds: 3600 },
  });
  promo = (await must(tokens.dep, 'POST', '/api/v1/promotions', {
    model: 'fraud', version: 3, alias: 'production', reason: 'better auc',
  })).id;
  await waitFor('the promotion to await approval', async () =>
    (await must(admin, 'GET', '/api/v1/promotions/' + promo)).state === 'awaiting_approval');
}

async function newPage(width) {
  const context = await browser.newContext({ viewport: { width, height: 900 },
                                             deviceScaleFactor: 1 });
  const page = await context.newPage();
  page.setDefaultTimeout(15000 * SLOW);
  page.on('dialog', async (d) => {
    dialogs.push(d.type() + ': ' + d.message());
    await d.dismiss();
  });
  page.on('pageerror', (e) => pageErrors.push('pageerror: ' + e.message));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/status of 40[134]/.test(m.text()))
      pageErrors.push('console: ' + m.text());
  });
  page.on('response', (r) => {
    const u = new URL(r.url());
    if (u.pathname === '/' || u.pathname.startsWith('/static/'))
      assert.equal(r.headers()['content-security-policy'], csp, 'CSP of ' + u.pathname);
  });
  return page;
}

async function signIn(page, who) {
  await page.goto(base + '/#/queue');
  await page.getByLabel('API token').fill(tokens[who] || who);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#who strong').waitFor();
}

async function axeCheck(page, name) {
  // Through the debugger protocol, which the page's CSP does not govern (a script tag
  // would be refused, rightly).
  await page.evaluate(await readFile(AXE, 'utf8'));
  const res = await page.evaluate(async () =>
    // eslint-disable-next-line no-undef
    (await axe.run(document, { resultTypes: ['violations'] })).violations
      .map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' ')) })));
  const serious = res.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  assert.deepEqual(serious, [], name + ': serious accessibility violations');
}

// Every link to a version page on this page opens that page.
async function versionLinksWork(page, name) {
  const hrefs = [...new Set(await page.locator('a[href^="#/models/"][href*="/versions/"]').evaluateAll((as) =>
    as.map((a) => a.getAttribute('href'))))];
  for (const href of hrefs) {
    assert.match(href, /^#\/models\/[a-z0-9._-]+\/versions\/\d+$/, name + ': ' + href);
    const n = href.split('/').pop();
    const p = await newPage(1280);
    await p.context().addCookies(await page.context().cookies());
    await p.goto(base + '/' + href);
    await p.locator('#version-title', { hasText: 'v' + n }).waitFor();
    await p.context().close();
  }
  return hrefs.length;
}

// Both widths: wait for `ready`, check axe and sideways scrolling, keep screenshots.
async function visit(page, name, hash, ready) {
  const out = {};
  for (const w of [1280, 420]) {
    const p = await newPage(w);
    await p.context().addCookies(await page.context().cookies());
    await p.goto(base + '/' + hash);
    await ready(p);
    await axeCheck(p, name + ' at ' + w);
    const over = await p.evaluate(() => document.documentElement.scrollWidth -
                                        document.documentElement.clientWidth);
    assert.ok(over <= 1, name + ' at ' + w + ' scrolls sideways by ' + over + 'px');
    await mkdir(ARTIFACTS, { recursive: true });
    await p.screenshot({ path: path.join(ARTIFACTS, 'm24-' + name + '-' + w + '.png'),
                         fullPage: true });
    if (w === 1280)
      out.links = await versionLinksWork(p, name);
    await p.context().close();
  }
  return out;
}

describe('reviewer pages (M24)', { concurrency: false }, () => {
  let rev;

  before(async () => {
    assert.ok(MODELGATED, 'MODELGATED must point at the modelgated binary');
    await startServer();
    await seed();
    csp = (await call(null, 'GET', '/')).headers.get('content-security-policy');
    assert.match(csp, /default-src 'none'/);
    browser = await chromium.launch({
      executablePath: CHROMIUM, headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
             '--disable-component-update', '--disable-sync', '--no-first-run'],
    });
    rev = await newPage(1280);
    await signIn(rev, 'rev');
  });

  after(async () => {
    if (browser)
      await browser.close();
    if (server) {
      const s = server;
      server = null;
      s.kill('SIGTERM');
      await new Promise((resolve) => (s.exitCode !== null ? resolve() : s.on('exit', resolve)));
    }
    if (process.env.MG_UI_KEEP !== '1' && tmp)
      await rm(tmp, { recursive: true, force: true });
  });

  test('the model page shows the card, and the XSS attempts in it do nothing', async () => {
    await rev.goto(base + '/#/models/fraud');
    const card = rev.locator('#model-card .md');
    await card.waitFor();
    assert.match(await card.innerText(), /Fraud scorer[\s\S]*card-not-present[\s\S]*trained on November data/);
    assert.equal(await card.locator('a[href="https://wiki.example/fraud"]').count(), 1);
    // No script, no handler, no javascript: or data: link, no image: only text survives.
    const bad = await rev.evaluate(() => ({
      xss: window.__xss || 0,
      scripts: document.querySelectorAll('#app script').length,
      handlers: [...document.querySelectorAll('#app *')].filter((e) =>
        [...e.attributes].some((a) => /^on/i.test(a.name))).length,
      links: [...document.querySelectorAll('#app a[href]')].map((a) => a.getAttribute('href'))
        .filter((h) => !/^(#|https?:|mailto:|\/)/i.test(h)),
      imgs: document.querySelectorAll('#app img').length,
    }));
    assert.deepEqual(bad, { xss: 0, scripts: 0, handlers: 0, links: [], imgs: 0 });
    assert.match(await card.innerText(), /click me/);
    assert.match(await card.locator('pre').innerText(), /<script>alert\(6\)<\/script>/);
    // Hover and click what an attacker would want clicked.
    await card.getByText('bold').hover();
    await card.getByText('click me').click();
    await card.getByText('data link').click();
    assert.equal(await rev.evaluate(() => window.__xss || 0), 0);
    assert.match(rev.url(), /#\/models\/fraud$/);

    assert.match(await rev.locator('#metric-directions').innerText(), /auc higher[\s\S]*p95_ms lower/);
    const v2 = rev.locator('#versions tr[data-version="2"]');
    assert.match(await v2.innerText(), /production/);
    assert.equal(await v2.locator('a[href="#/models/fraud/versions/2"]').count(), 1);
    const { links } = await visit(rev, 'model', '#/models/fraud',
                                  (p) => p.locator('#model-card .md').waitFor());
    assert.ok(links >= 3, 'the model page links every version');
  });

  test('the version page shows all of one version', async () => {
    await rev.goto(base + '/#/models/fraud/versions/2');
    await rev.locator('#version-title', { hasText: 'fraud v2' }).waitFor();
    assert.equal(await rev.locator('#version-description').innerText(), 'retrain 2 <b>not bold</b>');
    assert.match(await rev.locator('#params').innerText(), /epochs[\s\S]*11[\s\S]*lr[\s\S]*0\.2[\s\S]*optimizer[\s\S]*adam/);
    assert.match(await rev.locator('#metrics tr[data-metric="auc"]').innerText(), /0\.942[\s\S]*higher is better/);
    assert.match(await rev.locator('#metrics tr[data-metric="p95_ms"]').innerText(), /44\.5[\s\S]*lower is better/);
    assert.match(await rev.locator('#routing li[data-alias="production"]').innerText(), /100%/);
    assert.match(await rev.locator('#datasets').innerText(), /fraud-nov[\s\S]*train/);
    assert.match(await rev.locator('#version-signature').innerText(), /unsigned|signed/);
    assert.match(await rev.locator('#scan').innerText(), /No safety scan|Verdict/);
    assert.match(await rev.locator('#smoke').innerText(), /No smoke tests|Throughput/);
    // Deltas are computed in the page: 0.95 - 0.942 must read 0.008, not 0.00799999….
    await rev.goto(base + '/#/models/fraud/versions/3');
    await rev.locator('#version-title', { hasText: 'fraud v3' }).waitFor();
    assert.doesNotMatch(await rev.locator('main').innerText(), /0000000|9999999/);
    await visit(rev, 'version', '#/models/fraud/versions/2',
                (p) => p.locator('#params tr[data-key="lr"]').waitFor());
  });

  test('compare shows each metric with its direction and delta, params and files', async () => {
    await rev.goto(base + '/#/models/fraud');
    await rev.locator('#compare-form').waitFor();
    await rev.locator('#compare-a').selectOption('1');
    await rev.locator('#compare-b').selectOption('2');
    await rev.locator('#compare-form button').click();
    await rev.locator('h1', { hasText: 'v1 against v2' }).waitFor();
    const auc = rev.locator('#metrics tr[data-metric="auc"]');
    assert.match(await auc.innerText(), /0\.931[\s\S]*0\.942[\s\S]*\+0\.011[\s\S]*better/);
    assert.equal(await auc.locator('.delta-better').count(), 1);
    const lat = rev.locator('#metrics tr[data-metric="p95_ms"]');
    assert.match(await lat.innerText(), /\+2\.5[\s\S]*worse[\s\S]*lower is better/);
    assert.equal(await lat.locator('.delta-worse').count(), 1);
    assert.match(await rev.locator('#params tr[data-param="epochs"]').innerText(), /10[\s\S]*11[\s\S]*changed/);
    assert.match(await rev.locator('#params tr[data-param="optimizer"]').innerText(), /same/);
    assert.match(await rev.locator('#files').innerText(), /changed/);
    await visit(rev, 'compare', '#/models/fraud/compare/1/2',
                (p) => p.locator('#metrics tr[data-metric="auc"]').waitFor());
  });

  test('the promotion page: decision, metrics, gates first; deltas; both versions described',
       async () => {
    await rev.goto(base + '/#/promotions/' + promo);
    await rev.locator('#decision').waitFor();
    assert.match(await rev.locator('#compare').innerText(), /retrain 2 <b>not bold<\/b>[\s\S]*retrain 3/);
    assert.match(await rev.locator('#compare').innerText(), /epochs[\s\S]*11[\s\S]*epochs[\s\S]*12/);
    assert.match(await rev.locator('#metrics tr[data-metric="auc"]').innerText(), /\+0\.008/);
    // p95_ms fell: better, because the model says lower is better (no policy names it).
    assert.equal(await rev.locator('#metrics tr[data-metric="p95_ms"] .delta-better').count(), 1);
    assert.equal(await rev.locator('#metrics svg g[data-metric="recall"] rect.bar-worse').count(), 1);
    for (const w of [1280, 420]) {
      await rev.setViewportSize({ width: w, height: 900 });
      await rev.goto(base + '/#/queue');
      await rev.goto(base + '/#/promotions/' + promo);
      await rev.locator('#decision').waitFor();
      const tops = await rev.evaluate(() => ['decision', 'metrics', 'gates', 'compare', 'smoke']
        .map((id) => [id, document.getElementById(id).getBoundingClientRect()]));
      const pos = Object.fromEntries(tops.map(([id, r]) => [id, r]));
      if (w === 420) {
        const order = tops.slice().sort((a, b) => a[1].top - b[1].top).map(([id]) => id);
        assert.deepEqual(order, ['decision', 'metrics', 'gates', 'compare', 'smoke'],
                         'the order at phone width');
      } else {
        assert.ok(pos.metrics.top < pos.gates.top && pos.gates.top < pos.compare.top);
        assert.ok(pos.decision.top <= pos.metrics.top + 1, 'the decision is at the top');
      }
    }
    await rev.setViewportSize({ width: 1280, height: 900 });
    await visit(rev, 'promotion', '#/promotions/' + promo, (p) => p.locator('#decision').waitFor());

    // Approved by the reviewer, then rolled back by the deployer: the page goes quiet and
    // says who ended it.
    await rev.goto(base + '/#/promotions/' + promo);
    await rev.locator('#approve').click();
    await rev.locator('#promo-state', { hasText: 'rolling out' }).waitFor();
    assert.equal(await rev.locator('#promo-ended').count(), 0, 'a running promotion is live');
    await must(tokens.dep, 'POST', '/api/v1/models/fraud/aliases/production/rollback',
               { reason: 'pager went off' });
    await rev.locator('#promo-ended').waitFor({ timeout: 20000 * SLOW });
    assert.equal(await rev.locator('#promo-ended-by').innerText(), 'dep');
    assert.match(await rev.locator('#promo-ended').innerText(), /rolled back[\s\S]*pager went off/);
    assert.equal(await rev.locator('.layout[data-finished="yes"]').count(), 1);
    await mkdir(ARTIFACTS, { recursive: true });
    await rev.screenshot({ path: path.join(ARTIFACTS, 'm24-promotion-finished-1280.png'),
                           fullPage: true });
  });

  test('the search box finds models, versions by metric and tag, and datasets', async () => {
    await rev.goto(base + '/#/queue');
    await rev.locator('#nav-search').fill('fraud');
    await rev.locator('#nav-search').press('Enter');
    await rev.locator('#found-models tr[data-model="fraud"]').waitFor();
    assert.match(await rev.locator('#found-datasets').innerText(), /fraud-nov/);
    await rev.goto(base + '/#/search?metric=' + encodeURIComponent('auc>=0.94') + '&tag=team:risk');
    await rev.locator('#found-versions tr[data-version="fraud/3"]').waitFor();
    assert.equal(await rev.locator('#found-versions tr[data-version="fraud/1"]').count(), 0);
    assert.equal(await rev.locator('#found-versions tr[data-version="fraud/2"]').count(), 1);
    await visit(rev, 'search', '#/search?q=fraud&metric=' + encodeURIComponent('auc>=0.94'),
                (p) => p.locator('#found-versions tr[data-version="fraud/3"]').waitFor());
  });

  test('the activity feed: admins see it newest first, a reviewer is told why not', async () => {
    await rev.goto(base + '/#/activity');
    await rev.locator('#activity-admins').waitFor();
    const adm = await newPage(1280);
    await signIn(adm, admin);
    await adm.goto(base + '/#/activity');
    await adm.locator('#activity tbody tr').first().waitFor();
    const seqs = await adm.locator('#activity tbody tr').evaluateAll((trs) =>
      trs.map((t) => Number(t.dataset.seq)));
    assert.ok(seqs.length > 5);
    assert.deepEqual(seqs, seqs.slice().sort((a, b) => b - a), 'newest first');
    assert.match(await adm.locator('#activity').innerText(), /promotion\.create/);
    await visit(adm, 'activity', '#/activity', (p) => p.locator('#activity tbody tr').first().waitFor());
    await adm.context().close();
  });

  test('fields other milestones add (scan, publisher, throughput, cost, analysis) show when sent',
       async () => {
    // The server of this branch sends none of them yet: the page's own modules draw them
    // from JSON shaped as docs/contract.md describes, in the signed-in page (same origin, same CSP).
    await rev.goto(base + '/#/models/fraud');
    await rev.locator('#model-card').waitFor();
    const got = await rev.evaluate(async () => {
      const v = await import('/static/ui_version.js');
      const a = await import('/static/page_promotion_analysis.js');
      const d = await import('/static/ui_dom.js');
      const holder = document.createElement('div');
      holder.append(
        v.scanBadge({ status: 'flagged', findings: [{ severity: 'high', rule: 'pickle-exec' }] }),
        v.publisherText({ publisher: { subject: 'ci@example.com', issuer: 'https://idp.example',
                                       verified: true } }),
        v.smokeTable([{ id: 'smk_1', state: 'passed', profile: 'cpu', throughput_rps: 123.4,
                        cost_per_1k_requests: 0.0021, latency_ms: { p50: 1.5, p95: 2.25 } }]),
        d.add(document.createElement('div'), a.analysisView({ analysis: {
          consecutive_failures: 0, consecutive_inconclusive: 0, intervals: [
            { at: 't1', phase: 'canary', weight: 10, verdict: 'passed', metrics: [
              { name: 'error_rate', verdict: 'passed', candidate: 0.01, baseline: 0.012 }] },
            { at: 't2', phase: 'canary', weight: 10, verdict: 'failed', metrics: [
              { name: 'error_rate', verdict: 'failed', candidate: 0.05, baseline: 0.011,
                detail: 'above the baseline' }] },
            { at: 't3', phase: 'canary', weight: 10, verdict: 'passed', metrics: [
              { name: 'error_rate', verdict: 'passed', candidate: 0.02, baseline: 0.01 }] },
          ] } })));
      const none = [v.scanBadge(undefined).textContent, v.publisherText({ created_by: 'pub' })
        .textContent];
      return { text: holder.textContent, charts: holder.querySelectorAll('svg.analysis-chart').length,
               fails: holder.querySelectorAll('svg .mark-failed').length, none };
    });
    assert.match(got.text, /flagged 1 finding/);
    assert.match(got.text, /ci@example\.com via https:\/\/idp\.example/);
    assert.match(got.text, /123\.4 req\/s[\s\S]*0\.0021/);
    assert.match(got.text, /3 intervals recorded/);
    assert.equal(got.charts, 1);
    assert.equal(got.fails, 1);
    assert.deepEqual(got.none, ['—', 'pub']);
  });

  test('no page opened a dialog, ran injected script or logged an error', () => {
    assert.deepEqual(dialogs, []);
    assert.deepEqual(pageErrors, []);
  });
});
