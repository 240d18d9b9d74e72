// @ts-check
// The join page: whoever holds a member invite link (/join?code=…)
// chooses a login and a password and becomes a member of that account.
import { h, replace, field } from './dom.js';
import { request } from './graphql.js';
import { JOIN_ACCOUNT, MEMBER_INVITE } from './api.js';
import { adoptSession } from './session.js';
import { submitWith } from './ui.js';

/**
 * joinPage renders into root and returns {dispose}.
 * @param {HTMLElement} root
 * @param {{ navigate: Navigate }} options
 * @returns {Page}
 */
export function joinPage(root, { navigate }) {
  document.title = 'Join a team · Relay';
  const code = new URLSearchParams(location.search).get('code') || '';
  const login = h('input', { type: 'text', name: 'login', required: true, autocomplete: 'username', maxlength: '100', spellcheck: 'false' });
  const password = h('input', { type: 'password', name: 'password', required: true, autocomplete: 'new-password', minlength: '10', maxlength: '256' });
  const status = h('div', { class: 'form-status' });
  // Which account the link joins, named once the relay has looked it up:
  // nobody should choose a password for a team they cannot name.
  const invited = h('p', { 'data-testid': 'join-account' }, 'You were invited to an account on this relay.');
  let disposed = false;
  const form = h('form', {
    class: 'stack',
    'aria-labelledby': 'join-title',
    onsubmit: submitWith(status, async () => {
      const data = await request(JOIN_ACCOUNT, { code, login: login.value.trim(), password: password.value });
      adoptSession(data.joinAccount);
      navigate('/');
    }),
  },
  h('h1', { id: 'join-title' }, 'Join a team'),
  invited,
  field('Login', login, 'An email or a user name.'),
  field('Password', password, 'At least 10 characters.'),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn btn-primary' }, 'Join')),
  status);
  replace(root, h('div', { class: 'stack' }, h('section', { class: 'card' },
    code ? form : h('p', {}, 'This link has no invite code: ask for a new link.'))));
  if (code) {
    request(MEMBER_INVITE, { code }).then((data) => {
      if (disposed) return;
      const inv = data.memberInvite;
      replace(invited, 'You were invited to join ', h('strong', {}, inv.accountName), ` as ${inv.role.toLowerCase()}. `,
        'Choose how you will sign in: you will see and use its Endpoints with the others.');
    }, (err) => {
      if (disposed) return;
      replace(invited, h('span', { class: 'error' }, 'This invite link does not work: ', String(err.message || err),
        ' Ask for a new link.'));
    });
  }
  return { dispose() { disposed = true; } };
}
