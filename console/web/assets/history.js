// @ts-check
// The history page of an inspector (/i/<id>) or an Endpoint (/e/<id>): the
// address header, live rows, filters, paging and the detail pane.
import { h, replace, field } from './dom.js';
import { request, subscriptions, describeError, token, GraphQLError } from './graphql.js';
import {
  INSPECTOR, SET_INSPECTOR_ANSWER, ENDPOINT, AGENT_STATUS, INSPECTOR_PAGE, ENDPOINT_PAGE, DELIVERY, RETRY, LIVE_DELIVERIES, REFUSED_OFFLINE,
  UPDATE_ENDPOINT, DELETE_ENDPOINT,
} from './api.js';
import { formatBytes, formatFullTime, formatTime, statusClass } from './format.js';
import { renderDetail, statusBadge } from './detail.js';
import { providerBadge } from './provider.js';
import { agentBadge, endpointFields, MODE_LABELS, rememberInspector, signInForm } from './home.js';
import { codeLine, notice, runBusy, submitWith } from './ui.js';
import { answerFields } from './answers.js';
import { statsPanel } from './charts.js';

const PAGE_SIZE = 50;
const AGENT_POLL_MS = 2000;
const EXPIRY_MARGIN_MS = 250; // read the expiry this long after it passed
/**
 * The page's address, an inspector or an Endpoint: typed as both at once,
 * since which fields the page reads follows isEndpoint.
 * @typedef {GQL.Endpoint & GQL.Inspector} Address
 */

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'];

/**
 * freshness orders versions of one delivery: a row only moves forward
 * (more attempts, more finished attempts, then an answer), so a late query
 * result never overwrites a newer live update.
 * @param {GQL.Delivery} d
 */
function freshness(d) {
  const attempts = d.attempts || [];
  const finished = attempts.filter((a) => a.status !== null || a.error || a.durationMs !== null).length;
  return [attempts.length, finished, d.responseStatus === null || d.responseStatus === undefined ? 0 : 1];
}

/**
 * timeKey turns an RFC 3339 time with up to nanoseconds into [milliseconds,
 * nanoseconds within the millisecond]: Date.parse alone keeps milliseconds,
 * and a burst of deliveries lands within one.
 * @param {string} iso
 */
function timeKey(iso) {
  const ms = Date.parse(iso) || 0;
  const frac = /\.(\d+)/.exec(iso || '');
  const sub = frac ? Number((frac[1] + '000000000').slice(3, 9)) : 0;
  return [ms, sub];
}

/**
 * compareFreshness is >0 when a is newer than b, 0 when equally fresh.
 * @param {GQL.Delivery} a
 * @param {GQL.Delivery} b
 */
function compareFreshness(a, b) {
  const fa = freshness(a);
  const fb = freshness(b);
  for (let i = 0; i < fa.length; i += 1) if (fa[i] !== fb[i]) return fa[i] - fb[i];
  return 0;
}

/**
 * historyPage renders into root and returns {dispose}.
 * @param {HTMLElement} root
 * @param {{ kind: 'inspector' | 'endpoint', id: string, navigate: Navigate }} options
 * @returns {Page}
 */
