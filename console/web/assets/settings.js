// @ts-check
// The settings page: the account's API tokens (one per device), listed,
// created (the secret shown once) and revoked.
import { h, replace, field } from './dom.js';
import { request } from './graphql.js';
import { TOKENS, CREATE_TOKEN, REVOKE_TOKEN } from './api.js';
import { currentAccount, onSessionChange, signOut, sessionEnded } from './session.js';
import { notice, runBusy, submitWith, codeLine } from './ui.js';
import { formatFullTime } from './format.js';
import { signInForm, passwordSignInForm } from './home.js';
import { teamSection } from './team.js';
import { usageSection } from './usage.js';

const ENDED = 'Your session ended: it was signed out elsewhere, expired or revoked, or your access was removed. Sign in again.';

/** @type {Array<[string, string]>} */
const LIFETIMES = [['', 'Never'], ['7d', '7 days'], ['30d', '30 days'], ['90d', '90 days'], ['365d', 'A year']];

/**
 * settingsPage renders into root and returns {dispose}.
 * @param {HTMLElement} root
 * @param {{ navigate: Navigate }} options
 * @returns {Page}
 */
export function settingsPage(root, { navigate }) {
  document.title = 'Settings · Relay';
  let disposed = false;
  /** @type {Array<() => void>} */
  const cleanups = [];
  const section = h('section', { class: 'card', 'aria-labelledby': 'tokens-title' });
  const teamBox = h('div');
  const usageBox = h('div');
  /** @type {{ element: HTMLElement, dispose(): void } | null} */
  let team = null;
  /** @type {{ element: HTMLElement, dispose(): void } | null} */
  let usage = null;
  replace(root, h('div', { class: 'stack' }, teamBox, usageBox, section));
  render();
  const off = onSessionChange(() => { if (!disposed) render(); });

  function render() {
    if (team) team.dispose();
    if (usage) usage.dispose();
    team = null;
    usage = null;
    replace(teamBox);
    replace(usageBox);
    if (!currentAccount()) {
      replace(section, h('h1', { id: 'tokens-title' }, 'Settings'),
        sessionEnded() ? notice('info', ENDED) : null,
        h('p', { class: 'muted' }, 'Sign in to manage your team and API tokens.'), passwordSignInForm(), signInForm());
      return;
    }
    team = teamSection();
    replace(teamBox, team.element);
    usage = usageSection();
    replace(usageBox, usage.element);
    const list = h('div', { 'data-testid': 'tokens' }, h('p', { class: 'muted' }, 'Loading tokens…'));
    const revealed = h('div', { 'data-testid': 'token-reveal' });
    replace(section,
      h('h1', { id: 'tokens-title' }, 'API tokens'),
      h('p', { class: 'muted' },
        'Each device or program signs in with its own token. Revoke one and it stops working at once: ',
        'requests with it are refused and agents using it are disconnected. The relay keeps only a hash of each token.'),
      list, revealed, createForm(list, revealed));
    load(list);
  }

  /** @param {HTMLElement} list */
  async function load(list) {
    try {
      const data = await request(TOKENS);
      if (!disposed) replace(list, tokensTable(data.tokens, list));
    } catch (err) {
      if (!disposed) replace(list, notice('error', /** @type {Error} */ (err).message));
    }
  }

  /**
   * @param {GQL.Token[]} tokens
   * @param {HTMLElement} list
   */
  function tokensTable(tokens, list) {
    if (!tokens.length) return h('p', { class: 'muted' }, 'No tokens.');
    const when = (/** @type {string | null} */ iso, /** @type {string} */ none) => (iso ? h('time', { datetime: iso }, formatFullTime(iso)) : none);
    return h('div', { class: 'table-scroll' }, h('table', { class: 'table' },
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col' }, 'Name'), h('th', { scope: 'col' }, 'Created'),
        h('th', { scope: 'col' }, 'Last used'), h('th', { scope: 'col' }, 'Expires'),
        h('th', { scope: 'col' }, h('span', { class: 'sr-only' }, 'Actions')))),
      h('tbody', {}, tokens.map((t) => h('tr', { 'data-token-id': t.id },
        h('td', {}, t.name, t.current ? [' ', h('span', { class: 'badge', 'data-testid': 'current-token' }, 'this browser')] : null,
          t.member ? [' ', h('span', { class: 'muted' }, `(${t.member})`)] : null),
        h('td', {}, when(t.createdAt, '')),
        h('td', {}, when(t.lastUsedAt, 'Never')),
        h('td', {}, t.expiresAt && new Date(t.expiresAt) <= new Date() ? h('span', { class: 'muted' }, 'Expired') : when(t.expiresAt, 'Never')),
        h('td', {}, h('button', {
          type: 'button',
          class: 'btn btn-small btn-danger',
          'aria-label': `Revoke ${t.name}`,
          onclick: () => confirmRevoke(t, list),
        }, 'Revoke…')))))));
  }

  /**
   * @param {GQL.Token} t
   * @param {HTMLElement} list
   */
  function confirmRevoke(t, list) {
    const status = h('div', { class: 'form-status' });
    const cancel = h('button', { type: 'button', class: 'btn', autofocus: true }, 'Cancel');
    const ok = h('button', { type: 'button', class: 'btn btn-danger' }, 'Revoke');
    const warning = t.current
      ? 'This browser signs in with it: you will be signed out here.'
      : 'Every device or agent using it is refused from now on.';
    const dialog = h('dialog', { class: 'dialog', 'aria-labelledby': 'revoke-title', 'aria-describedby': 'revoke-desc' },
      h('h2', { id: 'revoke-title' }, `Revoke “${t.name}”?`),
      h('p', { id: 'revoke-desc' }, `${warning} This cannot be undone.`),
      status,
      h('div', { class: 'actions' }, cancel, ok));
    cancel.addEventListener('click', () => dialog.close());
    dialog.addEventListener('close', () => dialog.remove());
    ok.addEventListener('click', () => runBusy(ok, status, async () => {
      await request(REVOKE_TOKEN, { id: t.id });
      dialog.close();
      if (t.current) {
        signOut().catch(() => {});
        navigate('/');
        return;
      }
      load(list);
    }));
    document.body.append(dialog);
    dialog.showModal();
    cleanups.push(() => dialog.isConnected && dialog.close());
  }

  /**
   * @param {HTMLElement} list
   * @param {HTMLElement} revealed
   */
  function createForm(list, revealed) {
    const name = h('input', { type: 'text', name: 'token-name', required: true, maxlength: '100', autocomplete: 'off', placeholder: 'laptop, ci, …' });
    const lifetime = h('select', { name: 'expires-in' }, LIFETIMES.map(([v, label]) => h('option', { value: v }, label)));
    const status = h('div', { class: 'form-status' });
    const form = h('form', {
      class: 'stack',
      'aria-labelledby': 'create-token-title',
      onsubmit: submitWith(status, async () => {
        /** @type {{ name: string, expiresIn?: string }} */
        const vars = { name: name.value.trim() };
        if (lifetime.value) vars.expiresIn = lifetime.value;
        const data = await request(CREATE_TOKEN, vars);
        replace(revealed, notice('info',
          h('p', {}, h('strong', {}, 'Copy it now: it is shown only once.')),
          codeLine('Token', data.createToken.secret, { testid: 'new-token', buttonLabel: 'Copy token' })));
        form.reset();
        /** @type {HTMLButtonElement} */ (form.querySelector('button[type=submit]')).disabled = false;
        load(list);
      }),
    },
    h('h2', { id: 'create-token-title' }, 'New token'),
    field('Name', name, 'Name it after the device or program that will use it.'),
    field('Expires', lifetime),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn btn-primary' }, 'Create token')),
    status);
    return form;
  }

  return {
    dispose() {
      disposed = true;
      off();
      if (team) team.dispose();
      if (usage) usage.dispose();
      for (const fn of cleanups) fn();
    },
  };
}
