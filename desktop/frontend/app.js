// @ts-check
// The desktop agent's window. It talks only to the Go side (Wails
// bindings window.go.desktop.UI and the "conn" and "row" events); the Go
// side holds the token and talks to the relay. The detail pane, badges and
// copy buttons are the console's own modules.
import { h, replace, field } from './console/dom.js';
import { formatTime } from './console/format.js';
import { renderDetail, statusBadge } from './console/detail.js';
import { codeLine, notice, submitWith } from './console/ui.js';

const ui = () => window.go.desktop.UI;
// index.html has all three.
const main = /** @type {HTMLElement} */ (document.getElementById('main'));
const connEl = /** @type {HTMLElement} */ (document.getElementById('conn'));
const accountEl = /** @type {HTMLElement} */ (document.getElementById('account'));

const state = {
  // Set by boot before anything reads it.
  status: /** @type {Desktop.Status} */ (/** @type {unknown} */ (null)),
  /** @type {Desktop.ConnState} */
  conn: { state: 'off', since: '' },
  /** @type {Desktop.Endpoint[]} */
  endpoints: [],
  endpointError: '',
  /** @type {Desktop.Row[]} */
  rows: [],
  /** @type {Record<string, boolean>} */
  roles: {}, // Endpoint id → this app is its primary listener
  /** @type {string | null} */
  selected: null, // delivery id in the detail pane
  /** @type {GQL.Delivery | null} */
  detail: null,
  /** @type {HTMLElement | null} */
  detailMessage: null,
  newAttemptId: '',
  retrying: false,
  /** @type {Record<string, GQL.Stats>} */
  stats: {}, // Endpoint id → its last hour (Endpoint.stats), for the card's chart
};

// Errors from Go arrive as strings.
/**
 * @param {any} err
 * @returns {string}
 */
const describe = (err) => (err && err.message) || String(err);

async function boot() {
  state.status = await ui().Status();
  state.conn = state.status.conn;
  state.rows = state.status.rows || [];
  state.roles = state.status.roles || {};
  window.runtime.EventsOn('conn', (c) => {
    state.conn = c;
    renderConn();
    refreshEndpoints();
    // The relay's view of the agent follows its connection a moment later.
    for (const ms of [400, 1200, 3000]) setTimeout(refreshEndpoints, ms);
  });
  // Whether this app answers an Endpoint's senders or receives copies.
  window.runtime.EventsOn('role', (r) => {
    state.roles[r.endpointId] = r.primary;
    renderEndpoints();
  });
  window.runtime.EventsOn('row', (r) => {
    state.rows.push(r);
    renderRows();
    if (r.deliveryId === state.selected) loadDetail(r.deliveryId, r.attemptId);
  });
  document.addEventListener('visibilitychange', () => ui().SetVisible(!document.hidden));
  setInterval(renderConn, 1000); // the countdown to the next try
  setInterval(() => { if (!document.hidden) refreshEndpoints(); }, 5000);
  render();
}

function render() {
  renderConn();
  renderAccount();
  if (!state.status.signedIn) {
    renderSignIn();
    return;
  }
  replace(main,
    state.status.error ? h('div', { id: 'sign-error' }, notice('warn', state.status.error)) : null,
    h('div', { class: 'desk' },
      h('section', { class: 'card endpoints', 'aria-labelledby': 'ep-title' },
        h('div', { class: 'list-head' }, h('h2', { id: 'ep-title' }, 'Endpoints')),
        createForm(),
        h('div', { id: 'endpoint-list', 'data-testid': 'endpoints' })),
      h('div', { class: 'right' },
        h('section', { class: 'card deliveries', 'aria-labelledby': 'dl-title' },
          h('div', { class: 'list-head' }, h('h2', { id: 'dl-title' }, 'Deliveries'),
            h('span', { class: 'muted small' }, 'forwarded by this agent, newest first')),
          h('div', { id: 'rows', class: 'rows-scroll' })),
        h('aside', { id: 'detail', class: 'detail', 'aria-label': 'Delivery detail' }))));
  renderEndpoints();
  renderRows();
  renderDetailPane();
  refreshEndpoints();
}

