// @ts-check
// The home page: new inspector, sign up / sign in, and the account's Endpoints.
import { h, replace, field, uid } from './dom.js';
import { request, describeError, token } from './graphql.js';
import { CREATE_INSPECTOR, SIGN_UP_PASSWORD, ENDPOINTS, CREATE_ENDPOINT } from './api.js';
import { currentAccount, onSessionChange, signIn, signInWithPassword, adoptSession, sessionChecked, sessionEnded } from './session.js';
import { copyButton, notice, runBusy, submitWith } from './ui.js';
import { sparklines } from './charts.js';

const RECENT_KEY = 'relay.recentInspectors';

/** The first each page of the Endpoints list asks for (the relay holds a larger one to its own bound). */
const ENDPOINTS_PAGE = 1000;
/** The most pages one listing reads: 100 000 Endpoints at ENDPOINTS_PAGE a page. */
const ENDPOINTS_MAX_PAGES = 100;

/**
 * listEndpoints reads all of the account's Endpoints, page by page with
 * first and after: the relay refuses a list without first to an account
 * holding more than it prices a list at. It reads until a page comes back
 * empty, since the relay may answer fewer than first with more to come;
 * after a short page it asks for as many as that page held. It stops with
 * an error after ENDPOINTS_MAX_PAGES pages.
 * @returns {Promise<GQL.Endpoint[]>}
 */
async function listEndpoints() {
  /** @type {GQL.Endpoint[]} */
  const all = [];
  /** @type {{ first: number, after?: string }} */
  let vars = { first: ENDPOINTS_PAGE };
  for (let i = 0; i < ENDPOINTS_MAX_PAGES; i++) {
    const page = (await request(ENDPOINTS, vars)).endpoints;
    if (!page.length) return all;
    all.push(...page);
    vars = { first: page.length, after: page[page.length - 1].id };
  }
  throw new Error(`This account holds more Endpoints than ${ENDPOINTS_MAX_PAGES} pages list (${all.length} read): stopped.`);
}

/**
 * MODE_LABELS are the names people see for EndpointMode values.
 * @type {Record<GQL.EndpointMode, string>}
 */
export const MODE_LABELS = { LOG: 'Log', PROXY: 'Log and Proxy', QUEUE: 'Queue' };

/**
 * rememberInspector keeps the last few inspectors this browser opened.
 * @param {string} id
 */
export function rememberInspector(id) {
  const list = recentInspectors().filter((x) => x !== id);
  list.unshift(id);
  try {
    localStorage.setItem(RECENT_KEY, JSON.stringify(list.slice(0, 5)));
  } catch {
    // Storage full or disabled: the list is a convenience only.
  }
}

/** @returns {string[]} */
function recentInspectors() {
  try {
    const v = JSON.parse(localStorage.getItem(RECENT_KEY) || '[]');
    return Array.isArray(v) ? v.filter((x) => typeof x === 'string') : [];
  } catch {
    return [];
  }
}

/**
 * homePage renders into root and returns {dispose}.
 * @param {HTMLElement} root
 * @param {{ navigate: Navigate }} options
 * @returns {Page}
 */
