/*
 * DOM helpers: the only way the UI makes nodes. Text always becomes a Text
 * node and attributes go through setAttribute, so server data is never parsed
 * as markup.
 */

const SVGNS = 'http://www.w3.org/2000/svg';

/* h('a', {href: '#/x', class: 'c'}, 'text', child, [more]) */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  add(el, children);
  return el;
}

export function s(tag, attrs, ...children) {
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
export function add(el, ...children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false)
      continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild)
    el.removeChild(el.firstChild);
}

/* Only this server's own paths ever become links. */
export function localPath(u) {
  return typeof u === 'string' && /^\/(?!\/)[\x21-\x7e]*$/.test(u) && !u.includes('\\');
}

export function enc(x) {
  return encodeURIComponent(String(x));
}