function renderAccount() {
  const s = state.status;
  if (!s.signedIn) {
    replace(accountEl, h('button', { type: 'button', class: 'btn btn-small btn-ghost', onclick: () => ui().Quit() }, 'Quit'));
    return;
  }
  replace(accountEl,
    h('span', { class: 'muted small', title: `token kept in ${s.stored === 'keyring' ? 'the OS keyring' : s.storePath}` },
      `${s.account.name || 'signed in'} · ${s.server}`),
    h('button', { type: 'button', class: 'btn btn-small btn-ghost', 'data-testid': 'sign-out', onclick: signOut }, 'Sign out'),
    h('button', { type: 'button', class: 'btn btn-small btn-ghost', onclick: () => ui().Hide(), title: 'Keep forwarding with the window hidden; start Relay again to show it' }, 'Hide'),
    h('button', { type: 'button', class: 'btn btn-small', 'data-testid': 'quit', onclick: () => ui().Quit() }, 'Quit'));
}

async function signOut() {
  state.status = await ui().SignOut();
  state.endpoints = [];
  render();
}

function renderConn() {
  const c = state.conn || { state: 'off' };
  /** @type {Record<string, string>} */
  const labels = {
    off: 'Not forwarding',
    connecting: 'Connecting…',
    connected: 'Connected',
    reconnecting: 'Reconnecting',
    refused: 'Refused',
  };
  connEl.dataset.state = c.state;
  replace(connEl,
    h('span', { class: 'dot', 'aria-hidden': 'true' }),
    h('strong', { 'data-testid': 'conn-state' }, labels[c.state] || c.state));
  // Why the agent is not connected, and when it tries again, in full.
  const banner = /** @type {HTMLElement} */ (document.getElementById('conn-banner'));
  if (c.state === 'reconnecting') {
    const secs = c.nextTry ? Math.max(0, Math.ceil((new Date(c.nextTry).getTime() - Date.now()) / 1000)) : 0;
    replace(banner, notice('warn',
      h('strong', {}, 'Reconnecting: '),
      h('span', { 'data-testid': 'conn-reason' }, `${c.reason || 'connection lost'} — next try in ${secs} s`)));
  } else if (c.state === 'refused') {
    replace(banner, notice('error',
      h('strong', {}, 'The relay refused the agent: '),
      h('span', { 'data-testid': 'conn-reason' }, c.reason || ''),
      ' Check the token (sign out and in again) or switch off the Endpoint it names.'));
  } else {
    replace(banner);
  }
}

function renderSignIn() {
  const s = state.status;
  const server = h('input', { type: 'text', name: 'server', required: true, value: s.server || 'http://localhost:8080', autocomplete: 'url' });
  const token = h('input', { type: 'password', name: 'token', required: true, autocomplete: 'off' });
  const status = h('div', { class: 'form-status' });
  replace(main, h('section', { class: 'card signin', 'aria-labelledby': 'signin-title' },
    h('h1', { id: 'signin-title' }, 'Sign in to a relay'),
    h('p', { class: 'muted' }, 'The token is kept in the OS keyring when there is one, else in the file ',
      h('code', {}, 'relay login'), ' uses; a ', h('code', {}, 'relay login'), ' signs this window in too.'),
    s.error ? notice('warn', s.error) : null,
    h('form', {
      'data-testid': 'signin',
      onsubmit: submitWith(status, async () => {
        state.status = await ui().SignIn(server.value, token.value);
        render();
      }),
    },
    field('Relay URL', server),
    field('Token', token, 'An API token of your account (relay login, or the console).'),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn btn-primary' }, 'Sign in')),
    status)));
}

function createForm() {
  const name = h('input', { type: 'text', name: 'name', required: true, maxlength: '100', placeholder: 'payments' });
  const target = h('input', { type: 'text', name: 'target', placeholder: '127.0.0.1:3000' });
  const status = h('div', { class: 'form-status' });
  const button = h('button', { type: 'submit', class: 'btn btn-primary' }, 'Create');
  return h('form', {
    class: 'create',
    'data-testid': 'create-endpoint',
    onsubmit: submitWith(status, async () => {
      await ui().CreateEndpoint(name.value, target.value.trim());
      name.value = '';
      button.disabled = false; // the form stays for the next one
      await refreshEndpoints();
    }),
  },
  field('New Endpoint', name),
  field('Local target', target),
  button,
  h('div', { class: 'create-status' }, status));
}

async function refreshEndpoints() {
  if (!state.status || !state.status.signedIn) return;
  try {
    state.endpoints = await ui().Endpoints();
    state.endpointError = '';
    state.status.error = '';
    document.getElementById('sign-error')?.remove();
  } catch (err) {
    state.endpointError = describe(err);
  }
  renderEndpoints();
  loadStats(true);
}

// onScreen holds the ids of the Endpoint cards in the window's view, as
// cardObserver sees them: only their stats are read. A card scrolled into
// view without stats is read then; the rows never shown are never read.
/** @type {Set<string>} */
const onScreen = new Set();
const cardObserver = new IntersectionObserver((entries) => {
  for (const entry of entries) {
    const id = /** @type {HTMLElement} */ (entry.target).dataset.endpointId || '';
    if (entry.isIntersecting) onScreen.add(id);
    else onScreen.delete(id);
  }
  loadStats(false);
});

