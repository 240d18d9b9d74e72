// @ts-check
// Tiny DOM helpers. Everything user-supplied goes into text nodes or
// attributes, never into innerHTML, so recorded requests cannot inject markup.

/**
 * h builds an element: h('button', {class: 'x', onclick: fn}, 'Label').
 * Attributes named on* become listeners; true/false toggle boolean
 * attributes; null/undefined are skipped. Children may be strings, nodes,
 * arrays, or null/false (skipped).
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Record<string, any> | null} [attrs]
 * @param {...DomChild} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') {
      el.addEventListener(name.slice(2), value);
    } else if (value === true) {
      el.setAttribute(name, '');
    } else if (name === 'value' && 'value' in el) {
      /** @type {HTMLInputElement} */ (el).value = value;
    } else {
      el.setAttribute(name, String(value));
    }
  }
  append(el, children);
  return el;
}

/**
 * append adds children (strings, nodes, nested arrays) to el.
 * @template {Element} E
 * @param {E} el
 * @param {DomChild[]} children
 * @returns {E}
 */
export function append(el, children) {
  for (const child of /** @type {unknown[]} */ (children).flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/**
 * replace swaps el's children for the given ones.
 * @template {Element} E
 * @param {E} el
 * @param {...DomChild} children
 * @returns {E}
 */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** uid returns a unique id for label/input pairs. */
let counter = 0;
export function uid(prefix = 'f') {
  counter += 1;
  return `${prefix}-${counter}`;
}

/**
 * field builds a labelled input: a <label> bound to the control by id, so
 * every control has an accessible name.
 * @param {string} label
 * @param {HTMLElement} control
 * @param {DomChild} [hint]
 */
export function field(label, control, hint) {
  if (!control.id) control.id = uid('field');
  const hintEl = hint ? h('span', { class: 'hint', id: `${control.id}-hint` }, hint) : null;
  if (hintEl) control.setAttribute('aria-describedby', hintEl.id);
  return h('div', { class: 'field' }, h('label', { for: control.id }, label), control, hintEl);
}
