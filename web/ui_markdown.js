/*
 * A model card, drawn from the node tree the server's cmark made of its Markdown
 * (GET /api/v1/models/NAME/readme, server/markdown.h). Every node becomes an element
 * made here by name; text stays text. The server already dropped raw HTML and every
 * link that is not http:, https: or mailto:; a link is checked again here all the same.
 */

import { add, h } from './ui_dom.js';

const SAFE_URL = /^(https?:|mailto:)/i;
const MAX_DEPTH = 32;

function children(n, depth) {
  return (Array.isArray(n.c) ? n.c : []).map((k) => node(k, depth + 1));
}

function node(n, depth) {
  if (!n || typeof n !== 'object' || depth > MAX_DEPTH)
    return null;
  const kids = () => children(n, depth);
  switch (n.t) {
  case 'document':
    return h('div', null, kids());
  case 'paragraph':
    return h('p', null, kids());
  case 'heading': {
    /* The page has its h1 and section h2s: a card's headings start at h3. */
    const level = Math.min(6, Math.max(3, (Number(n.level) || 1) + 2));
    return h('h' + level, { class: 'md-h' }, kids());
  }
  case 'block_quote':
    return h('blockquote', null, kids());
  case 'list':
    return n.ordered
      ? h('ol', { start: Number.isInteger(n.start) && n.start !== 1 ? n.start : null }, kids())
      : h('ul', null, kids());
  case 'item':
    return h('li', null, kids());
  case 'emph':
    return h('em', null, kids());
  case 'strong':
    return h('strong', null, kids());
  case 'link':
    if (typeof n.href === 'string' && SAFE_URL.test(n.href))
      return h('a', { href: n.href, title: n.title || null, rel: 'noopener noreferrer nofollow',
                      class: n.image ? 'md-image' : null },
               n.image ? 'image: ' : null, kids());
    return h('span', null, kids());
  case 'span':
    return h('span', null, kids());
  case 'text':
    return typeof n.text === 'string' ? n.text : null;
  case 'code':
    return h('code', null, String(n.text || ''));
  case 'code_block':
    return h('pre', { class: 'md-code', tabindex: '0' }, h('code', null, String(n.text || '')));
  case 'softbreak':
    return ' ';
  case 'linebreak':
    return h('br');
  case 'thematic_break':
    return h('hr');
  default:
    return null;
  }
}

/* The card as an element (class "md"), or null for an empty one. */
export function markdownCard(doc) {
  if (!doc || !Array.isArray(doc.c) || doc.c.length === 0)
    return null;
  return add(h('div', { class: 'md' }), children(doc, 0));
}