export function historyPage(root, { kind, id, navigate }) {
  const isEndpoint = kind === 'endpoint';
  const state = {
    // The inspector or endpoint: start() sets it before anything else reads it.
    info: /** @type {Address} */ (/** @type {unknown} */ (null)),
    /** @type {Map<string, GQL.Delivery>} */
    rows: new Map(), // id -> row
    /** @type {Map<string, number>} */
    seq: new Map(), // id -> tie-break rank (lower = newer)
    liveSeq: 0,
    pageSeq: 0,
    /** @type {string | null} */
    endCursor: null,
    hasNextPage: false,
    /** @type {string | null} */
    selectedId: null, // open in the detail pane
    /** @type {string | null} */
    focusId: null, // the row that holds tabindex=0
    /** @type {GQL.Delivery | null} */
    detail: null,
    retrying: false,
    /** @type {HTMLElement | null} */
    retryMessage: null,
    /** @type {string | null} */
    newAttemptId: null,
    // after/before: a time range picked on the chart (ISO times); '' for none.
    filters: { method: '', status: '', path: '', body: '', after: '', before: '' },
    /** @type {Set<string>} */
    found: new Set(), // ids the relay's search returned for the filters shown
    searchSeq: 0, // the latest search; older answers are dropped
  };
  let disposed = false;
  let renderQueued = false;
  let detailToken = 0; // the latest detail request; older answers are dropped
  /** @type {Map<string, HTMLTableRowElement>} */
  const rowEls = new Map(); // id -> <tr>, reused across renders
  /** @type {Array<() => void>} */
  const cleanups = [];
  /** @type {ReturnType<typeof setTimeout> | 0} */
  let expiryTimer = 0; // pending re-read of the inspector's expiry after a request
  /** @type {ReturnType<typeof setTimeout> | 0} */
  let expiryCheck = 0; // pending re-read once the shown expiry has passed
  cleanups.push(() => clearTimeout(expiryTimer), () => clearTimeout(expiryCheck));
  const abort = new AbortController();
  /** @type {HTMLSelectElement | null} */
  let statusSelect = null; // the filters' status select, set by filtersForm
  /** @type {HTMLElement | null} */
  let timeChip = null; // shows the time range picked on the chart

  const head = h('section', { class: 'card page-head', 'aria-labelledby': 'page-title' },
    h('h1', { id: 'page-title' }, isEndpoint ? 'Endpoint' : 'Inspector'), h('p', { class: 'muted' }, 'Loading…'));
  const liveStatus = h('span', { class: 'live', 'data-state': 'connecting', role: 'status' }, 'Connecting…');
  const countLine = h('p', { class: 'count', role: 'status', 'aria-live': 'polite' });
  const catchUpBox = h('div', { 'aria-live': 'polite' });
  const catchUp = { ids: /** @type {string[]} */ ([]), more: false, running: false, progress: '' };
  const tbody = h('tbody', { onkeydown: onRowKey, onclick: onRowClick });
  const table = h('table', { class: 'table rows', 'data-testid': 'rows' },
    h('caption', { class: 'sr-only' }, 'Requests, newest first. Use the arrow keys to move and Enter to open one.'),
    h('thead', {}, h('tr', {},
      ['Method', 'Path', 'Status', 'Size', 'Time'].map((c) => h('th', { scope: 'col', class: `col-${c.toLowerCase()}` }, c)))),
    tbody);
  const emptyBox = h('div', { class: 'empty-box' });
  const moreBox = h('div', { class: 'more' });
  const listError = h('div', {});
  const liveError = h('div', {});
  const detailPane = h('aside', { class: 'detail', 'aria-label': 'Request detail' });

  replace(root, h('div', { class: 'history' },
    head,
    h('div', { class: 'workspace' },
      h('section', { class: 'card list', 'aria-labelledby': 'list-title' },
        h('div', { class: 'list-head' }, h('h2', { id: 'list-title' }, 'Requests'), liveStatus),
        catchUpBox,
        filtersForm(),
        countLine,
        listError,
        liveError,
        h('div', { class: 'table-scroll' }, table),
        emptyBox,
        moreBox),
      detailPane)));
  renderDetailPane();
  renderRows();

  document.addEventListener('keydown', onDocumentKey);
  cleanups.push(() => document.removeEventListener('keydown', onDocumentKey));

  start();

  async function start() {
    try {
      const data = await request(isEndpoint ? ENDPOINT : INSPECTOR, { id }, { signal: abort.signal });
      if (disposed) return;
      state.info = /** @type {Address} */ (isEndpoint ? data.endpoint : data.inspector);
    } catch (err) {
      if (disposed || (err instanceof Error && err.name === 'AbortError')) return;
      if (isEndpoint && err instanceof GraphQLError && err.code === 'UNAUTHENTICATED') {
        // Reloading cannot fix a missing or refused token: signing in can.
        replace(head, h('h1', { id: 'page-title' }, 'Endpoint'),
          h('p', {}, 'This Endpoint belongs to an account: sign in to see its history.'),
          signInForm(() => navigate(location.pathname + location.search)));
      } else {
        replace(head, h('h1', { id: 'page-title' }, isEndpoint ? 'Endpoint' : 'Inspector'), notice('error', describeError(err)),
          h('p', {}, 'Reload the page to try again.'));
      }
      /** @type {Element} */ (root.querySelector('.workspace')).remove();
      return;
    }
    if (!state.info) {
      renderNotFound();
      return;
    }
    if (!isEndpoint) rememberInspector(id);
    document.title = `${isEndpoint ? state.info.name : `Inspector ${id}`} · Relay`;
    renderHead();
    const charts = statsPanel({ kind, id, onPick: pickBucket });
    head.after(charts.el);
    cleanups.push(() => charts.dispose());
    const loaded = await loadPage(null);
    if (disposed) return;
    // The subscription starts after the newest row shown, and so does every
    // new subscribe after it ended (the socket dropped, the relay restarted):
    // the server first sends what changed since, then live rows, so nothing
    // falls between the page and the moment the server registered the
    // subscription. Rows are upserted by id, so seeing one twice is harmless.
    const unsubscribe = subscriptions.subscribe(LIVE_DELIVERIES, () => ({ address: id, since: since(loaded) }), {
      next: (data) => {
        upsert(data.deliveries, 'live');
        charts.refresh();
      },
      error: (err) => replace(liveError, notice('error', `Live updates interrupted: ${describeError(err)}`)),
      status: (s, reason) => setLive(s, reason),
      reconnected: () => {
        if (state.selectedId) loadDetail(state.selectedId);
        if (!isEndpoint) refreshExpirySoon();
      },
    });
    cleanups.push(unsubscribe);
    if (isEndpoint) {
      startAgentPoll();
      offerCatchUp();
    }
  }

  /**
   * since is where the live rows start: after the newest row shown, from
   * the start of an empty history, or (first page not read) from now.
   * @param {boolean} loaded
   */
  function since(loaded) {
    const newest = orderedIds()[0];
    if (newest) return /** @type {GQL.Delivery} */ (state.rows.get(newest)).cursor;
    return loaded ? '' : null;
  }

  function renderNotFound() {
    const what = isEndpoint ? 'Endpoint' : 'inspector';
    document.title = `No such ${what} · Relay`;
    replace(head,
      h('h1', { id: 'page-title', 'data-testid': 'not-found' }, `No such ${what}`),
      h('p', {}, `No ${what} `, h('code', {}, id), isEndpoint && !token()
        ? ' is visible: sign in as its owner on the home page.'
        : ' is visible to you here. It may have been deleted or never existed.'),
      h('p', {}, h('a', { href: '/' }, 'Back to the home page')));
    // Nothing to list or watch: drop the list with its "Connecting…".
    /** @type {Element} */ (root.querySelector('.workspace')).remove();
  }

  // ---- header -------------------------------------------------------------

  /** @param {string} url */
  function exampleCurl(url) {
    return `curl -X POST '${url.replace(/\/+$/, '')}/webhook' -H 'Content-Type: application/json' -d '{"hello":"world"}'`;
  }

  // Requests the address's rate limit refused are not in the history; one
  // line says how many there were.
  /** @param {number} n */
  function refusedLine(n) {
    if (!n) return null;
    return h('p', { class: 'muted small', 'data-testid': 'refused' },
      `${n} ${n === 1 ? 'request' : 'requests'} refused by the rate limit (answered 429, not recorded).`);
  }

  // retentionLine says how long the Endpoint keeps its deliveries.
  /** @param {GQL.Retention | null | undefined} r */
  function retentionLine(r) {
    if (!r) return null;
    return h('p', { class: 'muted small', 'data-testid': 'retention' },
      `Keeps deliveries for ${r.window}${r.isDefault ? " (the relay's default)" : ''}; older ones are deleted from the history and the log.`,
      r.deletedBefore ? [' Deleted those received before ', h('time', { datetime: r.deletedBefore }, formatFullTime(r.deletedBefore)), '.'] : null);
  }

  // queueLine says where a QUEUE Endpoint's queue stands and how it sends.
  /** @param {GQL.EndpointQueue | null | undefined} q */
  function queueLine(q) {
    if (!q) return null;
    const p = q.policy;
    return h('p', { class: 'muted small', 'data-testid': 'queue' },
      `Queue: ${q.queued} queued, ${q.inFlight} in flight, ${q.dead} dead. Answers senders at once; sends ${p.ordering === 'STRICT' ? 'one at a time in order' : `up to ${p.maxInFlight} at once`}, ${p.ratePerSecond}/s, ${p.maxAttempts} attempts, retries from ${p.backoffBase} to ${p.backoffCap}.`,
      q.dead ? [' Put the dead back: ', h('code', {}, `relay retry --all --dead ${state.info.name}`)] : null);
  }

  function renderHead() {
    const info = state.info;
    if (!isEndpoint) {
      scheduleExpiryCheck();
      replace(head,
        h('div', { class: 'title-row' },
          h('h1', { id: 'page-title' }, 'Inspector ', h('code', { class: 'id' }, info.id)),
          info.expired
            ? h('span', { class: 'badge badge-warn', 'data-testid': 'inspector-state' }, 'Expired')
            : h('span', { class: 'badge badge-ok', 'data-testid': 'inspector-state' }, 'Recording')),
        codeLine('Public URL', info.url, { testid: 'public-url' }),
        codeLine('Try it', exampleCurl(info.url), { testid: 'example-curl' }),
        info.smee ? codeLine('smee (.env)', `WEBHOOK_PROXY_URL=${info.url.replace(/\/+$/, '')}`, { testid: 'smee-env' }) : null,
        info.smee ? h('p', { class: 'muted small', 'data-testid': 'smee-note' },
          'smee.io-compatible: Probot, smee-client and gosmee read this address\'s requests as a stream; ',
          'they are recorded here as well. smee\'s format re-serialises JSON bodies: where a signature must verify over the exact bytes, use relay listen.') : null,
        h('p', { class: 'muted small' },
          'Every request on every method and path is recorded and answered 204, or the answer set below. ',
          info.expired ? 'This inspector expired: its address answers 503 now.'
            : ['Expires ', h('time', { datetime: info.expiresAt, 'data-testid': 'expires' }, formatFullTime(info.expiresAt)),
              ' unless a request arrives; each request moves this forward.']),
        refusedLine(info.refusedRequests),
        info.expired ? null : inspectorAnswerPanel());
      return;
    }
    const agentLine = h('div', { class: 'agent-line', 'aria-live': 'polite', 'data-testid': 'agent-status' }, agentBadge(info.agentConnected, info.agentCount));
    replace(head,
      h('div', { class: 'title-row' },
        h('h1', { id: 'page-title' }, info.name),
        h('span', { class: `badge mode-${info.mode.toLowerCase()}` }, MODE_LABELS[info.mode] || info.mode),
        agentLine),
      codeLine('Public URL', info.url, { testid: 'public-url' }),
      codeLine('Try it', exampleCurl(info.url), { testid: 'example-curl' }),
      listenersBox(info.listeners),
      agentCommandLine(),
      refusedLine(info.refusedRequests),
      retentionLine(info.retention),
      queueLine(info.queue),
      settingsPanel());
  }

  // listenersBox lists the agent sessions on the Endpoint, the primary
  // (whose answers go to the senders) marked; the others get copies.
  /** @param {GQL.Listener[] | null | undefined} listeners */
  function listenersBox(listeners) {
    const box = h('div', { class: 'listeners', 'data-testid': 'listeners' });
    fillListeners(box, listeners || []);
    return box;
  }

  /**
   * @param {Element} box
   * @param {GQL.Listener[]} listeners
   */
  function fillListeners(box, listeners) {
    if (listeners.length < 2) {
      replace(box);
      return;
    }
    replace(box,
      h('div', { class: 'muted small' }, 'Listeners: the primary answers the senders; the others receive copies.'),
      h('ul', { class: 'listener-list' }, listeners.map((l) => h('li', {
        'data-testid': 'listener', 'data-primary': String(l.primary), 'data-agent': l.agentId,
      },
      l.primary ? h('span', { class: 'badge badge-ok', 'data-testid': 'listener-primary' }, 'Primary') : h('span', { class: 'badge' }, 'Copy'),
      ' ', h('code', {}, l.agentId), ` → ${l.target}`,
      l.filters && l.filters.length ? h('span', { class: 'muted small' }, `  filters: ${l.filters.map((f) => f.text).join(' ')}`) : null))));
  }

  /** @param {string} tok */
  function agentCommand(tok) {
    const target = state.info.target || '127.0.0.1:3000';
    // relay listen, as the README teaches: TARGET then the Endpoint (its
    // name when it is one word, else its id). The token goes in
    // RELAY_TOKEN: a --token flag shows it to every local user in the
    // process list.
    const name = /^[A-Za-z0-9._-]+$/.test(state.info.name || '') ? state.info.name : state.info.id;
    return `RELAY_TOKEN=${tok} relay listen ${target} ${name} --server ${location.origin}`;
  }

  function agentCommandLine() {
    const tok = token();
    // The token is masked on screen (screenshots, shoulder surfing); the copy has it.
    return codeLine('Agent', agentCommand(tok ? '••••••••' : '<token>'), {
      copyValue: () => agentCommand(tok || '<token>'),
      testid: 'agent-command',
      buttonLabel: 'Copy command',
    });
  }

  /**
   * @param {boolean} connected
   * @param {number} count
   */
  function updateAgent(connected, count) {
    const line = head.querySelector('.agent-line');
    if (line && (state.info.agentConnected !== connected || state.info.agentCount !== count)) {
      replace(line, agentBadge(connected, count));
    }
    const arrived = connected && !state.info.agentConnected;
    state.info.agentConnected = connected;
    state.info.agentCount = count;
    if (arrived) offerCatchUp();
  }

  // ---- catch-up: what was refused while no agent was connected ----------

  // offerCatchUp looks for deliveries answered 503 while no agent was
  // connected (the relay's refusedOffline search) and offers to send them
  // again, oldest first, once an agent is connected.
  async function offerCatchUp() {
    if (!isEndpoint || !state.info.agentConnected || catchUp.running) return;
    try {
      const data = await request(REFUSED_OFFLINE, { id }, { signal: abort.signal });
      if (disposed || !data.endpoint) return;
      const conn = data.endpoint.deliveries;
      catchUp.ids = conn.nodes.map((n) => n.id).reverse(); // oldest first
      catchUp.more = conn.pageInfo.hasNextPage;
    } catch {
      return; // an offer is a convenience: the next connect asks again
    }
    renderCatchUp();
  }

  async function runCatchUp() {
    if (catchUp.running || !catchUp.ids.length) return;
    catchUp.running = true;
    const ids = catchUp.ids;
    let ok = 0;
    let failed = 0;
    for (let i = 0; i < ids.length && !disposed; i++) {
      catchUp.progress = `Sending ${i + 1} of ${ids.length}…`;
      renderCatchUp();
      try {
        const data = await request(RETRY, { id: ids[i], edit: null }, { signal: abort.signal });
        const st = data.retryDelivery.responseStatus;
        if (st !== null && st >= 200 && st < 300) ok++; else failed++;
        upsert(data.retryDelivery, 'page');
      } catch (err) {
        if (disposed || (err instanceof Error && err.name === 'AbortError')) return;
        failed++;
        if ((err instanceof GraphQLError && err.code === 'AGENT_NOT_CONNECTED') || !state.info.agentConnected) break;
      }
    }
    catchUp.running = false;
    catchUp.ids = [];
    catchUp.progress = `Caught up: ${ok} answered 2xx, ${failed} not.`;
    renderCatchUp();
  }

  function renderCatchUp() {
    if (catchUp.running || (!catchUp.ids.length && catchUp.progress)) {
      replace(catchUpBox, notice(catchUp.running ? 'info' : 'success', h('span', { 'data-testid': 'catch-up-progress' }, catchUp.progress)));
      return;
    }
    if (!catchUp.ids.length) {
      replace(catchUpBox);
      return;
    }
    const n = `${catchUp.ids.length}${catchUp.more ? '+' : ''}`;
    replace(catchUpBox, h('div', { class: 'notice catch-up', 'data-testid': 'catch-up' },
      h('span', {}, `${n} request${catchUp.ids.length === 1 ? ' was' : 's were'} answered 503 while no agent was connected. `),
      h('button', { type: 'button', class: 'btn btn-small', 'data-testid': 'catch-up-run', onclick: runCatchUp }, 'Send them again, oldest first')));
  }

  function startAgentPoll() {
    let busy = false;
    const timer = setInterval(async () => {
      if (busy || disposed) return;
      busy = true;
      try {
        const data = await request(AGENT_STATUS, { id }, { signal: abort.signal });
        if (disposed || !data.endpoint) return;
        const before = retryReason();
        updateAgent(data.endpoint.agentConnected, data.endpoint.agentCount);
        state.info.listeners = data.endpoint.listeners;
        const box = head.querySelector('[data-testid=listeners]');
        if (box) fillListeners(box, data.endpoint.listeners || []);
        state.info.mode = data.endpoint.mode;
        state.info.target = data.endpoint.target;
        if (before !== retryReason()) renderDetailPane();
      } catch {
        // Transient: the next tick tries again, and the live status shows outages.
      } finally {
        busy = false;
      }
    }, AGENT_POLL_MS);
    cleanups.push(() => clearInterval(timer));
  }

  function settingsPanel() {
    const info = state.info;
    const fields = endpointFields(info);
    const answers = answerFields(info.answer, info.handshakes);
    const filters = filterFields(info.filters || []);
    const status = h('div', { class: 'form-status' });
    const form = h('form', {
      class: 'stack',
      'aria-label': 'Endpoint settings',
      onsubmit: submitWith(status, async () => {
        const input = { ...fields.value(), ...answers.value(), filterTexts: filters.value() };
        if (input.target === null) delete input.target;
        const data = await request(UPDATE_ENDPOINT, { id, input });
        state.info = { ...state.info, ...data.updateEndpoint };
        document.title = `${state.info.name} · Relay`;
        renderHead();
        renderDetailPane();
        const again = /** @type {HTMLDetailsElement} */ (head.querySelector('details.settings'));
        again.open = true;
        replace(/** @type {Element} */ (again.querySelector('.form-status')), notice('success', 'Saved.'));
      }),
    },
    fields.element,
    filters.element,
    answers.element,
    filtersLine(info.filters || []),
    h('div', { class: 'actions' },
      h('button', { type: 'submit', class: 'btn btn-primary' }, 'Save settings'),
      h('button', { type: 'button', class: 'btn btn-danger', onclick: confirmDelete }, 'Delete Endpoint…')),
    status);
    return h('details', { class: 'settings' }, h('summary', {}, 'Settings'), form);
  }

  // An inspector's own answer and handshakes; whoever has its address may set them.
  function inspectorAnswerPanel() {
    const answers = answerFields(state.info.answer, state.info.handshakes, { proxy: false });
    const status = h('div', { class: 'form-status' });
    const form = h('form', {
      class: 'stack',
      'aria-label': 'Inspector answer',
      onsubmit: submitWith(status, async () => {
        const data = await request(SET_INSPECTOR_ANSWER, { id, ...answers.value() });
        state.info = { ...state.info, ...data.setInspectorAnswer };
        renderHead();
        const again = /** @type {HTMLDetailsElement} */ (head.querySelector('details.settings'));
        again.open = true;
        replace(/** @type {Element} */ (again.querySelector('.form-status')), notice('success', 'Saved.'));
      }),
    },
    answers.element,
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn btn-primary' }, 'Save answer')),
    status);
    return h('details', { class: 'settings' }, h('summary', {}, 'Answer'), form);
  }

  // filterFields edits the Endpoint's filters in their text form, one per
  // line (as relay listen --filter takes them); the relay parses them and
  // names the one at fault.
  /** @param {GQL.Filter[]} current */
  function filterFields(current) {
    const area = h('textarea', {
      name: 'filters', rows: '3', spellcheck: 'false', autocomplete: 'off',
      placeholder: 'event=charge.succeeded,charge.refunded\nheader:X-GitHub-Event=push\njson:data.object.livemode=true',
    });
    area.value = current.map((f) => f.text).join('\n');
    return {
      element: h('fieldset', { class: 'stack', 'data-testid': 'filter-settings' },
        h('legend', {}, 'Filters'),
        field('Forward only deliveries that match every line', area,
          'One per line: method=POST, path=/hooks/*, header:NAME=A,B, json:PATH=A,B or event=A,B. Others are recorded and answered as in LOG mode. Empty: forward everything.')),
      value: () => area.value.split('\n').map((l) => l.trim()).filter((l) => l !== ''),
    };
  }

  // filtersLine shows the Endpoint's filters (set with relay endpoints
  // update --filter or the API's updateEndpoint filters).
  /** @param {GQL.Filter[]} filters */
  function filtersLine(filters) {
    return h('p', { class: 'muted small', 'data-testid': 'endpoint-filters' },
      filters.length
        ? ['Filters: ', h('code', {}, filters.map((f) => f.text).join(' ')), ' — other deliveries are recorded and answered as a LOG Endpoint answers.']
        : 'Filters: none, every delivery is forwarded.');
  }

  function confirmDelete() {
    const status = h('div', { class: 'form-status' });
    const cancel = h('button', { type: 'button', class: 'btn', value: 'cancel', autofocus: true }, 'Cancel');
    const ok = h('button', { type: 'button', class: 'btn btn-danger' }, 'Delete');
    const dialog = h('dialog', { class: 'dialog', 'aria-labelledby': 'delete-title', 'aria-describedby': 'delete-desc' },
      h('h2', { id: 'delete-title' }, `Delete “${state.info.name}”?`),
      h('p', { id: 'delete-desc' }, 'Its address stops working at once (senders get 503) and its history is no longer shown. This cannot be undone.'),
      status,
      h('div', { class: 'actions' }, cancel, ok));
    cancel.addEventListener('click', () => dialog.close());
    dialog.addEventListener('close', () => dialog.remove());
    ok.addEventListener('click', () => runBusy(ok, status, async () => {
      await request(DELETE_ENDPOINT, { id });
      dialog.close();
      navigate('/');
    }));
    document.body.append(dialog);
    dialog.showModal();
    cleanups.push(() => dialog.isConnected && dialog.close());
  }

  // ---- rows ---------------------------------------------------------------

  /**
   * @param {import('./graphql.js').LiveState} s
   * @param {string} reason
   */
  function setLive(s, reason) {
    liveStatus.dataset.state = s;
    liveStatus.textContent = s === 'live' ? 'Live' : s === 'connecting' ? 'Connecting…' : 'Not live, reconnecting…';
    liveStatus.title = s === 'live' ? 'New requests appear as they arrive.' : reason || '';
    if (s === 'live') replace(liveError);
  }

  /**
   * upsert adds or updates a row; source is 'live' or 'page'.
   * @param {GQL.Delivery} d
   * @param {'live' | 'page'} source
   */
  function upsert(d, source) {
    const old = state.rows.get(d.id);
    const cmp = old ? compareFreshness(d, old) : 1;
    if (cmp < 0) return; // equally fresh copies replace: they may carry more fields
    state.rows.set(d.id, d);
    if (!state.seq.has(d.id)) {
      if (source === 'live') state.seq.set(d.id, (state.liveSeq -= 1));
      else state.seq.set(d.id, (state.pageSeq += 1));
    }
    scheduleRender();
    if (!old && source === 'live' && !isEndpoint) refreshExpirySoon();
    // The detail pane has more fields than a row: refetch it when the row moved on.
    if (d.id === state.selectedId && old && cmp > 0 && !state.retrying) loadDetail(d.id);
  }

  // A request moves the inspector's expiry forward: re-read it, at most
  // once a second however many rows arrive.
  function refreshExpirySoon() {
    if (expiryTimer) return;
    expiryTimer = setTimeout(async () => {
      await rereadInspector();
      expiryTimer = 0;
    }, 1000);
  }

  // An idle inspector expires without any event the page would hear of:
  // re-read it once its expiry has passed, and the relay (whose clock
  // decides) says whether it is expired. A request meanwhile moves the
  // expiry forward and the check with it.
  function scheduleExpiryCheck() {
    clearTimeout(expiryCheck);
    expiryCheck = 0;
    if (state.info.expired) return;
    const wait = Date.parse(state.info.expiresAt) - Date.now() + EXPIRY_MARGIN_MS;
    // At least a second apart when the clocks disagree; setTimeout holds at most ~24.8 days.
    expiryCheck = setTimeout(rereadInspector, Math.min(Math.max(wait, 1000), 2 ** 31 - 1));
  }

  async function rereadInspector() {
    try {
      const data = await request(INSPECTOR, { id }, { signal: abort.signal });
      if (disposed || !data.inspector) return;
      const expiredBefore = state.info.expired;
      state.info = /** @type {Address} */ (data.inspector);
      const el = /** @type {HTMLTimeElement | null} */ (head.querySelector('[data-testid=expires]'));
      if (el && !state.info.expired && !expiredBefore) {
        // Update in place so focus on the copy buttons is kept.
        el.dateTime = state.info.expiresAt;
        el.textContent = formatFullTime(state.info.expiresAt);
        scheduleExpiryCheck();
      } else {
        renderHead();
      }
    } catch {
      // The shown expiry stays; the next request or reconnect reads it again.
    }
  }

  function scheduleRender() {
    if (renderQueued) return;
    renderQueued = true;
    queueMicrotask(() => {
      renderQueued = false;
      if (!disposed) renderRows();
    });
  }

  /**
   * serverFilter is the filters as the relay's search takes them, null when
   * none is set: pages then come from the whole history, not the rows loaded.
   */
  function serverFilter() {
    const f = state.filters;
    /** @type {GQL.DeliveryFilter} */
    const out = {};
    if (f.method && f.method !== 'OTHER') out.method = f.method;
    if (f.status === 'none') out.pending = true;
    else if (f.status) out.statusClass = Number(f.status[0]);
    if (f.path) out.pathPrefix = f.path;
    if (f.body) out.bodyContains = f.body;
    if (f.after) out.receivedAfter = f.after;
    if (f.before) out.receivedBefore = f.before;
    return Object.keys(out).length ? out : null;
  }

  /**
   * fetchPage reads one page of history after the cursor; null when the address is gone, the page was disposed or a newer search began.
   * @param {string | null} after
   */
  async function fetchPage(after) {
    const seq = state.searchSeq;
    const data = await request(isEndpoint ? ENDPOINT_PAGE : INSPECTOR_PAGE,
      { id, first: PAGE_SIZE, after, filter: serverFilter() }, { signal: abort.signal });
    if (disposed || seq !== state.searchSeq) return null;
    const owner = isEndpoint ? data.endpoint : data.inspector;
    return owner ? owner.deliveries : null;
  }

  /** @param {string | null} after */
  async function loadPage(after) {
    moreBox.dataset.loading = 'true';
    try {
      const conn = await fetchPage(after);
      if (!conn) return false;
      for (const edge of conn.edges) {
        if (serverFilter()) state.found.add(edge.node.id);
        upsert(edge.node, 'page');
      }
      state.endCursor = conn.pageInfo.endCursor;
      state.hasNextPage = conn.pageInfo.hasNextPage;
      replace(listError);
      return true;
    } catch (err) {
      if (!disposed && !(err instanceof Error && err.name === 'AbortError')) replace(listError, notice('error', describeError(err)));
      return false;
    } finally {
      delete moreBox.dataset.loading;
      if (!disposed) renderRows();
    }
  }

  function orderedIds() {
    const key = (/** @type {string} */ rid) => timeKey(/** @type {GQL.Delivery} */ (state.rows.get(rid)).receivedAt);
    return [...state.rows.keys()].sort((a, b) => {
      const ka = key(a);
      const kb = key(b);
      return kb[0] - ka[0] || kb[1] - ka[1] || /** @type {number} */ (state.seq.get(a)) - /** @type {number} */ (state.seq.get(b));
    });
  }

  // matches decides for every row shown, live ones too, by the same rules
  // as the relay's search; a row's body is not at hand, so with a body
  // filter only the rows the search returned are shown.
  /** @param {GQL.Delivery} d */
  function matches(d) {
    const f = state.filters;
    if (f.method && (f.method === 'OTHER' ? METHODS.includes(d.method) : d.method !== f.method)) return false;
    if (f.status && statusClass(d.responseStatus) !== f.status) return false;
    if (f.path && !d.path.startsWith(f.path)) return false;
    if (f.body && !state.found.has(d.id)) return false;
    if (f.after && Date.parse(d.receivedAt) < Date.parse(f.after)) return false;
    if (f.before && Date.parse(d.receivedAt) >= Date.parse(f.before)) return false;
    return true;
  }

  // search starts the history over from the relay with the filters set:
  // the rows loaded so far are dropped, the live ones keep arriving.
  async function search() {
    state.searchSeq += 1;
    state.rows.clear();
    state.seq.clear();
    state.found.clear();
    state.endCursor = null;
    state.hasNextPage = false;
    renderRows();
    await loadPage(null);
  }

  function renderRows() {
    const ids = orderedIds();
    const visible = ids.filter((rid) => matches(/** @type {GQL.Delivery} */ (state.rows.get(rid))));
    if (!state.focusId || !visible.includes(state.focusId)) state.focusId = visible[0] || null;
    // Reuse row elements and only move those out of place, so a focused row
    // keeps its focus while new rows arrive above it.
    const keep = new Set(visible);
    for (const [rid, tr] of rowEls) {
      if (!keep.has(rid)) {
        tr.remove();
        if (!state.rows.has(rid)) rowEls.delete(rid);
      }
    }
    visible.forEach((rid, i) => {
      let tr = rowEls.get(rid);
      if (!tr) {
        tr = h('tr', { class: 'row', 'data-id': rid });
        rowEls.set(rid, tr);
      }
      fillRow(tr, /** @type {GQL.Delivery} */ (state.rows.get(rid)));
      if (tbody.children[i] !== tr) tbody.insertBefore(tr, tbody.children[i] || null);
    });
    const total = state.rows.size;
    const active = serverFilter() || state.filters.method;
    countLine.textContent = active
      ? `${visible.length} matching request${visible.length === 1 ? '' : 's'} found${state.hasNextPage ? ' so far: Load more searches older history' : ' in the whole history'}`
      : !total ? '' : `${total} request${total === 1 ? '' : 's'} loaded`;
    if (!total && !active) {
      replace(emptyBox, state.info ? h('div', { class: 'empty' },
        h('p', {}, h('strong', {}, 'No requests yet.'), ' Send one to the public URL; it appears here at once.'),
        h('pre', { class: 'code' }, exampleCurl(state.info.url))) : null);
    } else if (!visible.length) {
      replace(emptyBox, h('p', { class: 'empty' }, state.hasNextPage
        ? 'No match in the newest history searched; Load more searches older requests.'
        : 'No request matches the filters.'));
    } else {
      replace(emptyBox);
    }
    table.hidden = !visible.length;
    replace(moreBox, state.hasNextPage ? h('button', {
      type: 'button',
      class: 'btn',
      disabled: moreBox.dataset.loading === 'true',
      onclick: () => loadPage(state.endCursor),
    }, 'Load more') : null);
  }

  /**
   * @param {HTMLTableRowElement} tr
   * @param {GQL.Delivery} d
   */
  function fillRow(tr, d) {
    const selected = d.id === state.selectedId;
    tr.tabIndex = d.id === state.focusId ? 0 : -1;
    tr.classList.toggle('is-selected', selected);
    if (selected) tr.setAttribute('aria-current', 'true');
    else tr.removeAttribute('aria-current');
    const sig = JSON.stringify([d.method, d.path, d.responseStatus, d.bodySize, d.complete, d.receivedAt, d.provider, d.duplicates, d.hint]);
    if (tr.dataset.sig === sig) return;
    tr.dataset.sig = sig;
    replace(tr,
      h('td', {}, h('span', { class: `method method-${d.method.toLowerCase()}` }, d.method)),
      h('td', { class: 'path-cell' }, h('div', { class: 'path-wrap' },
        h('code', { title: d.path }, d.path),
        d.complete ? null : h('span', { class: 'badge badge-warn incomplete', title: 'Only the first part of the body was stored' }, 'incomplete'),
        providerBadge(d),
        // The server says what the request looked like and how to answer it.
        d.hint ? h('span', { class: 'badge badge-warn hint', title: d.hint, 'data-testid': 'row-hint' }, 'unanswered handshake') : null)),
      h('td', {}, statusBadge(d.responseStatus)),
      h('td', { class: 'num' }, formatBytes(d.bodySize)),
      h('td', {}, h('time', { datetime: d.receivedAt, title: formatFullTime(d.receivedAt) }, formatTime(d.receivedAt))));
  }

  function filtersForm() {
    const method = h('select', { name: 'method' },
      h('option', { value: '' }, 'Any method'),
      METHODS.map((m) => h('option', { value: m }, m)),
      h('option', { value: 'OTHER' }, 'Other'));
    const status = h('select', { name: 'status' },
      h('option', { value: '' }, 'Any status'),
      ['2xx', '3xx', '4xx', '5xx'].map((s) => h('option', { value: s }, s)),
      h('option', { value: 'none' }, 'No status yet'));
    const path = h('input', { type: 'search', name: 'path', placeholder: 'e.g. /webhook', spellcheck: 'false' });
    const body = h('input', { type: 'search', name: 'body', placeholder: 'e.g. charge.failed', spellcheck: 'false' });
    // Typing waits for a pause before it searches; a choice searches at once.
    /** @type {ReturnType<typeof setTimeout> | 0} */
    let typing = 0;
    cleanups.push(() => clearTimeout(typing));
    const update = () => {
      clearTimeout(typing);
      state.filters = { method: method.value, status: status.value, path: path.value.trim(), body: body.value,
        after: state.filters.after, before: state.filters.before };
      search();
    };
    statusSelect = status;
    timeChip = h('div', { class: 'time-filter', 'data-testid': 'time-filter' });
    const typed = () => {
      clearTimeout(typing);
      typing = setTimeout(update, 300);
    };
    method.addEventListener('change', update);
    status.addEventListener('change', update);
    path.addEventListener('input', typed);
    body.addEventListener('input', typed);
    return h('form', { class: 'filters', role: 'search', 'aria-label': 'Search requests', onsubmit: (/** @type {Event} */ ev) => { ev.preventDefault(); update(); } },
      field('Method', method), field('Status', status), field('Path starts with', path), field('Body contains', body), timeChip);
  }

  // pickBucket filters the history to a bar clicked on the chart: its
  // span of time and its status class.
  /**
   * @param {GQL.StatsBucket} bucket
   * @param {string} status
   * @param {GQL.Stats} stats
   */
  function pickBucket(bucket, status, stats) {
    const after = bucket.start;
    const before = new Date(Date.parse(bucket.start) + stats.bucketSeconds * 1000).toISOString();
    state.filters = { ...state.filters, status, after, before };
    if (statusSelect) statusSelect.value = status;
    renderTimeChip();
    search();
  }

  function renderTimeChip() {
    if (!timeChip) return;
    const f = state.filters;
    if (!f.after) {
      replace(timeChip);
      return;
    }
    replace(timeChip, h('span', { class: 'chip' }, 'Received ',
      h('time', { datetime: f.after }, formatFullTime(f.after)), ' to ', h('time', { datetime: f.before }, formatFullTime(f.before)), ' ',
      h('button', {
        type: 'button', class: 'btn btn-small', 'aria-label': 'Clear the time filter',
        onclick: () => { state.filters = { ...state.filters, after: '', before: '' }; renderTimeChip(); search(); },
      }, '×')));
  }

  // ---- keyboard and selection ----------------------------------------------

  /**
   * @param {EventTarget | Element | null} el
   * @returns {HTMLTableRowElement | null}
   */
  function rowOf(el) {
    const tr = el && 'closest' in el ? /** @type {HTMLTableRowElement | null} */ (el.closest('tr.row')) : null;
    return tr && tbody.contains(tr) ? tr : null;
  }

  /** @param {Element | null} tr a row of tbody */
  function focusRow(tr) {
    if (!(tr instanceof HTMLElement)) return;
    const prev = state.focusId === null ? undefined : rowEls.get(state.focusId);
    if (prev) prev.tabIndex = -1;
    state.focusId = tr.dataset.id || null;
    tr.tabIndex = 0;
    tr.focus();
  }

  /** @param {KeyboardEvent} ev */
  function onRowKey(ev) {
    const tr = rowOf(ev.target);
    if (!tr) return;
    switch (ev.key) {
      case 'ArrowDown':
        ev.preventDefault();
        focusRow(tr.nextElementSibling);
        break;
      case 'ArrowUp':
        ev.preventDefault();
        focusRow(tr.previousElementSibling);
        break;
      case 'Home':
        ev.preventDefault();
        focusRow(tbody.firstElementChild);
        break;
      case 'End':
        ev.preventDefault();
        focusRow(tbody.lastElementChild);
        break;
      case 'Enter':
      case ' ':
        ev.preventDefault();
        select(/** @type {string} */ (tr.dataset.id));
        break;
      default:
        break;
    }
  }

  /** @param {MouseEvent} ev */
  function onRowClick(ev) {
    const tr = rowOf(ev.target);
    if (!tr) return;
    focusRow(tr);
    select(/** @type {string} */ (tr.dataset.id));
  }

  /** @param {KeyboardEvent} ev */
  function onDocumentKey(ev) {
    if (ev.key !== 'Escape' || !state.selectedId || document.querySelector('dialog[open]')) return;
    ev.preventDefault();
    closeDetail();
  }

  /** @param {string} rid */
  function select(rid) {
    if (state.selectedId !== rid) {
      state.retryMessage = null;
      state.newAttemptId = null;
    }
    state.selectedId = rid;
    state.detail = null;
    renderRows();
    renderDetailPane();
    loadDetail(rid);
    // On a narrow window the pane is below the list; bring it into view.
    if (window.matchMedia('(max-width: 899px)').matches) detailPane.scrollIntoView({ block: 'start' });
  }

  function closeDetail() {
    const rid = state.selectedId;
    state.selectedId = null;
    state.detail = null;
    renderRows();
    renderDetailPane();
    const tr = rid === null ? undefined : rowEls.get(rid);
    if (tr && tr.isConnected) focusRow(tr);
  }

  /** @param {string} rid */
  async function loadDetail(rid) {
    const mine = (detailToken += 1);
    try {
      const data = await request(DELIVERY, { id: rid }, { signal: abort.signal });
      if (disposed || mine !== detailToken || state.selectedId !== rid) return;
      state.detail = data.delivery;
      if (data.delivery) upsert(data.delivery, 'page');
      renderDetailPane();
    } catch (err) {
      if (disposed || (err instanceof Error && err.name === 'AbortError') || mine !== detailToken) return;
      replace(detailPane, notice('error', describeError(err)));
    }
  }

  function retryReason() {
    const d = state.detail;
    if (!isEndpoint || !state.info || (state.info.mode !== 'PROXY' && state.info.mode !== 'QUEUE')) return 'Retry needs Log and Proxy or Queue mode';
    if (!state.info.agentConnected) return 'No agent connected';
    if (d && !d.complete) return 'Payload incomplete';
    return '';
  }

  /** @param {GQL.RequestEditInput | null} edit */
  async function retry(edit) {
    const d = state.detail;
    if (!d || state.retrying) return;
    const before = new Set(d.attempts.map((a) => a.id));
    state.retrying = true;
    state.retryMessage = null;
    state.newAttemptId = null;
    renderDetailPane();
    try {
      const data = await request(RETRY, { id: d.id, edit: edit || null });
      if (disposed) return;
      const updated = data.retryDelivery;
      const added = updated.attempts.find((a) => !before.has(a.id)) || updated.attempts[updated.attempts.length - 1];
      state.newAttemptId = added ? added.id : null;
      state.retryMessage = notice('success', h('span', { 'data-testid': 'retry-result' },
        edit ? 'Sent an edited copy: the new attempt ' : 'Retried: the new attempt ', added && added.status !== null
          ? ['answered ', statusBadge(added.status)]
          : ['failed', added && added.error ? ` (${added.error})` : ''], '.'));
      if (state.selectedId === updated.id) state.detail = updated;
      upsert(updated, 'page');
    } catch (err) {
      if (disposed) return;
      state.retryMessage = notice('error', h('span', { 'data-testid': 'retry-error' }, describeError(err)));
    } finally {
      state.retrying = false;
      if (!disposed) renderDetailPane();
    }
  }

  function renderDetailPane() {
    detailPane.classList.toggle('is-open', !!state.selectedId);
    if (!state.selectedId) {
      replace(detailPane, h('div', { class: 'detail-empty' },
        h('h2', {}, 'Request detail'),
        h('p', { class: 'muted' }, 'Select a request to see its headers, body, attempts and response. ',
          'Keyboard: Tab to the list, arrow keys to move, Enter to open, Escape to close.')));
      return;
    }
    if (!state.detail) {
      replace(detailPane, h('p', { class: 'muted detail-loading' }, 'Loading request…'));
      return;
    }
    const scroll = detailPane.scrollTop;
    replace(detailPane, renderDetail(state.detail, {
      baseURL: state.info.url,
      retryReason: retryReason(),
      retrying: state.retrying,
      message: state.retryMessage,
      newAttemptId: state.newAttemptId || undefined,
      onRetry: retry,
      onClose: closeDetail,
    }));
    detailPane.scrollTop = scroll;
  }

  return {
    dispose() {
      disposed = true;
      abort.abort();
      for (const fn of cleanups) fn();
    },
  };
}