// statsQueue holds the stats reads, one at a time.
let statsQueue = Promise.resolve();

// loadStats reads the last hour of the cards on screen: all of them on a
// refresh, else those not read yet (cards scrolled into view). The Go side
// reads them nine Endpoints a request, one request at a time (the relay
// prices a stats read: one request each, or the stats of every listed
// Endpoint, would spend the account's API budget).
/** @param {boolean} refresh */
function loadStats(refresh) {
  statsQueue = statsQueue.then(() => readStats(refresh)).catch((err) => console.error('stats:', err));
}

/** @param {boolean} refresh */
async function readStats(refresh) {
  const due = state.endpoints.filter((e) => onScreen.has(e.id) && (refresh || !state.stats[e.id]));
  if (!due.length) return;
  const got = await ui().Stats(due.map((e) => e.id)).catch(() => null);
  if (!got) return;
  let changed = false;
  for (const e of due) {
    if (!got[e.id]) continue;
    if (JSON.stringify(state.stats[e.id]) !== JSON.stringify(got[e.id])) changed = true;
    state.stats[e.id] = got[e.id];
  }
  if (changed) renderEndpoints();
}

// statsChart is an Endpoint's last hour on its card: deliveries per minute
// with failures (4xx, 5xx) in red, drawn with the console's vendored uPlot,
// and the figures as a line of text and a visually hidden table.
/** @param {Desktop.Endpoint} e */
function statsChart(e) {
  const st = state.stats[e.id];
  // A card keeps the chart's room until its stats are read, so reading
  // them moves no other card in or out of view.
  if (!st) {
    return h('figure', { class: 'card-stats', 'data-testid': 'card-stats-unread' },
      h('div', { class: 'card-chart', 'aria-hidden': 'true' }),
      h('figcaption', { class: 'muted small' }, 'Last hour: …'));
  }
  const t = st.totals;
  const failed = t.status4xx + t.status5xx;
  const latency = t.p50Ms == null ? '' : `, p50 ≤ ${t.p50Ms} ms, p95 ≤ ${t.p95Ms} ms`;
  const box = h('div', { class: 'card-chart', 'aria-hidden': 'true' });
  const figure = h('figure', { class: 'card-stats', 'data-testid': 'card-stats' },
    box,
    h('figcaption', { class: 'muted small' }, `Last hour: ${t.deliveries} deliveries, ${failed} failed${latency}`),
    h('table', { class: 'sr-only', 'data-testid': 'card-stats-table' },
      h('caption', {}, `${e.name}, last hour`),
      h('tbody', {},
        h('tr', {}, h('th', { scope: 'row' }, 'Deliveries'), h('td', {}, String(t.deliveries))),
        h('tr', {}, h('th', { scope: 'row' }, '2xx'), h('td', {}, String(t.status2xx))),
        h('tr', {}, h('th', { scope: 'row' }, 'Failed (4xx, 5xx)'), h('td', {}, String(failed))),
        h('tr', {}, h('th', { scope: 'row' }, 'No answer yet'), h('td', {}, String(t.pending))))));
  const U = window.uPlot;
  if (U) {
    const bars = U.paths.bars({ size: [0.9, 8] });
    cardCharts.push(new U({
      width: 260, height: 40, legend: { show: false }, cursor: { show: false },
      scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
      axes: [{ show: false }, { show: false }],
      series: [{},
        { fill: '#2f9e5b', stroke: '#2f9e5b', width: 0, paths: bars, points: { show: false } },
        { fill: '#d64545', stroke: '#d64545', width: 0, paths: bars, points: { show: false } }],
    }, [st.buckets.map((b) => Date.parse(b.start) / 1000), st.buckets.map((b) => b.deliveries),
      st.buckets.map((b) => b.status4xx + b.status5xx)], box));
  }
  return figure;
}

// cardCharts are the uPlot charts on the cards shown, destroyed when the
// cards are drawn again (each holds window listeners until then).
/** @type {UPlot[]} */
let cardCharts = [];

function renderEndpoints() {
  const list = document.getElementById('endpoint-list');
  if (!list) return;
  // A target being typed is not overwritten by a refresh.
  const active = /** @type {HTMLElement | null} */ (document.activeElement);
  const typing = active && active.dataset.targetFor;
  if (typing) return;
  for (const c of cardCharts) c.destroy();
  cardCharts = [];
  cardObserver.disconnect();
  replace(list,
    state.endpointError ? notice('error', state.endpointError) : null,
    state.endpoints.length === 0 && !state.endpointError ? h('p', { class: 'muted' }, 'No Endpoint yet: create one above.') : null,
    state.endpoints.map(endpointCard));
  for (const card of list.querySelectorAll('.endpoint-card')) cardObserver.observe(card);
}

