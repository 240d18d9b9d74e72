// @ts-check
// The team part of the settings page: the account's members (owners
// invite by one-time link, change roles, remove), what changed and who
// did it (owners only), and, for an account without members, setting up
// password sign-in.
import { h, replace, field } from './dom.js';
import { request, describeError } from './graphql.js';
import { TEAM, ACTIVITY, CREATE_MEMBER_INVITE, REMOVE_MEMBER, CHANGE_MEMBER_ROLE, SET_UP_SIGN_IN, CHANGE_PASSWORD } from './api.js';
import { adoptSession } from './session.js';
import { notice, runBusy, submitWith, codeLine } from './ui.js';
import { formatFullTime } from './format.js';

/** @type {Record<GQL.MemberRole, string>} */
const ROLE_LABELS = { OWNER: 'Owner', MEMBER: 'Member' };

/**
 * teamSection renders the team card; returns {element, dispose}.
 * @returns {{ element: HTMLElement, dispose(): void }}
 */
export function teamSection() {
  let disposed = false;
  const section = h('section', { class: 'card', 'aria-labelledby': 'team-title', 'data-testid': 'team' },
    h('h2', { id: 'team-title' }, 'Team'), h('p', { class: 'muted' }, 'Loading members…'));
  load();

  async function load() {
    try {
      const data = await request(TEAM);
      if (disposed || !data.me) return;
      render(data.me);
    } catch (err) {
      if (!disposed) replace(section, h('h2', { id: 'team-title' }, 'Team'), notice('error', describeError(err)));
    }
  }

  /** @param {GQL.Account} me */
  function render(me) {
    // A token without a member acts as an owner (the account's credential from before members).
    const owner = !me.member || me.member.role === 'OWNER';
    if (!me.members.length) {
      replace(section, h('h2', { id: 'team-title' }, 'Set up sign-in'),
        h('p', {}, 'This account has no members yet: it is used with tokens only. Choose a login and a password to sign in ',
          'to the console with them and to invite others.'),
        setUpForm());
      return;
    }
    const invite = h('div', { 'data-testid': 'invite-result' });
    const activity = h('div', { 'data-testid': 'activity' });
    replace(section,
      h('h2', { id: 'team-title' }, 'Team'),
      h('p', { class: 'muted' }, 'Members share this account’s Endpoints and tokens. Owners also invite, remove and change members.'),
      membersTable(me.members, owner),
      owner ? inviteForm(invite) : null, invite,
      me.member ? passwordForm() : null,
      owner ? h('h3', {}, 'Activity') : null, owner ? activity : null);
    if (owner) loadActivity(activity);
  }

  /**
   * @param {GQL.Member[]} members
   * @param {boolean} owner
   */
  function membersTable(members, owner) {
    return h('div', { class: 'table-scroll' }, h('table', { class: 'table', 'data-testid': 'members' },
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col' }, 'Login'), h('th', { scope: 'col' }, 'Role'), h('th', { scope: 'col' }, 'Joined'),
        owner ? h('th', { scope: 'col' }, h('span', { class: 'sr-only' }, 'Actions')) : null)),
      h('tbody', {}, members.map((m) => h('tr', { 'data-member-id': m.id },
        h('td', {}, m.login, m.you ? [' ', h('span', { class: 'badge' }, 'you')] : null),
        h('td', { 'data-testid': 'member-role' }, ROLE_LABELS[m.role] || m.role),
        h('td', {}, h('time', { datetime: m.joinedAt }, formatFullTime(m.joinedAt))),
        owner ? h('td', {}, memberActions(m, members)) : null)))));
  }

  /**
   * @param {GQL.Member} m
   * @param {GQL.Member[]} members
   */
  function memberActions(m, members) {
    // The relay keeps one owner at least: say so instead of offering what it refuses.
    if (m.role === 'OWNER' && members.filter((x) => x.role === 'OWNER').length === 1) {
      return h('span', { class: 'muted small', 'data-testid': 'last-owner' }, 'The only owner: make another owner first to change or remove.');
    }
    const status = h('span', { class: 'form-status' });
    /** @type {GQL.MemberRole} */
    const other = m.role === 'OWNER' ? 'MEMBER' : 'OWNER';
    const role = h('button', { type: 'button', class: 'btn btn-small', 'aria-label': `Make ${m.login} ${ROLE_LABELS[other].toLowerCase()}` },
      `Make ${ROLE_LABELS[other].toLowerCase()}`);
    role.addEventListener('click', () => runBusy(role, status, async () => {
      await request(CHANGE_MEMBER_ROLE, { id: m.id, role: other });
      load();
    }));
    const remove = h('button', { type: 'button', class: 'btn btn-small btn-danger', 'aria-label': `Remove ${m.login}` }, 'Remove…');
    remove.addEventListener('click', () => confirmRemove(m));
    return h('span', { class: 'actions' }, role, remove, status);
  }

  /** @param {GQL.Member} m */
  function confirmRemove(m) {
    const status = h('div', { class: 'form-status' });
    const cancel = h('button', { type: 'button', class: 'btn', autofocus: true }, 'Cancel');
    const ok = h('button', { type: 'button', class: 'btn btn-danger' }, 'Remove');
    const dialog = h('dialog', { class: 'dialog', 'aria-labelledby': 'remove-title', 'aria-describedby': 'remove-desc' },
      h('h2', { id: 'remove-title' }, `Remove “${m.login}”?`),
      h('p', { id: 'remove-desc' }, 'Their sessions and tokens stop working at once, and their agents are disconnected.'),
      status, h('div', { class: 'actions' }, cancel, ok));
    cancel.addEventListener('click', () => dialog.close());
    dialog.addEventListener('close', () => dialog.remove());
    ok.addEventListener('click', () => runBusy(ok, status, async () => {
      await request(REMOVE_MEMBER, { id: m.id });
      dialog.close();
      load();
    }));
    document.body.append(dialog);
    dialog.showModal();
  }

  /** @param {HTMLElement} result */
  function inviteForm(result) {
    const role = h('select', { name: 'invite-role' }, h('option', { value: 'MEMBER' }, 'Member'), h('option', { value: 'OWNER' }, 'Owner'));
    const status = h('div', { class: 'form-status' });
    const form = h('form', {
      class: 'stack',
      'aria-labelledby': 'invite-title',
      onsubmit: submitWith(status, async () => {
        const data = await request(CREATE_MEMBER_INVITE, { role: role.value });
        const link = `${location.origin}${data.createMemberInvite.path}`;
        replace(result, notice('info',
          h('p', {}, h('strong', {}, 'Send this link to the person you invite. '), 'It works once, until ',
            formatFullTime(data.createMemberInvite.expiresAt), '.'),
          codeLine('Invite link', link, { testid: 'invite-link', buttonLabel: 'Copy link' })));
        /** @type {HTMLButtonElement} */ (form.querySelector('button[type=submit]')).disabled = false;
      }),
    },
    h('h3', { id: 'invite-title' }, 'Invite someone'),
    field('Role', role),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn btn-primary' }, 'Create invite link')),
    status);
    return form;
  }

  /** @param {HTMLElement} box */
  async function loadActivity(box) {
    try {
      const data = await request(ACTIVITY);
      if (disposed || !data.me) return;
      const list = data.me.activity;
      replace(box, list.length ? h('ul', { class: 'link-list' }, list.map((a) => h('li', {},
        // The relay puts the change in words (ActivityEntry.text); the
        // event's type name stays in the title, for whoever audits.
        h('time', { datetime: a.at }, formatFullTime(a.at)), ' · ',
        h('span', { 'data-testid': 'activity-text', title: a.type }, a.text)))) : h('p', { class: 'muted' }, 'Nothing yet.'));
    } catch (err) {
      if (!disposed) replace(box, notice('error', describeError(err)));
    }
  }

  // passwordForm changes the signed-in member's password; the relay ends
  // their other browser sessions.
  function passwordForm() {
    const current = h('input', { type: 'password', name: 'currentPassword', required: true, autocomplete: 'current-password', maxlength: '256' });
    const next = h('input', { type: 'password', name: 'newPassword', required: true, autocomplete: 'new-password', minlength: '10', maxlength: '256' });
    const status = h('div', { class: 'form-status' });
    const form = h('form', {
      class: 'stack',
      'aria-labelledby': 'password-title',
      'data-testid': 'change-password',
      onsubmit: submitWith(status, async () => {
        await request(CHANGE_PASSWORD, { current: current.value, next: next.value });
        current.value = '';
        next.value = '';
        replace(status, notice('success', 'Password changed. Your other browser sessions were signed out; API tokens keep working.'));
        /** @type {HTMLButtonElement} */ (form.querySelector('button[type=submit]')).disabled = false;
      }),
    },
    h('h3', { id: 'password-title' }, 'Your password'),
    h('div', { class: 'grid-fields' },
      field('Current password', current),
      field('New password', next, 'At least 10 characters.')),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn btn-primary' }, 'Change password')),
    status);
    return form;
  }

  function setUpForm() {
    const login = h('input', { type: 'text', name: 'login', required: true, autocomplete: 'username', maxlength: '100', spellcheck: 'false' });
    const password = h('input', { type: 'password', name: 'password', required: true, autocomplete: 'new-password', minlength: '10', maxlength: '256' });
    const status = h('div', { class: 'form-status' });
    return h('form', {
      class: 'stack',
      'aria-labelledby': 'setup-title',
      onsubmit: submitWith(status, async () => {
        const data = await request(SET_UP_SIGN_IN, { login: login.value.trim(), password: password.value });
        adoptSession(data.setUpSignIn);
      }),
    },
    h('h3', { id: 'setup-title' }, 'Your login'),
    field('Login', login, 'An email or a user name.'),
    field('Password', password, 'At least 10 characters.'),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn btn-primary' }, 'Set up sign-in')),
    status);
  }

  return {
    element: section,
    dispose() {
      disposed = true;
    },
  };
}
