// @ts-check
// Small reusable widgets: copy buttons, notices, code blocks.
import { h, replace } from './dom.js';
import { describeError } from './graphql.js';

/**
 * copyText writes text to the clipboard. The async Clipboard API needs a
 * secure context and permission; the textarea fallback covers the rest.
 * @param {string} text
 */
export async function copyText(text) {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // fall through to the fallback
  }
  const ta = h('textarea', { class: 'offscreen', 'aria-hidden': 'true', tabindex: '-1' });
  ta.value = text;
  document.body.append(ta);
  ta.select();
  let ok = false;
  try {
    ok = document.execCommand('copy');
  } catch {
    ok = false;
  }
  ta.remove();
  return ok;
}

/**
 * copyButton copies getText() (or a string) and says so for two seconds;
 * the status is announced to screen readers through a polite live region.
 * @param {string | (() => string)} text
 * @param {string} [label]
 * @param {Record<string, any>} [attrs] more attributes for the button
 */
export function copyButton(text, label = 'Copy', attrs = {}) {
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let copyTimer;
  const status = h('span', { class: 'copy-status', role: 'status', 'aria-live': 'polite' });
  const button = h('button', {
    type: 'button',
    class: 'btn btn-small',
    ...attrs,
    onclick: async () => {
      const value = typeof text === 'function' ? text() : text;
      const ok = await copyText(value);
      status.textContent = ok ? 'Copied' : 'Copy failed: select the text and copy it';
      button.dataset.copied = String(ok);
      clearTimeout(copyTimer);
      copyTimer = setTimeout(() => {
        status.textContent = '';
        delete button.dataset.copied;
      }, 2000);
    },
  }, label);
  return h('span', { class: 'copy-wrap' }, button, status);
}

/**
 * codeLine shows a one-line value (URL, command) with a copy button.
 * @param {string} label
 * @param {string} text
 * @param {{ copyValue?: string | (() => string), testid?: string, buttonLabel?: string }} [options]
 */
export function codeLine(label, text, { copyValue, testid, buttonLabel } = {}) {
  return h('div', { class: 'code-line' },
    h('span', { class: 'code-line-label' }, label),
    h('code', { class: 'code-line-value', 'data-testid': testid }, text),
    copyButton(copyValue || text, buttonLabel || 'Copy', { 'aria-label': `Copy ${label.toLowerCase()}` }));
}

/**
 * notice renders a message box; kind is 'info', 'warn', 'error' or 'success'.
 * @param {'info' | 'warn' | 'error' | 'success'} kind
 * @param {...DomChild} children
 */
export function notice(kind, ...children) {
  return h('div', { class: `notice notice-${kind}`, role: kind === 'error' ? 'alert' : 'status' }, ...children);
}

/**
 * runBusy disables button and clears status while work runs. On failure it
 * shows the error in status and enables the button again, so people can fix
 * the input and retry. On success the button stays disabled: work either
 * navigates away or re-renders the form.
 * @param {HTMLButtonElement} button
 * @param {Element} status
 * @param {() => unknown} work
 */
export async function runBusy(button, status, work) {
  button.disabled = true;
  replace(status);
  try {
    await work();
  } catch (err) {
    replace(status, notice('error', describeError(err)));
    button.disabled = false;
  }
}

/**
 * submitWith is a form's onsubmit: it keeps the browser from loading a page
 * and runs work through runBusy with the form's submit button.
 * @param {Element} status
 * @param {() => unknown} work
 * @returns {(ev: Event) => Promise<void>}
 */
export function submitWith(status, work) {
  return (ev) => {
    ev.preventDefault();
    const form = /** @type {HTMLFormElement} */ (ev.currentTarget);
    return runBusy(/** @type {HTMLButtonElement} */ (form.querySelector('button[type=submit]')), status, work);
  };
}