/** @param {Desktop.Endpoint} e */
function endpointCard(e) {
  const target = h('input', { type: 'text', value: e.localTarget || '', placeholder: '127.0.0.1:3000', 'aria-label': `Local target of ${e.name}`, 'data-target-for': e.id });
  const sw = h('input', { type: 'checkbox', role: 'switch', checked: e.serving, 'data-testid': 'switch' });
  const status = h('div', { class: 'form-status' });
  sw.addEventListener('change', async () => {
    replace(status);
    try {
      if (sw.checked) await ui().Connect(e.id, target.value);
      else await ui().Disconnect(e.id);
      e.serving = sw.checked;
      e.localTarget = target.value;
    } catch (err) {
      sw.checked = !sw.checked;
      replace(status, notice('error', describe(err)));
    }
  });
  // While the relay cannot be asked, its last answer would be a guess.
  const stale = !!state.endpointError;
  let agents = e.agentConnected ? 'Agent connected' : 'No agent';
  if (e.agentCount > 1) agents = `${e.agentCount} agents connected (one answers, the others get copies)`;
  if (stale) agents = 'Agent state unknown';
  return h('article', { class: 'endpoint-card', 'data-endpoint-id': e.id, 'data-serving': String(e.serving) },
    h('h3', {}, e.name,
      h('span', { class: `badge mode-${e.mode.toLowerCase()}` }, e.mode),
      h('span', { class: `agent-badge ${e.agentConnected && !stale ? 'on' : 'off'}`, 'data-testid': 'agent-state', 'data-count': String(e.agentCount) },
        h('span', { class: 'dot', 'aria-hidden': 'true' }), agents)),
    codeLine('Public URL', e.url, { testid: 'public-url' }),
    routingLines(e),
    statsChart(e),
    h('div', { class: 'route' }, target, h('label', { class: 'switch' }, sw, 'Forward')),
    roleLine(e),
    status);
}

// routingLines say what the relay does with a delivery before this app
// sees it: its own answer in LOG mode, the handshakes it answers, and the
// filters that decide what is forwarded.
/** @param {Desktop.Endpoint} e */
function routingLines(e) {
  const status = (e.answer && e.answer.status) || 204;
  const shakes = (e.handshakes && e.handshakes.enabled) || [];
  const filters = (e.filters || []).map((f) => f.text);
  return [
    e.mode === 'LOG' ? h('p', { class: 'muted small', 'data-testid': 'log-answer' }, `LOG mode: the relay records and answers ${status} itself; nothing is forwarded.`) : null,
    e.mode === 'QUEUE' && e.queue ? h('p', { class: 'muted small', 'data-testid': 'queue-depth', 'data-queued': String(e.queue.queued), 'data-dead': String(e.queue.dead) },
      `QUEUE mode: the relay answers senders at once and sends them here, oldest first. ${e.queue.queued} queued, ${e.queue.inFlight} in flight, ${e.queue.dead} dead`
      + (e.queue.dead ? ` (relay retry --all --dead ${e.name})` : '') + '.') : null,
    shakes.length ? h('p', { class: 'muted small', 'data-testid': 'handshakes' }, `Handshakes the relay answers: ${shakes.map((s) => s.toLowerCase()).join(', ')}.`) : null,
    filters.length ? h('p', { class: 'muted small', 'data-testid': 'filters' },
      'Forwards only deliveries matching ', h('code', {}, filters.join(' ')), `; others are recorded and answered ${status}.`) : null,
  ];
}

// roleLine says whether this app answers the senders of a served Endpoint
// (primary) or receives copies while another listener answers.
/** @param {Desktop.Endpoint} e */
function roleLine(e) {
  const primary = state.roles[e.id];
  if (!e.serving || primary === undefined) return null;
  return h('p', { class: 'muted small', 'data-testid': 'role', 'data-primary': String(primary) },
    primary ? 'Primary: this app\'s answers go to the senders.'
      : 'Receives copies: another listener answers the senders; this app\'s answers are recorded only.');
}

