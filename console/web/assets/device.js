// @ts-check
// The device page: a signed-in person approves (or denies) the code that
// `relay login` printed, giving that machine a token of its own.
import { h, replace, field } from './dom.js';
import { request } from './graphql.js';
import { DEVICE_AUTHORIZATION, APPROVE_DEVICE, DENY_DEVICE } from './api.js';
import { currentAccount, onSessionChange } from './session.js';
import { notice, runBusy, submitWith } from './ui.js';
import { formatFullTime } from './format.js';
import { signInForm, passwordSignInForm } from './home.js';

/**
 * devicePage renders into root and returns {dispose}.
 * @param {HTMLElement} root
 * @returns {Page}
 */
export function devicePage(root) {
  document.title = 'Log in a device · Relay';
  let disposed = false;
  const section = h('section', { class: 'card', 'aria-labelledby': 'device-title' });
  replace(root, h('div', { class: 'stack' }, section));
  const linked = new URLSearchParams(location.search).get('code') || '';
  render();
  const off = onSessionChange(() => { if (!disposed) render(); });

  function render() {
    const account = currentAccount();
    if (!account) {
      replace(section, h('h1', { id: 'device-title' }, 'Log in a device'),
        h('p', {}, 'Sign in first: the device will act for the account (and the member) you sign in with.'), passwordSignInForm(), signInForm());
      return;
    }
    const code = h('input', {
      type: 'text', name: 'user-code', required: true, autocomplete: 'off', spellcheck: 'false',
      maxlength: '20', value: linked, placeholder: 'BCDF-GHJK', autocapitalize: 'characters',
    });
    const status = h('div', { class: 'form-status' });
    const result = h('div', { 'data-testid': 'device-result' });
    const form = h('form', {
      class: 'stack',
      'aria-labelledby': 'device-title',
      onsubmit: submitWith(status, async () => {
        const data = await request(DEVICE_AUTHORIZATION, { code: code.value.trim() });
        replace(result, confirmCard(code.value.trim(), data.deviceAuthorization, account));
        form.hidden = true;
      }),
    },
    h('h1', { id: 'device-title' }, 'Log in a device'),
    h('p', {}, 'Enter the code that ', h('code', {}, 'relay login'), ' (or ', h('code', {}, 'relay listen'), ' before its first login) printed on the device.'),
    field('Code', code, 'Eight letters, such as BCDF-GHJK.'),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn btn-primary' }, 'Continue')),
    status);
    replace(section, form, result);
  }

  /**
   * @param {string} userCode
   * @param {GQL.DeviceAuthorization} d
   * @param {SignedIn} account
   */
  function confirmCard(userCode, d, account) {
    const status = h('div', { class: 'form-status' });
    const approve = h('button', { type: 'button', class: 'btn btn-primary', 'data-testid': 'approve-device' }, 'Approve');
    const deny = h('button', { type: 'button', class: 'btn btn-danger', 'data-testid': 'deny-device' }, 'Deny');
    const card = h('div', { class: 'stack', 'data-testid': 'device-confirm' },
      h('h2', {}, `Log in “${d.clientName}” as ${account.name}?`),
      h('p', {}, 'Approve only if you just ran ', h('code', {}, 'relay login'), ' on that machine and it shows the code ',
        h('strong', { 'data-testid': 'device-code' }, userCode.toUpperCase()), '. It will receive its own token, named ',
        h('strong', {}, d.clientName), ', which you can revoke in Settings.'),
      h('p', { class: 'muted' }, 'Requested ', formatFullTime(d.requestedAt), '; the code expires ', formatFullTime(d.expiresAt), '.'),
      h('div', { class: 'actions' }, approve, deny),
      status);
    const decide = (/** @type {HTMLButtonElement} */ button, /** @type {string} */ mutation, /** @type {Element} */ done) => runBusy(button, status, async () => {
      await request(mutation, { code: userCode });
      approve.disabled = true;
      deny.disabled = true;
      replace(card, done);
    });
    approve.addEventListener('click', () => decide(approve, APPROVE_DEVICE,
      notice('success', h('p', {}, `Approved: “${d.clientName}” is logged in. You can close this page.`))));
    deny.addEventListener('click', () => decide(deny, DENY_DEVICE,
      notice('info', h('p', {}, `Denied: “${d.clientName}” gets no token.`))));
    return card;
  }

  return {
    dispose() {
      disposed = true;
      off();
    },
  };
}
