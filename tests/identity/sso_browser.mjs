// sso_browser.mjs - "Sign in with SSO" in headless Chromium (playwright-core): from
// the reviewer UI's sign-in page and its link to modelgated's /ui/sso/login, through the provider's login and consent pages back to
// modelgated, then the UI session as the page's own fetch sees it. Prints one JSON line:
// {"landed","session":{…},"callback":{status,body} of the first callback,"replay":status of the
// callback URL used a second time}. With START_URL (an authorization URL the test made, e.g.
// with another nonce), the browser starts there instead of at the UI's link.
//
// Usage: node sso_browser.mjs MODELGATE_URL LOGIN [START_URL]
import { chromium } from 'playwright-core';

const [base, login, start] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.MG_CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox'],
});
try {
  const page = await browser.newPage();
  let callbackUrl = null;
  let callback = null;
  page.on('request', (req) => {
    if (!callbackUrl && req.url().startsWith(`${base}/ui/sso/callback`)) callbackUrl = req.url();
  });
  page.on('response', async (res) => {
    if (!callback && res.url().startsWith(`${base}/ui/sso/callback`)) {
      callback = { status: res.status() };
      callback.body = await res.text().catch(() => '');
    }
  });
  if (start) {
    await page.goto(start);
  } else {
    // The reviewer UI's sign-in page, and its "Sign in with SSO" link.
    await page.goto(`${base}/`);
    await page.getByRole('link', { name: 'Sign in with SSO' }).click();
  }
  await page.waitForSelector('input[name=login]');
  await page.fill('input[name=login]', login);
  await page.fill('input[name=password]', 'any');
  await page.click('button[type=submit]');
  await page.waitForLoadState();
  if (!page.url().startsWith(base)) {
    await page.click('button[type=submit]'); // consent
  }
  await page.waitForURL((u) => u.toString().startsWith(base), { timeout: 15000 });
  const landed = page.url();
  const session = await page.evaluate(async () => {
    const r = await fetch('/ui/session');
    return { status: r.status, body: await r.json() };
  });
  const whoami = await page.evaluate(async () => {
    const r = await fetch('/api/v1/whoami');
    return { status: r.status, body: await r.json() };
  });
  // The callback again (same state and code): single use.
  const again = await page.request.get(callbackUrl, { maxRedirects: 0 });
  console.log(JSON.stringify({ landed, session, whoami, callback, replay: again.status(),
    replay_body: await again.text() }));
} finally {
  await browser.close();
}
