// End-to-end tests of the reviewer UI: a real modelgated, a real headless
// Chromium (Debian's, driven by playwright-core), no mocks.
//
// Run through tests/e2e/test_ui.sh (ctest: e2e_test_ui), or by hand:
//   cd tests/ui && MODELGATED=../../build/modelgated MG_BUILD_DIR=../../build node --test
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { mkdtemp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { chromium } from 'playwright-core';

const MODELGATED = process.env.MODELGATED;
const BUILD_DIR = process.env.MG_BUILD_DIR || (MODELGATED ? path.dirname(MODELGATED) : '.');
const ARTIFACTS = path.join(BUILD_DIR, 'ui-artifacts');
const CHROMIUM = process.env.MG_CHROMIUM || '/usr/bin/chromium';
const SLOW = process.env.MG_SANITIZE ? 3 : 1;   // ASan builds answer more slowly

const XSS_TAG = '<img src=x onerror=alert(1)>';
const XSS_APPROVE = '<script>alert("approve")</script> looks good';
const XSS_REJECT = '<script>alert("reject")</script> metrics look cherry-picked';
const XSS_ROLLBACK = '<b onmouseover=alert(3)>rollback</b> after alert';

let tmp, server, base, admin;
const tokens = {};
let browser;
const dialogs = [];      // every alert/confirm/prompt any page opened: must stay empty
const pageErrors = [];   // uncaught exceptions and CSP violations: must stay empty
let promoProd, promoStaging;
let H1, H2;

function hex(c) {
  return c.repeat(64);
}

async function call(token, method, p, body, extraHeaders = {}) {
  const headers = { ...extraHeaders };
  if (token)
    headers.Authorization = 'Bearer ' + token;
  let payload;
  if (body !== undefined) {
    if (body instanceof Uint8Array) {
      headers['Content-Type'] = 'application/octet-stream';
      payload = body;
    } else {
      headers['Content-Type'] = 'application/json';
      payload = JSON.stringify(body);
    }
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
  let last;
  for (;;) {
    last = await fn();
    if (last)
      return last;
    if (Date.now() > end)
      throw new Error('timed out waiting for ' + what);
    await sleep(100);
  }
}

// Every module of the UI by name: app.js and what it imports, transitively,
// each with the server's answer.
async function jsModules() {
  const found = new Map();
  const todo = ['app.js'];
  while (todo.length) {
    const name = todo.pop();
    if (found.has(name))
      continue;
    const r = await call(null, 'GET', '/static/' + name);
    assert.equal(r.status, 200, '/static/' + name);
    found.set(name, r);
    assert.doesNotMatch(r.text, /\bimport\s*\(/, name + ' imports dynamically');
    for (const [, spec] of r.text.matchAll(/^(?:import|export)\b[^;]*?\bfrom\s+'([^']*)'/gm)) {
      // Flat and relative, so that every import resolves to /static/NAME.js.
      assert.match(spec, /^\.\/[a-z0-9_]+\.js$/, name + ' imports ' + spec);
      todo.push(spec.slice(2));
    }
  }
  return found;
}

async function startServer() {
  tmp = await mkdtemp(path.join(tmpdir(), 'mg-ui-'));
  const data = path.join(tmp, 'data');
  const smoke = path.join(tmp, 'smoke.sh');
  // A smoke-test profile: prints a log (with markup that must stay text) and
  // reports latencies and checks the way docs/design.md's runner expects.
  await writeFile(smoke, [
    '#!/bin/sh',
    'echo "loading model from $1"',
    'echo "<b>warmup</b> 5 requests <script>alert(4)</script>"',
    'printf \'{"latencies_ms":[10.5,12.1,11.3,14.9,30.2],"checks":[{"name":"loads","passed":true,"detail":"model loaded"},{"name":"output_shape","passed":true,"detail":"[1, 2]"}]}\' > "$2"',
    'echo "done"',
    '',
  ].join('\n'));
  const portFile = path.join(tmp, 'port');
  const log = [];
  server = spawn(MODELGATED, ['--data-dir', data, '--listen', '127.0.0.1:0', '--port-file', portFile,
                              '--smoke-profile', `cpu=/bin/sh ${smoke} {model_dir} {output}`,
                              '--smoke-profile-cost', 'cpu=2.5',
                              '--smoke-interval', '0'],
                 { stdio: ['ignore', 'ignore', 'pipe'] });
  server.stderr.on('data', (b) => log.push(b.toString()));
  server.on('exit', (code, sig) => {
    if (server)
      log.push(`modelgated exited: ${code ?? sig}\n`);
  });
  try {
    await waitFor('modelgated to listen', async () => existsSync(portFile) &&
      (await readFile(portFile, 'utf8')).trim().length > 0, 20000 * SLOW);
  } catch (e) {
    throw new Error(e.message + '\n' + log.join(''));
  }
  base = 'http://127.0.0.1:' + (await readFile(portFile, 'utf8')).trim();
  admin = (await readFile(path.join(data, 'admin.token'), 'utf8')).trim();
  return log;
}

// Tokens, a model with two versions, a policy needing two approvals and a
// two-step rollout, and two promotions waiting for review.
async function seed() {
  const roles = {
    // The publisher is also a reviewer: the page must tell them they cannot
    // approve their own version.
    publisher: ['publisher', 'reviewer', 'reader'],
    deployer: ['deployer', 'reader'],
    reviewer1: ['reviewer', 'reader'],
    // Every role includes reading: a reviewer-only token signs in, sees the queue and
    // approves (M13).
    reviewer2: ['reviewer'],
  };
  for (const [name, r] of Object.entries(roles))
    tokens[name] = (await must(admin, 'POST', '/api/v1/tokens', { name, roles: r })).token;
  const pub = tokens.publisher;
  H1 = 'sha256:' + hex('a');
  H2 = 'sha256:' + hex('b');
  await must(pub, 'POST', '/api/v1/models', {
    name: 'fraud-detector', description: 'Card-not-present fraud scorer', tags: { team: 'risk' },
  });
  const a1 = await must(pub, 'POST', '/api/v1/blobs', new TextEncoder().encode('weights v1'));
  const a2 = await must(pub, 'POST', '/api/v1/blobs', new TextEncoder().encode('weights v2'));
  await must(pub, 'POST', '/api/v1/datasets', {
    digest: H1, name: 'fraud-train-2026-10', uri: 's3://ml-data/fraud/train/2026-10/',
  });
  await must(pub, 'POST', '/api/v1/datasets', {
    digest: H2, name: 'fraud-train-2026-11', uri: 's3://ml-data/fraud/train/2026-11/',
    parents: [H1],
  });
  const common = {
    source: { repo: 'https://git.example/ml/fraud' }, smoke: { profile: 'cpu' },
    resources: { parameters: 7000000, precision: 'fp16' },
  };
  await must(pub, 'POST', '/api/v1/models/fraud-detector/versions', {
    ...common, artifact: a1.digest, image: 'registry.example/fraud-serve@sha256:' + hex('1'),
    run_id: 'train-1041', source: { ...common.source, commit: '9f2c1e0' + hex('1').slice(7, 40) },
    datasets: [{ digest: H1, name: 'fraud-train-2026-10', uri: 's3://ml-data/fraud/train/2026-10/',
                 role: 'train' }],
    metrics: { auc: 0.931, precision_at_1pct: 0.62, p95_latency_ms: 42.0 },
    tags: { team: 'risk' },
  });
  await must(pub, 'POST', '/api/v1/models/fraud-detector/versions', {
    ...common, artifact: a2.digest, image: 'registry.example/fraud-serve@sha256:' + hex('2'),
    run_id: 'train-1077', source: { ...common.source, commit: '4b7d9a2' + hex('2').slice(7, 40) },
    datasets: [{ digest: H2, name: 'fraud-train-2026-11', uri: 's3://ml-data/fraud/train/2026-11/',
                 role: 'train' },
               { digest: 'sha256:' + hex('c'), name: 'fraud-holdout', role: 'eval' }],
    metrics: { auc: 0.945, precision_at_1pct: 0.6, p95_latency_ms: 44.5 },
    tags: { team: 'risk', note: XSS_TAG },
  });
  // v1 serves production (and staging) before any policy exists: it is the baseline.
  await must(tokens.deployer, 'PUT', '/api/v1/models/fraud-detector/aliases/production',
             { version: 1 });
  await must(tokens.deployer, 'PUT', '/api/v1/models/fraud-detector/aliases/staging',
             { version: 1 });
  await must(admin, 'PUT', '/api/v1/models/fraud-detector/policies/production', {
    thresholds: [
      { metric: 'auc', op: '>=', value: 0.92 },
      { metric: 'p95_latency_ms', op: '<=', value: 50 },
      { metric: 'auc', op: '>=', baseline: true, max_regression: 0.005 },
      { metric: 'p95_latency_ms', op: '<=', baseline: true, max_regression_pct: 10 },
    ],
    approvals: { required: 2 },
    require_signature: true,
    require_pinned_image: true,
    smoke: { required: true, gpu: 'none' },
    // docs/contract.md "Routing strategies": a shadow and an internal phase before the steps.
    rollout: { shadow_seconds: 1, internal: { header: 'x-canary', value: '1', seconds: 1 },
               steps: [50, 100], bake_seconds: 1 },
  });
  await must(admin, 'PUT', '/api/v1/models/fraud-detector/policies/staging', {
    thresholds: [{ metric: 'auc', op: '>=', value: 0.9 }],
    approvals: { required: 1 },
    rollout: { steps: [100], bake_seconds: 1 },
  });
  promoProd = (await must(tokens.deployer, 'POST', '/api/v1/promotions', {
    model: 'fraud-detector', version: 2, alias: 'production',
    reason: 'November retrain: +1.4 pt AUC',
  })).id;
  await sleep(20);   // distinct created_at, so "newest first" is observable
  promoStaging = (await must(tokens.deployer, 'POST', '/api/v1/promotions', {
    model: 'fraud-detector', version: 2, alias: 'staging', reason: 'staging soak',
  })).id;
  for (const id of [promoProd, promoStaging])
    await waitFor(`${id} to await approval`, async () => {
      const p = await must(admin, 'GET', '/api/v1/promotions/' + id);
      assert.notEqual(p.state, 'rejected', 'gates failed: ' + JSON.stringify(p.gates));
      return p.state === 'awaiting_approval';
    });
}

async function newPage(width = 1280, height = 900) {
  const context = await browser.newContext({ viewport: { width, height },
                                             deviceScaleFactor: 1 });
  const page = await context.newPage();
  page.setDefaultTimeout(15000 * SLOW);
  page.on('dialog', async (d) => {
    dialogs.push(d.type() + ': ' + d.message());
    await d.dismiss();
  });
  page.on('pageerror', (e) => pageErrors.push('pageerror: ' + e.message));
  page.on('console', (m) => {
    // A 401/403 from fetch also logs an error; only CSP violations, script
    // errors and modules that did not load count against the page.
    if (m.type() === 'error' &&
        /Content Security Policy|Uncaught|TypeError|ReferenceError|SyntaxError|module script/
          .test(m.text()))
      pageErrors.push('console: ' + m.text());
  });
  // A module that is missing or refused leaves the page half drawn, not broken.
  page.on('response', (r) => {
    if (new URL(r.url()).pathname.startsWith('/static/') && r.status() !== 200)
      pageErrors.push('static: ' + r.status() + ' ' + r.url());
  });
  page.on('requestfailed', (r) => {
    if (new URL(r.url()).pathname.startsWith('/static/'))
      pageErrors.push('static: failed ' + r.url());
  });
  return page;
}

async function signIn(page, who) {
  await page.goto(base + '/#/queue');
  await page.getByLabel('API token').fill(tokens[who]);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#who strong', { hasText: who }).waitFor();
}

async function shot(page, name) {
  await mkdir(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: path.join(ARTIFACTS, name + '.png'), fullPage: true });
}

// Screenshots at desktop and phone width of the page the session is on.
async function noSidewaysScroll(page, name) {
  // Nothing may stick out sideways: not the page, not a table.
  const over = await page.evaluate(() => {
    const out = [];
    const d = document.documentElement;
    if (d.scrollWidth - d.clientWidth > 1)
      out.push('page by ' + (d.scrollWidth - d.clientWidth) + 'px');
    for (const w of document.querySelectorAll('.table-wrap'))
      if (w.scrollWidth - w.clientWidth > 1)
        out.push((w.closest('section') || {}).id + ' table by ' + (w.scrollWidth - w.clientWidth) +
                 'px');
    return out;
  });
  assert.deepEqual(over, [], name + ' scrolls sideways');
}

async function shots(page, name, hash, ready) {
  await noSidewaysScroll(page, name + ' at 1280px');
  await shot(page, name + '-1280');
  const phone = await newPage(390, 844);
  await phone.context().addCookies(await page.context().cookies());
  await phone.goto(base + '/' + hash);
  await ready(phone);
  await shot(phone, name + '-390');
  await noSidewaysScroll(phone, name + ' at 390px');
  await phone.context().close();
}

describe('reviewer UI', { concurrency: false }, () => {
  let serverLog;
  let r1;   // reviewer1's page, kept across tests

  before(async () => {
    assert.ok(MODELGATED, 'MODELGATED must point at the modelgated binary');
    serverLog = await startServer();
    await seed();
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
             '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'],
    });
  });

  after(async () => {
    if (browser)
      await browser.close();
    if (server) {
      const s = server;
      server = null;
      s.kill('SIGTERM');
      await new Promise((resolve) => {
        if (s.exitCode !== null || s.signalCode !== null)
          resolve();
        else
          s.on('exit', resolve);
      });
    }
    if (process.env.MG_UI_KEEP !== '1' && tmp)
      await rm(tmp, { recursive: true, force: true });
    if (serverLog && process.env.MG_UI_LOG === '1')
      process.stderr.write(serverLog.join(''));
  });

  test('the page and its files come with a strict CSP and nothing from elsewhere', async () => {
    const modules = await jsModules();
    for (const m of ['page_signin.js', 'page_queue.js', 'page_promotion.js', 'page_models.js',
                     'page_model.js', 'page_dataset.js'])
      assert.ok(modules.has(m), 'app.js does not load ' + m);
    const files = ['/', '/static/app.css', '/static/logo.svg',
                   ...[...modules.keys()].map((m) => '/static/' + m)];
    for (const p of files) {
      const r = await call(null, 'GET', p);
      assert.equal(r.status, 200, p);
      assert.match(r.headers.get('content-security-policy') || '', /default-src 'none'/, p);
      assert.doesNotMatch(r.text, /https?:\/\/(?!www\.w3\.org\/2000\/svg)/, p + ' names an outside URL');
    }
    const html = (await call(null, 'GET', '/')).text;
    assert.doesNotMatch(html, /<script>|\sstyle=|\son[a-z]+=/i, 'index.html has inline code');
    assert.match(html, /<script type="module" src="\/static\/app\.js"><\/script>/);
    for (const [name, r] of modules) {
      // Browsers refuse to run a module served with any other type.
      assert.match(r.headers.get('content-type') || '', /^text\/javascript\b/, name);
      assert.doesNotMatch(r.text, /\.(inner|outer)HTML\b|insertAdjacentHTML\s*\(|document\.write\s*\(|\beval\s*\(|new Function\s*\(/, name);
    }
  });

  test('a reviewer signs in and sees the queue, newest first', async () => {
    r1 = await newPage();
    await r1.goto(base + '/');
    // Wrong token first: a clear message, no session.
    await r1.getByLabel('API token').fill('not-a-token');
    await r1.getByRole('button', { name: 'Sign in' }).click();
    await r1.locator('#signin-error', { hasText: 'unknown' }).waitFor();
    await signIn(r1, 'reviewer1');

    const cookies = await r1.context().cookies();
    const c = cookies.find((x) => x.name === 'mg_session');
    assert.ok(c, 'mg_session cookie set');
    assert.equal(c.httpOnly, true);
    assert.equal(c.sameSite, 'Strict');
    assert.ok(c.value.length >= 22, 'session id has at least 128 bits');
    assert.equal(await r1.evaluate(() => document.cookie), '', 'the cookie is not visible to JS');

    const rows = r1.locator('#queue tbody tr');
    await rows.first().waitFor();
    assert.equal(await rows.count(), 2);
    const ids = await rows.evaluateAll((trs) => trs.map((tr) => tr.dataset.promotion));
    assert.deepEqual(ids, [promoStaging, promoProd], 'newest first');
    const prodRow = r1.locator(`#queue tr[data-promotion="${promoProd}"]`);
    await prodRow.waitFor();
    const cells = await prodRow.locator('td').allInnerTexts();
    assert.match(cells[0], /fraud-detector v2 → production/);
    assert.equal(cells[1].trim(), 'fraud-detector');
    assert.equal(cells[2].trim(), 'v2');
    assert.equal(cells[3].trim(), 'production');
    assert.equal(cells[4].trim(), 'deployer');
    assert.match(cells[5], /ago|just now/);
    assert.match(cells[6], /2 more \(0 of 2 given\)/);
    await shots(r1, 'queue', '#/queue', (p) => p.locator('#queue tbody tr').first().waitFor());
  });

  test('the promotion page compares candidate and baseline', async () => {
    await r1.locator(`#queue tr[data-promotion="${promoProd}"] a.strong-link`).click();
    await r1.locator('#promo-title', { hasText: 'fraud-detector v2 → production' }).waitFor();
    assert.match(await r1.locator('#promo-state').innerText(), /awaiting approval/);

    // Metrics with deltas coloured by the policy's direction.
    const auc = r1.locator('#metrics tr[data-metric="auc"]');
    assert.match(await auc.innerText(), /0\.931[\s\S]*0\.945[\s\S]*\+0\.014/);
    assert.equal(await auc.locator('.delta-better').count(), 1, 'higher AUC is better');
    const lat = r1.locator('#metrics tr[data-metric="p95_latency_ms"]');
    assert.match(await lat.innerText(), /\+2\.5/);
    assert.equal(await lat.locator('.delta-worse').count(), 1, 'higher latency is worse');
    // The chart shows changes from the baseline, not bars from zero.
    assert.equal(await r1.locator('#metrics svg.chart rect.bar-delta').count() >= 3, true);
    assert.equal(await r1.locator('#metrics svg.chart g[data-metric="auc"] rect.bar-better').count(), 1);

    // Side by side: images, datasets with lineage links, run, commit, signature.
    const compare = await r1.locator('#compare').innerText();
    assert.match(compare, /fraud-serve@sha256:1{64}/);
    assert.match(compare, /fraud-serve@sha256:2{64}/);
    assert.match(compare, /train-1041/);
    assert.match(compare, /train-1077/);
    assert.match(compare, /4b7d9a2/);
    assert.match(compare, /valid/);
    await r1.locator('#compare a', { hasText: 'fraud-train-2026-11' }).first().waitFor();

    // Every gate, observed against expected.
    const gates = r1.locator('#gates tbody tr');
    assert.ok(await gates.count() >= 7);
    assert.match(await r1.locator('#gates').innerText(), /auc >= baseline[\s\S]*0\.945[\s\S]*>= 0\.926/);
    assert.match(await r1.locator('#gates tr[data-gate="approval"]').innerText(), /2 more needed/);

    // The smoke test: CPU, p50/p95, checks, log tail as text.
    const smoke = await r1.locator('#smoke').innerText();
    assert.match(smoke, /CPU/);
    assert.match(smoke, /12\.1 ms \/ 30\.2 ms/);
    assert.match(smoke, /output_shape/);
    assert.match(await r1.locator('#smoke pre.log-tail').first().innerText(),
                 /<b>warmup<\/b> 5 requests <script>alert\(4\)<\/script>/);

    // Serving cost (docs/contract.md "Quotas and cost"): the candidate's measured figures, as numbers.
    const costRow = r1.locator('#cost tr[data-cost="cost_per_1k_requests"] td');
    assert.match(await costRow.nth(2).innerText(), /^[0-9][0-9.e+-]*$/);
    assert.match(await r1.locator('#cost').innerText(), /Throughput \(requests\/s\)/);

    // Rollout plan before any step.
    assert.match(await r1.locator('#rollout').innerText(), /Candidate weight: 0%[\s\S]*50%[\s\S]*100%/);

    // The stored XSS in the candidate's tag is text.
    await r1.getByText(XSS_TAG).first().waitFor();
    assert.equal(await r1.locator('img[src="x"]').count(), 0);
    await r1.locator('#approve').waitFor();
    // Every button says what it does.
    const unnamed = await r1.locator('button').evaluateAll((bs) =>
      bs.filter((b) => !(b.textContent.trim() || b.getAttribute('aria-label'))).length);
    assert.equal(unnamed, 0);
    await shots(r1, 'promotion', '#/promotions/' + promoProd,
                (p) => p.locator('#smoke pre.log-tail').first().waitFor());
  });

  test('the publisher, also a reviewer, is told why they cannot approve', async () => {
    const page = await newPage();
    await signIn(page, 'publisher');
    // In the queue, the promotion of their own version is read-only, with the reason.
    const qrow = page.locator(`#queue tr[data-promotion="${promoProd}"]`);
    await qrow.waitFor();
    assert.equal(await qrow.getAttribute('data-may-decide'), 'no');
    assert.match(await qrow.locator('.read-only').innerText(), /registered this version/);
    await page.goto(base + '/#/promotions/' + promoProd);
    const why = page.locator('#self-approval');
    await why.waitFor();
    assert.match(await why.innerText(), /you published version 2/);
    assert.equal(await page.locator('#approve').count(), 0, 'no button that would fail');
    assert.equal(await page.locator('#reject').count(), 0);
    // The server agrees.
    const r = await call(tokens.publisher, 'POST', `/api/v1/promotions/${promoProd}/approvals`,
                         { decision: 'approve' });
    assert.equal(r.status, 403);
    assert.equal(r.json.error.code, 'self_approval');
    await shot(page, 'promotion-self-approval-1280');
    await page.context().close();
  });

  test('a POST without the CSRF token is refused with 403', async () => {
    const res = await r1.evaluate(async (id) => {
      const r = await fetch('/api/v1/promotions/' + id + '/approvals', {
        method: 'POST', credentials: 'same-origin',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ decision: 'approve', comment: 'forged' }),
      });
      return { status: r.status, body: await r.json() };
    }, promoProd);
    assert.equal(res.status, 403);
    assert.equal(res.body.error.code, 'forbidden');
    assert.match(res.body.error.message, /CSRF/);

    // The right CSRF token from another origin is refused as well.
    const cookie = (await r1.context().cookies()).find((x) => x.name === 'mg_session');
    const session = await r1.evaluate(async () => (await fetch('/ui/session')).json());
    const forged = await call(null, 'POST', `/api/v1/promotions/${promoProd}/approvals`,
                              { decision: 'approve' },
                              { Cookie: 'mg_session=' + cookie.value, 'X-CSRF-Token': session.csrf,
                                Origin: 'http://evil.example' });
    assert.equal(forged.status, 403);

    // Nothing was recorded.
    const p = await must(admin, 'GET', '/api/v1/promotions/' + promoProd);
    assert.equal(p.approvals.length, 0);
    assert.equal(p.state, 'awaiting_approval');
  });

  test('reviewer1 approves; the page shows the new state', async () => {
    await r1.goto(base + '/#/promotions/' + promoProd);
    await r1.locator('#approve').waitFor();
    await r1.getByLabel('Comment').fill(XSS_APPROVE);
    await r1.locator('#approve').click();
    await r1.locator('#flash', { hasText: 'You approved' }).waitFor();
    assert.match(await r1.locator('#approval-count').innerText(), /1 of 2 approvals · 1 more needed/);
    assert.match(await r1.locator('#already-decided').innerText(), /You approved/);
    assert.equal(await r1.locator('#approve').count(), 0);
    const mine = r1.locator('#approvals li[data-by="reviewer1"]');
    assert.equal(await mine.locator('.comment').innerText(), XSS_APPROVE);
    assert.match(await r1.locator('#promo-state').innerText(), /awaiting approval/);

    const p = await must(admin, 'GET', '/api/v1/promotions/' + promoProd);
    assert.deepEqual(p.approvals.map((a) => [a.by, a.decision, a.comment]),
                     [['reviewer1', 'approve', XSS_APPROVE]]);
    // Back in the queue, one approval is still needed.
    await r1.locator('a.nav-link', { hasText: 'Review queue' }).click();
    const row = r1.locator(`#queue tr[data-promotion="${promoProd}"]`);
    await row.waitFor();
    const cells = await row.locator('td').allInnerTexts();
    assert.match(cells[6], /1 more \(1 of 2 given\)/);
  });

  test('reviewer2 approves and the rollout starts', async () => {
    const r2 = await newPage();
    await signIn(r2, 'reviewer2');
    const qrow = r2.locator(`#queue tr[data-promotion="${promoProd}"]`);
    await qrow.waitFor();
    assert.equal(await qrow.getAttribute('data-may-decide'), 'yes');
    await r2.locator(`#queue tr[data-promotion="${promoProd}"] a.strong-link`).click();
    await r2.locator('#approve').waitFor();
    // reviewer1's comment is text on reviewer2's page too.
    assert.equal(await r2.locator('#approvals li[data-by="reviewer1"] .comment').innerText(),
                 XSS_APPROVE);
    // By keyboard this time.
    await r2.locator('#approve').focus();
    await r2.keyboard.press('Enter');
    await r2.locator('#flash', { hasText: 'You approved' }).waitFor();
    // The answer to the approval is the promotion rolling out, in its shadow phase first.
    assert.match(await r2.locator('#promo-state').innerText(), /rolling out|succeeded/);
    assert.match(await r2.locator('#rollout-phase').innerText(), /Phase: (shadow|internal|steps)/);
    // The page follows the rollout through its phases to the end by itself.
    await r2.locator('#rollout-phase', { hasText: 'internal' })
      .or(r2.locator('#rollout-phase', { hasText: 'steps' })).waitFor({ timeout: 20000 * SLOW });
    await r2.locator('#promo-state', { hasText: 'succeeded' }).waitFor({ timeout: 20000 * SLOW });
    assert.match(await r2.locator('#rollout-weight').innerText(), /100%/);
    assert.match(await r2.locator('#rollout-phase').innerText(), /Phase: steps/);
    assert.equal(await r2.locator('#rollout li[data-phase="shadow"].step-done').count(), 1);
    assert.equal(await r2.locator('#rollout li[data-phase="internal"].step-done').count(), 1);
    const events = await r2.locator('#events').innerText();
    assert.match(events, /shadow phase: v2 gets a copy of every request/);
    assert.match(events, /internal phase: requests with x-canary: 1 go to v2/);
    assert.match(events, /step 1 of 2: v2 at 50%/);
    await shot(r2, 'promotion-succeeded-1280');
    await r2.context().close();

    const alias = await must(admin, 'GET', '/api/v1/models/fraud-detector/aliases/production');
    assert.deepEqual(alias.routes.map((r) => [r.version, r.weight]), [[2, 100]]);
  });

  test('a reject needs a comment, and a script in it stays text', async () => {
    await r1.goto(base + '/#/promotions/' + promoStaging);
    await r1.locator('#reject').waitFor();
    await r1.locator('#reject').click();
    await r1.locator('#decision-error', { hasText: 'comment is required' }).waitFor();
    let p = await must(admin, 'GET', '/api/v1/promotions/' + promoStaging);
    assert.equal(p.state, 'awaiting_approval', 'nothing sent without a comment');

    await r1.getByLabel('Comment').fill(XSS_REJECT);
    await r1.locator('#reject').click();
    await r1.locator('#promo-state', { hasText: 'rejected' }).waitFor();
    assert.equal(await r1.locator('#approvals li[data-by="reviewer1"] .comment').innerText(),
                 XSS_REJECT);
    assert.match(await r1.locator('#events').innerText(), /<script>alert\("reject"\)<\/script>/);
    p = await must(admin, 'GET', '/api/v1/promotions/' + promoStaging);
    assert.equal(p.state, 'rejected');
    // The queue is empty now.
    await r1.goto(base + '/#/queue');
    await r1.locator('#queue-empty').waitFor();
  });

  test('the model page shows the split, history with the LKG and deliveries', async () => {
    // A reviewer sees it, without a rollback button.
    await r1.goto(base + '/#/models/fraud-detector');
    await r1.locator('#alias-production').waitFor();
    assert.equal(await r1.locator('#rollback-production').count(), 0);

    const page = await newPage();
    await signIn(page, 'deployer');
    await page.goto(base + '/#/models/fraud-detector');
    const prod = page.locator('#alias-production');
    await prod.waitFor();
    assert.match(await prod.locator('.split').getAttribute('aria-label'), /v2 100%/);
    assert.equal(await page.locator('#lkg-production').innerText(), 'v2');
    const lkgRows = prod.locator('.history-table tr.is-lkg');
    assert.equal(await lkgRows.count(), 1);
    assert.match(await lkgRows.innerText(), /v2 100%[\s\S]*LKG/);
    assert.match(await prod.locator('.history-table').innerText(), /v1 50% · v2 50%/);
    assert.match(await prod.locator('.deliveries-table tr[data-gateway="runner"]').innerText(),
                 /runner/);
    await page.getByText(XSS_TAG).first().waitFor();
    assert.equal(await page.locator('img[src="x"]').count(), 0);
    await shots(page, 'model', '#/models/fraud-detector',
                (p) => p.locator('#alias-production .split').waitFor());

    // Roll back: a dialog asks for a reason first.
    await page.getByRole('button', { name: 'Roll back production of fraud-detector' }).click();
    const dlg = page.locator('#rollback-dialog');
    await dlg.waitFor();
    await page.locator('#rollback-confirm').click();
    await page.locator('#rollback-error', { hasText: 'reason is required' }).waitFor();
    await page.locator('#rollback-cancel').click();
    await dlg.waitFor({ state: 'detached' });
    await page.getByRole('button', { name: 'Roll back production of fraud-detector' }).click();
    await dlg.waitFor();
    await page.keyboard.press('Escape');
    await dlg.waitFor({ state: 'detached' });
    let alias = await must(admin, 'GET', '/api/v1/models/fraud-detector/aliases/production');
    assert.deepEqual(alias.routes.map((r) => [r.version, r.weight]), [[2, 100]], 'cancel does nothing');

    await page.getByRole('button', { name: 'Roll back production of fraud-detector' }).click();
    await page.getByLabel('Reason (required)').fill(XSS_ROLLBACK);
    await shot(page, 'model-rollback-dialog-1280');
    await page.locator('#rollback-confirm').click();
    await page.locator('#flash', { hasText: 'Rolled back production' }).waitFor();
    await page.locator('#alias-production .split[aria-label*="v1 100%"]').waitFor();
    assert.match(await page.locator('#alias-production .history-table tbody tr').first().innerText(),
                 /v1 100%[\s\S]*<b onmouseover=alert\(3\)>rollback<\/b> after alert/);
    alias = await must(admin, 'GET', '/api/v1/models/fraud-detector/aliases/production');
    assert.deepEqual(alias.routes.map((r) => [r.version, r.weight]), [[1, 100]]);
    assert.match(await page.locator('#versions tr[data-version="2"]').innerText(), /production/,
                 'v2 is now marked bad for production');
    await page.context().close();
  });

  test('dataset lineage links lead from a version to its data and back', async () => {
    await r1.goto(base + '/#/promotions/' + promoProd);
    await r1.locator('#compare a', { hasText: 'fraud-train-2026-11' }).first().click();
    await r1.locator('h1', { hasText: 'fraud-train-2026-11' }).waitFor();
    assert.match(await r1.locator('main').innerText(), /s3:\/\/ml-data\/fraud\/train\/2026-11\//);
    await r1.locator('main dd a').first().click();   // its parent
    await r1.locator('h1', { hasText: 'fraud-train-2026-10' }).waitFor();
    assert.match(await r1.locator('#dataset-users').innerText(), /fraud-detector[\s\S]*v1/);
  });

  test('the browser loads every module and each page module draws its page', async () => {
    const page = await newPage();
    await signIn(page, 'reviewer1');
    await page.locator('#queue').waitFor();
    await page.goto(base + '/#/models');
    await page.locator('.models-table tr', { hasText: 'fraud-detector' }).waitFor();
    await page.goto(base + '/#/models/fraud-detector');
    await page.locator('#versions tr[data-version="2"]').waitFor();
    await page.goto(base + '/#/promotions/' + promoProd);
    await page.locator('#metrics tr[data-metric="auc"]').waitFor();
    await page.goto(base + '/#/datasets/' + encodeURIComponent(H1));
    await page.locator('h1', { hasText: 'fraud-train-2026-10' }).waitFor();
    await page.goto(base + '/#/no-such-page');
    await page.locator('h1', { hasText: 'Not found' }).waitFor();
    const loaded = await page.evaluate(() => performance.getEntriesByType('resource')
      .map((e) => new URL(e.name).pathname).filter((p) => p.endsWith('.js')));
    const modules = [...(await jsModules()).keys()].map((m) => '/static/' + m);
    assert.deepEqual([...new Set(loaded)].sort(), modules.sort());
    await page.context().close();
  });

  test('the model page marks archived, deleted and withdrawn-data versions and shows usage',
       async () => {
    const pub = tokens.publisher;
    const H3 = 'sha256:' + hex('d');
    await must(pub, 'POST', '/api/v1/models', { name: 'churn' });
    await must(pub, 'POST', '/api/v1/datasets', { digest: H3, name: 'churn-raw' });
    for (const [i, text] of ['churn v1', 'churn v2 bytes', 'churn v3 weights!'].entries()) {
      const b = await must(pub, 'POST', '/api/v1/blobs', new TextEncoder().encode(text));
      await must(pub, 'POST', '/api/v1/models/churn/versions', {
        artifact: b.digest, datasets: i === 2 ? [{ digest: H3, role: 'train' }] : [],
      });
    }
    await must(pub, 'POST', '/api/v1/models/churn/versions/1/archive');
    await must(admin, 'DELETE', '/api/v1/models/churn/versions/2', { reason: 'leaked labels' });
    await must(admin, 'POST', '/api/v1/datasets/' + encodeURIComponent(H3) + '/withdraw',
               { reason: 'licence ended' });

    const page = await newPage();
    await signIn(page, 'reviewer1');
    await page.goto(base + '/#/models/churn');
    await page.locator('#versions tr[data-version="3"]').waitFor();
    assert.equal(await page.locator('#versions tr[data-version="1"]').getAttribute('data-status'),
                 'archived');
    const deleted = page.locator('#versions tr[data-version="2"]');
    assert.equal(await deleted.getAttribute('data-status'), 'deleted');
    assert.match(await deleted.innerText(), /deleted[\s\S]*leaked labels/);
    assert.equal(await page.locator('#versions tr[data-version="3"] [data-flag="withdrawn"]')
      .count(), 1);
    assert.equal(await page.locator('#versions tr[data-version="1"] [data-flag="withdrawn"]')
      .count(), 0);
    // 8 + 17 bytes are stored for v1 and v3; v2's bytes no longer count.
    assert.match(await page.locator('#model-usage').innerText(),
                 /1 ready · 1 archived · 1 deleted · 25 B stored/);
    await page.context().close();
  });

  test('signing out ends the session', async () => {
    await r1.locator('#sign-out').click();
    await r1.getByLabel('API token').waitFor();
    const r = await r1.evaluate(async () => (await fetch('/ui/session')).status);
    assert.equal(r, 401);
    await r1.context().close();
  });

  test('the promotion page shows the schema diff and the VRAM estimate\'s inputs', async () => {
    // Two ONNX models from python3-onnx: v2 renames v1's input "image" to "pixels".
    const dir = path.join(tmp, 'onnx');
    await mkdir(dir, { recursive: true });
    const here = path.dirname(fileURLToPath(import.meta.url));
    execFileSync('/usr/bin/python3', [path.join(here, '../unit/artifact/onnx_make.py'), dir]);
    const pub = tokens.publisher;
    await must(pub, 'POST', '/api/v1/models', { name: 'vision' });
    for (const f of ['vision.onnx', 'renamed.onnx']) {
      const blob = await must(pub, 'POST', '/api/v1/blobs',
                              new Uint8Array(await readFile(path.join(dir, f))));
      assert.deepEqual(blob.formats, ['onnx']);
      await must(pub, 'POST', '/api/v1/models/vision/versions', {
        artifact: blob.digest, image: 'registry.example/vision@sha256:' + hex('3'),
      });
    }
    await must(tokens.deployer, 'PUT', '/api/v1/models/vision/aliases/production', { version: 1 });
    await must(admin, 'PUT', '/api/v1/models/vision/policies/production', {
      schema: { compatible_with_baseline: true }, approvals: { required: 1 },
      rollout: { steps: [100], bake_seconds: 1 },
    });
    const p = await must(tokens.deployer, 'POST', '/api/v1/promotions', {
      model: 'vision', version: 2, alias: 'production', reason: 'renamed input',
    });
    assert.equal(p.state, 'rejected');
    const r1 = await newPage();
    await signIn(r1, 'reviewer1');
    await r1.goto(base + '/#/promotions/' + p.id);
    await r1.locator('#promo-title', { hasText: 'vision v2 → production' }).waitFor();
    const image = r1.locator('#schema tr[data-io="input:image"]');
    assert.match(await image.innerText(), /F32[\s\S]*missing in the candidate/);
    assert.match(await r1.locator('#schema tr[data-io="input:pixels"]').innerText(),
                 /new required input/);
    assert.match(await r1.locator('#schema tr[data-io="output:logits"]').innerText(), /same/);
    assert.match(await r1.locator('#schema-gate').innerText(), /renamed to 'pixels'/);
    assert.equal(await r1.locator('#schema tr.io-breaking').count(), 2);
    const vram = await r1.locator('#vram-facts').innerText();
    assert.match(vram, /weights_bytes × 1\.2/);
    assert.match(vram, /Weight bytes[\s\S]*37840/);   // 64×3×7×7 F32 + 64 F16 + 10 I64
    assert.match(await r1.locator('#gates tr[data-gate="schema"]').innerText(), /failed/);
    await shots(r1, 'promotion-schema', '#/promotions/' + p.id,
                (pg) => pg.locator('#schema tr[data-io="input:image"]').waitFor());
    await r1.context().close();
  });

  test('the promotion page charts live analysis per interval, updating live', async () => {
    // docs/contract.md "Live canary analysis": a policy whose Prometheus does not answer records an
    // inconclusive interval each second; the page charts them as they come.
    const pub = tokens.publisher;
    await must(pub, 'POST', '/api/v1/models', { name: 'scorer' });
    for (const text of ['scorer v1', 'scorer v2 bytes']) {
      const b = await must(pub, 'POST', '/api/v1/blobs', new TextEncoder().encode(text));
      await must(pub, 'POST', '/api/v1/models/scorer/versions', { artifact: b.digest });
    }
    await must(tokens.deployer, 'PUT', '/api/v1/models/scorer/aliases/production', { version: 1 });
    await must(admin, 'PUT', '/api/v1/models/scorer/policies/production', {
      rollout: { steps: [50, 100], bake_seconds: 1 },
      analysis: {
        provider: { kind: 'prometheus', url: 'http://127.0.0.1:9' },
        interval_seconds: 1, inconclusive_limit: 500,
        metrics: [{ name: 'err', kind: 'ratio', errors: 'sum(e{v="{{version}}"})',
                    total: 'sum(t{v="{{version}}"})', max: 0.02 }],
      },
    });
    const p = await must(tokens.deployer, 'POST', '/api/v1/promotions', {
      model: 'scorer', version: 2, alias: 'production', reason: 'analysis chart',
    });
    await waitFor('two analysis intervals', async () => {
      const q = await must(admin, 'GET', '/api/v1/promotions/' + p.id);
      return q.analysis && q.analysis.intervals.length >= 2;
    });
    const page = await newPage();
    await signIn(page, 'reviewer1');
    await page.goto(base + '/#/promotions/' + p.id);
    await page.locator('#analysis svg.analysis-chart[data-metric="err"]').waitFor();
    assert.ok(await page.locator('#analysis circle.mark-inconclusive').count() >= 2);
    assert.match(await page.locator('#analysis tr[data-metric="err"]').innerText(),
                 /inconclusive[\s\S]*cannot reach Prometheus/);
    const recorded = async () =>
      Number((/(\d+) intervals recorded/.exec(await page.locator('#analysis-summary').innerText())
              || [0, 0])[1]);
    const first = await recorded();
    assert.ok(first >= 2);
    await waitFor('the page to show newer intervals', async () => (await recorded()) > first);
    await must(tokens.deployer, 'POST', '/api/v1/promotions/' + p.id + '/abort',
               { reason: 'chart seen' });
    await page.context().close();
  });

  test('no page opened a dialog, ran injected script or broke the CSP', () => {
    assert.deepEqual(dialogs, []);
    assert.deepEqual(pageErrors, []);
  });
});
