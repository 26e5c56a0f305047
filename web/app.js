/*
 * modelgate reviewer UI, entry module: the router.
 *
 * Plain JavaScript modules loaded by the browser itself: no build step,
 * nothing loaded from elsewhere. Pages are chosen by the URL hash: #/queue,
 * #/promotions/ID, #/models, #/models/NAME, #/models/NAME/versions/N,
 * #/models/NAME/compare/A/B, #/datasets/DIGEST, #/activity, #/search?q=…. Each page is a
 * page_*.js module; what they share is in ui_*.js.
 *
 * Everything that came from the server (names, tags, comments, log tails) is
 * data: it only ever reaches the page through textContent, attribute values
 * set with setAttribute, or SVG text nodes. No module uses innerHTML,
 * insertAdjacentHTML, document.write or eval, and no inline style is written
 * as a string (the server's Content-Security-Policy forbids it); sizes are set
 * through the CSSOM.
 */

import { renderActivity } from './page_activity.js';
import { renderCompare } from './page_compare.js';
import { renderDataset } from './page_dataset.js';
import { renderModel } from './page_model.js';
import { renderModels } from './page_models.js';
import { renderPromotion } from './page_promotion.js';
import { renderQueue } from './page_queue.js';
import { renderSearch } from './page_search.js';
import { renderSignIn } from './page_signin.js';
import { renderVersion } from './page_version.js';
import { api } from './ui_api.js';
import { renderChrome } from './ui_chrome.js';
import { h } from './ui_dom.js';
import { session, setRouter, stopPoll, view } from './ui_state.js';
import { mount, showError } from './ui_widgets.js';

async function route() {
  stopPoll();
  const seq = ++view.seq;
  renderChrome();
  if (!session.me) {
    renderSignIn();
    return;
  }
  let parts;
  try {
    parts = (location.hash || '#/queue').replace(/^#\/?/, '').replace(/\?.*$/, '').split('/')
      .map((x) => decodeURIComponent(x));
  } catch (e) {
    parts = ['?'];
  }
  try {
    if (parts[0] === '' || parts[0] === 'queue')
      await renderQueue(seq);
    else if (parts[0] === 'promotions' && parts[1])
      await renderPromotion(seq, parts[1]);
    else if (parts[0] === 'models' && parts[1] && parts[2] === 'versions' && parts[3])
      await renderVersion(seq, parts[1], parts[3]);
    else if (parts[0] === 'models' && parts[1] && parts[2] === 'compare' && parts[3] && parts[4])
      await renderCompare(seq, parts[1], parts[3], parts[4]);
    else if (parts[0] === 'models' && parts[1] && !parts[2])
      await renderModel(seq, parts[1]);
    else if (parts[0] === 'activity')
      await renderActivity(seq);
    else if (parts[0] === 'search')
      await renderSearch(seq);
    else if (parts[0] === 'models')
      await renderModels(seq);
    else if (parts[0] === 'datasets' && parts[1])
      await renderDataset(seq, parts.slice(1).join('/'));
    else
      mount(h('h1', null, 'Not found'),
            h('p', null, 'No such page. ', h('a', { href: '#/queue' }, 'Go to the review queue.')));
  } catch (e) {
    if (seq === view.seq)
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

setRouter(route);
/* Module scripts run once the document is parsed, like deferred ones. */
start();