export function homePage(root, { navigate }) {
  let disposed = false;
  /** The sparklines of the Endpoints list shown, which read their stats as they come on screen. */
  let charts = sparklines([]);
  const inspectorSection = renderInspectorCard();
  const accountSection = h('section', { class: 'card', 'aria-labelledby': 'account-title' });
  replace(root, h('div', { class: 'home' }, inspectorSection, accountSection));
  renderAccountSection();
  const off = onSessionChange(() => {
    if (!disposed) renderAccountSection();
  });

  function renderInspectorCard() {
    const status = h('div', { class: 'form-status' });
    // smee.io-compatible: smee's clients (Probot, smee-client, gosmee) can
    // read the address's deliveries as a stream (docs/smee.md).
    const smee = h('input', { type: 'checkbox', id: uid('smee'), 'data-testid': 'new-inspector-smee' });
    const smeeField = h('div', { class: 'field field-check' }, smee,
      h('label', { for: smee.id }, 'smee.io-compatible (Probot, smee-client, gosmee)'));
    const button = h('button', {
      type: 'button',
      class: 'btn btn-primary btn-large',
      'data-testid': 'new-inspector',
      onclick: () => runBusy(button, status, async () => {
        const data = await request(CREATE_INSPECTOR, { smee: smee.checked });
        rememberInspector(data.createInspector.id);
        navigate(`/i/${encodeURIComponent(data.createInspector.id)}`);
      }),
    }, 'New inspector');
    const recent = recentInspectors();
    return h('section', { class: 'card hero', 'aria-labelledby': 'hero-title' },
      h('h1', { id: 'hero-title' }, 'Catch and inspect webhooks'),
      h('p', { class: 'lead' },
        'A guest inspector gives you a public address that records every request and answers ',
        h('code', {}, '204 No Content'), '. No account needed; it expires once idle (a day by default).'),
      h('div', { class: 'actions' }, button, smeeField),
      status,
      recent.length ? h('nav', { class: 'recent', 'aria-label': 'Recent inspectors' },
        h('h2', { class: 'small-title' }, 'Recent inspectors'),
        h('ul', { class: 'link-list' }, recent.map((id) =>
          h('li', {}, h('a', { href: `/i/${encodeURIComponent(id)}` }, h('code', {}, id)))))) : null);
  }

  function renderAccountSection() {
    const account = currentAccount();
    if (account) {
      replace(accountSection, ...endpointsArea(account));
    } else if (token() || !sessionChecked()) {
      replace(accountSection, h('h2', { id: 'account-title' }, 'Endpoints'), h('p', { class: 'muted' }, 'Checking your session…'));
    } else {
      replace(accountSection, ...signInArea());
    }
  }

  function signInArea() {
    const nameInput = h('input', { type: 'text', name: 'name', required: true, autocomplete: 'organization', maxlength: '100' });
    const loginInput = h('input', { type: 'text', name: 'login', required: true, autocomplete: 'username', maxlength: '100', spellcheck: 'false' });
    const passwordInput = h('input', { type: 'password', name: 'password', required: true, autocomplete: 'new-password', minlength: '10', maxlength: '256' });
    const upStatus = h('div', { class: 'form-status' });
    const upForm = h('form', {
      class: 'stack',
      'aria-labelledby': 'signup-title',
      onsubmit: submitWith(upStatus, async () => {
        // An invite link (relay accounts invite) carries its code: ?invite=…
        const invite = new URLSearchParams(location.search).get('invite');
        /** @type {{ name: string, login: string, password: string, invite?: string }} */
        const vars = { name: nameInput.value.trim(), login: loginInput.value.trim(), password: passwordInput.value };
        if (invite) vars.invite = invite;
        const data = await request(SIGN_UP_PASSWORD, vars);
        adoptSession(data.signUpWithPassword);
      }),
    },
    h('h3', { id: 'signup-title' }, 'Sign up'),
    field('Account name', nameInput, 'Your team or organization; you can invite others to it.'),
    field('Login', loginInput, 'An email or a user name: what you sign in with.'),
    field('Password', passwordInput, 'At least 10 characters.'),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn btn-primary' }, 'Sign up')),
    upStatus);

    return [
      h('h2', { id: 'account-title' }, 'Endpoints'),
      sessionEnded() ? notice('info', 'Your session ended: it was signed out elsewhere, expired or revoked, or your access was removed. Sign in again.') : null,
      h('p', { class: 'muted' },
        'Endpoints are permanent addresses owned by an account. They log requests, or log and proxy them ',
        'through ', h('code', {}, 'relay listen'), ' to a process on your machine.'),
      h('div', { class: 'split' }, upForm, h('div', { class: 'stack' }, passwordSignInForm(), signInForm())),
    ];
  }

  /** @param {SignedIn} account */
  function endpointsArea(account) {
    const listBox = h('div', { class: 'endpoint-list', 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Loading Endpoints…'));
    loadEndpoints(listBox);
    return [
      h('h2', { id: 'account-title' }, 'Endpoints'),
      h('p', { class: 'muted' }, 'Owned by ', h('strong', {}, account.name), '.'),
      listBox,
      createEndpointForm(),
    ];
  }

  /** @param {HTMLElement} box */
  async function loadEndpoints(box) {
    try {
      const list = await listEndpoints();
      if (disposed) return;
      if (!list.length) {
        replace(box, h('p', { class: 'empty' }, 'No Endpoints yet. Create one below.'));
        return;
      }
      charts.dispose();
      charts = sparklines(list);
      replace(box, h('div', { class: 'table-scroll' }, h('table', { class: 'table' },
        h('caption', { class: 'sr-only' }, 'Your Endpoints'),
        h('thead', {}, h('tr', {},
          ['Name', 'Last hour', 'Mode', 'Target', 'Agent', 'Public URL'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, list.map((e, i) => h('tr', {},
          h('th', { scope: 'row' }, h('a', { href: `/e/${encodeURIComponent(e.id)}` }, e.name)),
          h('td', {}, charts.box(i)),
          h('td', {}, h('span', { class: `badge mode-${e.mode.toLowerCase()}` }, MODE_LABELS[e.mode] || e.mode)),
          h('td', {}, e.target ? h('code', {}, e.target) : h('span', { class: 'muted' }, '—')),
          h('td', {}, agentBadge(e.agentConnected, e.agentCount)),
          h('td', { class: 'url-cell' }, h('code', {}, e.url), ' ', copyButton(e.url, 'Copy', { 'aria-label': `Copy URL of ${e.name}` }))))))));
      charts.start();
    } catch (err) {
      if (!disposed) replace(box, notice('error', describeError(err)));
    }
  }

  function createEndpointForm() {
    const fields = endpointFields({ name: '', mode: 'PROXY', target: '127.0.0.1:3000', responseCapture: true });
    const status = h('div', { class: 'form-status' });
    const form = h('form', {
      class: 'stack create-endpoint',
      'aria-labelledby': 'create-endpoint-title',
      onsubmit: submitWith(status, async () => {
        const data = await request(CREATE_ENDPOINT, { input: fields.value() });
        navigate(`/e/${encodeURIComponent(data.createEndpoint.id)}`);
      }),
    },
    h('h3', { id: 'create-endpoint-title' }, 'Create an Endpoint'),
    fields.element,
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn btn-primary' }, 'Create Endpoint')),
    status);
    return form;
  }

  return {
    dispose() {
      disposed = true;
      charts.dispose();
      off();
    },
  };
}

/**
 * passwordSignInForm signs a member in with login and password; onDone
 * runs once the relay accepted them.
 * @param {() => void} [onDone]
 */
export function passwordSignInForm(onDone) {
  const login = h('input', { type: 'text', name: 'login', required: true, autocomplete: 'username', maxlength: '100', spellcheck: 'false' });
  const password = h('input', { type: 'password', name: 'password', required: true, autocomplete: 'current-password', maxlength: '256' });
  const status = h('div', { class: 'form-status' });
  return h('form', {
    class: 'stack',
    'aria-labelledby': 'password-signin-title',
    'data-testid': 'password-sign-in',
    onsubmit: submitWith(status, async () => {
      await signInWithPassword(login.value.trim(), password.value);
      if (onDone) onDone();
    }),
  },
  h('h3', { id: 'password-signin-title' }, 'Sign in'),
  field('Login', login),
  field('Password', password),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn btn-primary' }, 'Sign in')),
  status);
}

/**
 * signInForm asks for an account token; onDone runs once the relay accepted
 * it. Users of the command line get a link that signs the console in with
 * `relay open`, so the form says so.
 * @param {() => void} [onDone]
 */
export function signInForm(onDone) {
  const tokenInput = h('input', { type: 'password', name: 'token', required: true, autocomplete: 'current-password', spellcheck: 'false' });
  const inStatus = h('div', { class: 'form-status' });
  return h('form', {
    class: 'stack',
    'aria-labelledby': 'signin-title',
    'data-testid': 'sign-in',
    onsubmit: submitWith(inStatus, async () => {
      await signIn(tokenInput.value.trim());
      if (onDone) onDone();
    }),
  },
  h('h3', { id: 'signin-title' }, 'Sign in with a token'),
  field('API token', tokenInput, 'Paste the token you got when you signed up — or run relay open in a terminal where relay login was done: it prints a link that signs this console in.'),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn' }, 'Sign in')),
  inStatus);
}

/**
 * agentBadge shows whether an agent is connected, and how many when more
 * than one share the Endpoint's deliveries.
 * @param {boolean} connected
 * @param {number} [count]
 */
export function agentBadge(connected, count = connected ? 1 : 0) {
  let text = 'No agent';
  if (connected) text = count > 1 ? `${count} agents connected (one answers, the others get copies)` : 'Agent connected';
  return h('span', { class: `agent-badge ${connected ? 'on' : 'off'}`, 'data-connected': String(connected), 'data-count': String(count) },
    h('span', { class: 'dot', 'aria-hidden': 'true' }), text);
}

/**
 * endpointFields builds the shared Endpoint settings inputs (used by the
 * create form and the settings form) and reads them back as an input object.
 * @param {Pick<GQL.Endpoint, 'name' | 'mode' | 'target' | 'responseCapture'> & { retention?: GQL.Retention }} initial
 */
export function endpointFields(initial) {
  const name = h('input', { type: 'text', name: 'name', required: true, maxlength: '100', value: initial.name });
  const mode = h('select', { name: 'mode' },
    Object.entries(MODE_LABELS).map(([value, label]) => h('option', { value, selected: value === initial.mode }, label)));
  const target = h('input', {
    type: 'text', name: 'target', inputmode: 'url', spellcheck: 'false', placeholder: '127.0.0.1:3000', value: initial.target || '',
  });
  const capture = h('input', { type: 'checkbox', name: 'responseCapture', id: uid('capture'), checked: !!initial.responseCapture });
  const captureField = h('div', { class: 'field field-check' }, capture, h('label', { for: capture.id }, 'Capture responses'));
  // Empty: the relay's default window.
  const own = initial.retention && !initial.retention.isDefault ? initial.retention.window : '';
  const retention = h('input', {
    type: 'text', name: 'retention', spellcheck: 'false', placeholder: 'default', value: own, 'data-testid': 'retention-input',
  });
  const max = initial.retention ? ` (at most ${initial.retention.max})` : '';
  const element = h('div', { class: 'grid-fields' },
    field('Name', name),
    field('Mode', mode, 'Log answers 204; Log and Proxy forwards through your agent; Queue answers 202 at once and delivers through your agent later, with retries.'),
    field('Local target', target, 'Where the agent forwards: 127.0.0.1:<port>.'),
    field('Keep deliveries', retention, `How long deliveries are kept, such as 7d or 12h${max}; empty: the relay's default. Older ones are deleted.`),
    captureField);
  return {
    element,
    /** @returns {GQL.CreateEndpointInput & GQL.UpdateEndpointInput} */
    value() {
      const t = target.value.trim();
      return {
        name: name.value.trim(), mode: /** @type {GQL.EndpointMode} */ (mode.value), target: t || null, responseCapture: capture.checked,
        retention: retention.value.trim() || 'default',
      };
    },
  };
}