function renderRows() {
  const box = document.getElementById('rows');
  if (!box) return;
  if (state.rows.length === 0) {
    replace(box, h('p', { class: 'muted empty', 'data-testid': 'no-rows' }, 'Nothing forwarded yet. Switch an Endpoint on and send a request to its public URL.'));
    return;
  }
  const names = new Map(state.endpoints.map((e) => [e.id, e.name]));
  const rows = state.rows.slice().reverse();
  replace(box, h('table', { class: 'table rows', 'data-testid': 'rows' },
    h('caption', { class: 'sr-only' }, 'Forwarded deliveries, newest first'),
    h('thead', {}, h('tr', {},
      h('th', { scope: 'col', class: 'col-time' }, 'Time'),
      h('th', { scope: 'col', class: 'col-ep' }, 'Endpoint'),
      h('th', { scope: 'col', class: 'col-method' }, 'Method'),
      h('th', { scope: 'col' }, 'Path'),
      h('th', { scope: 'col', class: 'col-status' }, 'Status'),
      h('th', { scope: 'col', class: 'col-dur' }, 'Duration'))),
    h('tbody', {}, rows.map((r) => h('tr', {
      class: `row${r.deliveryId === state.selected ? ' is-selected' : ''}`,
      tabindex: '0',
      'data-delivery-id': r.deliveryId,
      'data-attempt-id': r.attemptId,
      title: r.error || null,
      onclick: () => select(r.deliveryId),
      onkeydown: (/** @type {KeyboardEvent} */ ev) => { if (ev.key === 'Enter') select(r.deliveryId); },
    },
    h('td', {}, h('time', { datetime: r.time }, formatTime(r.time))),
    h('td', { class: 'ep' }, names.get(r.endpointId) || r.endpointId),
    h('td', {}, h('span', { class: `method method-${r.method.toLowerCase()}` }, r.method)),
    h('td', {}, h('span', { class: 'path-wrap' }, h('code', {}, r.path))),
    h('td', { 'data-testid': 'row-status' }, statusBadge(r.status || null)),
    h('td', { class: 'dur' }, `${r.durationMs} ms`))))));
}

/** @param {string} id */
async function select(id) {
  state.selected = id;
  state.detail = null;
  state.detailMessage = null;
  state.newAttemptId = '';
  renderRows();
  await loadDetail(id);
}

/**
 * @param {string} id
 * @param {string} [newAttemptId]
 */
async function loadDetail(id, newAttemptId) {
  try {
    const d = await ui().Delivery(id);
    if (state.selected !== id) return;
    state.detail = d;
    if (newAttemptId) state.newAttemptId = newAttemptId;
  } catch (err) {
    state.detailMessage = notice('error', describe(err));
  }
  renderDetailPane();
}

function renderDetailPane() {
  const pane = document.getElementById('detail');
  if (!pane) return;
  if (!state.selected) {
    pane.classList.remove('is-open');
    replace(pane, h('div', { class: 'detail-empty' }, h('h2', {}, 'No delivery selected'),
      h('p', { class: 'muted' }, 'Pick a row to see its headers, body, the local answer, and to retry it.')));
    return;
  }
  pane.classList.add('is-open');
  if (!state.detail) {
    replace(pane, state.detailMessage || h('p', { class: 'muted' }, 'Loading…'));
    return;
  }
  const ep = state.endpoints.find((e) => e.id === state.detail?.address);
  replace(pane, renderDetail(state.detail, {
    baseURL: ep ? ep.url : '',
    retryReason: '',
    retrying: state.retrying,
    message: state.detailMessage,
    newAttemptId: state.newAttemptId,
    onRetry: retry,
    // The relay's comparison, asked through the Go side (it holds the token).
    compare: (id, a, b) => ui().Compare(id, a, b),
    onClose: () => { state.selected = null; renderRows(); renderDetailPane(); },
  }));
}

// retry sends the delivery again; edit (the pane's Edit and retry) is what
// changed, null to send it as recorded.
/** @param {GQL.RequestEditInput | null} edit */
async function retry(edit) {
  const id = /** @type {string} */ (state.selected); // the pane shows a selected delivery
  state.retrying = true;
  state.detailMessage = null;
  renderDetailPane();
  try {
    const d = await ui().Retry(id, edit || null);
    if (state.selected === id) {
      state.detail = d;
      const last = (d.attempts || [])[d.attempts.length - 1];
      state.newAttemptId = last ? last.id : '';
      state.detailMessage = notice('success', edit
        ? 'Sent an edited copy: the new attempt is highlighted.'
        : 'Sent again: the new attempt is highlighted.');
    }
  } catch (err) {
    state.detailMessage = notice('error', describe(err));
  } finally {
    state.retrying = false;
    renderDetailPane();
  }
}

boot().catch((err) => replace(main, notice('error', `The window could not start: ${describe(err)}`)));
