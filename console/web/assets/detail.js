// @ts-check
// The detail pane of one delivery: why it was answered as it was, request,
// body, attempts, response, and the Copy as curl, Retry and Edit and retry
// actions.
import { field, h } from './dom.js';
import {
  base64ToBytes, formatBytes, formatFullTime, headerValue, hexDump, highlightJSON, parseJSON,
  statusClass, storedLength,
} from './format.js';
import { curlCommand } from './curl.js';
import { copyButton, notice } from './ui.js';
import { compareView } from './compare.js';
import { providerFacts } from './provider.js';

/**
 * What renderDetail's caller passes besides the delivery.
 * @typedef {object} DetailOptions
 * @property {string} baseURL the address's public URL
 * @property {string} retryReason why Retry is not allowed; '' when it is
 * @property {boolean} retrying
 * @property {DomChild} [message] shown under the actions
 * @property {string} [newAttemptId] highlighted
 * @property {(edit: GQL.RequestEditInput | null) => void} onRetry
 * @property {() => void} onClose
 * @property {import('./compare.js').Ask} [compare] how to ask for a comparison (compare.js)
 */

/**
 * renderDetail returns the pane for delivery d.
 * opts: baseURL (the address's public URL), retryReason ('' when Retry is
 * allowed), retrying (bool), message (a node shown under the actions),
 * newAttemptId (highlighted), onRetry(edit), onClose(), compare(id, a, b)
 * (optional: how to ask the relay for a comparison, see compare.js). Edit and retry
 * opens an editor of the recorded request; it sends only what changed.
 * @param {GQL.Delivery} d
 * @param {DetailOptions} opts
 */
export function renderDetail(d, opts) {
  const stored = storedLength(d.bodyBase64);
  const reasonId = `retry-reason-${d.id}`;
  const retryButton = h('button', {
    type: 'button',
    class: 'btn btn-primary',
    'data-testid': 'retry',
    disabled: !!opts.retryReason || opts.retrying,
    'aria-describedby': opts.retryReason ? reasonId : null,
    onclick: () => opts.onRetry(null),
  }, opts.retrying ? 'Retrying…' : 'Retry');
  const editor = editForm(d, opts);
  const editButton = h('button', {
    type: 'button',
    class: 'btn',
    'data-testid': 'edit-retry',
    disabled: !!opts.retryReason || opts.retrying,
    'aria-expanded': 'false',
    onclick: (/** @type {Event} */ ev) => {
      editor.hidden = !editor.hidden;
      /** @type {Element} */ (ev.currentTarget).setAttribute('aria-expanded', String(!editor.hidden));
    },
  }, 'Edit and retry');

  return h('article', { class: 'detail-body', 'aria-labelledby': 'detail-title', 'data-delivery-id': d.id },
    h('div', { class: 'detail-head' },
      h('h2', { id: 'detail-title', class: 'detail-title' },
        h('span', { class: `method method-${d.method.toLowerCase()}` }, d.method), ' ',
        h('code', { class: 'raw-path' }, d.path)),
      h('button', { type: 'button', class: 'btn btn-small btn-ghost', onclick: opts.onClose, 'aria-label': 'Close detail (Escape)' }, 'Close')),
    h('dl', { class: 'facts' },
      fact('Received', h('time', { datetime: d.receivedAt }, formatFullTime(d.receivedAt))),
      fact('Answered', statusBadge(d.responseStatus)),
      fact('Body size', `${formatBytes(d.bodySize)} (${d.bodySize} bytes)`),
      providerFacts(d),
      d.remoteAddress ? fact('Sender', h('code', { 'data-testid': 'remote-address' }, d.remoteAddress)) : null,
      fact('Delivery', h('code', { class: 'delivery-id' }, d.id))),
    d.hint ? h('p', { class: 'hint', role: 'note', 'data-testid': 'hint' }, d.hint) : null,
    whyLine(d.id, d.why),
    h('div', { class: 'actions detail-actions' },
      copyButton(() => curlCommand(d, opts.baseURL), d.complete ? 'Copy as curl' : 'Copy as curl (partial body)', { 'data-testid': 'copy-curl' }),
      retryButton,
      editButton,
      opts.retryReason ? h('span', { class: 'retry-reason', id: reasonId, 'data-testid': 'retry-reason' }, opts.retryReason) : null),
    editor,
    opts.message,
    incompleteNotice(d, stored),
    section('Request body', bodyView(d.body, d.bodyBase64, headerValue(d.headers, 'content-type'), d.bodySize === 0)),
    section('Request headers', headersTable(d.headers, 'Request headers')),
    section('Attempts', attemptsTable(d.attempts, opts.newAttemptId), compareView(d, opts.compare)),
    section('Response',
      h('p', {}, 'Status ', statusBadge(d.responseStatus)),
      h('h4', {}, 'Headers'),
      headersTable(d.responseHeaders, 'Response headers'),
      h('h4', {}, 'Body'),
      d.responseBody === null || d.responseBody === undefined
        ? notCapturedLine(d.responseNotCaptured)
        : bodyView(d.responseBody, null, headerValue(d.responseHeaders, 'content-type'), d.responseBody === '')));
}

/**
 * notCapturedLine says that the response body is not shown, and why when
 * the relay did not store it although the Endpoint captures responses
 * (the account's storage quota was used up).
 * @param {string | null | undefined} why
 */
function notCapturedLine(why) {
  if (!why) return h('p', { class: 'muted' }, 'No response body captured.');
  return h('p', { class: 'muted', 'data-testid': 'response-not-captured' }, `Body not stored: ${why}.`);
}

/**
 * incompleteNotice says how much of the body is stored and why, and that a
 * replay of it is not the request the sender made: a body refused unread
 * (413, over --max-body) is not the same as one stored in part (over the
 * capture cap, or a sender that stopped sending).
 * @param {GQL.Delivery} d
 * @param {number} stored
 */
function incompleteNotice(d, stored) {
  if (d.complete) return null;
  const sizes = `stored ${formatBytes(stored)} of ${formatBytes(d.bodySize)}`;
  if (d.bodyUnread) {
    return notice('warn',
      h('strong', {}, 'Refused: the body was larger than the relay accepts'),
      ` — the sender was answered ${d.responseStatus || 413} and the relay stopped reading after ${formatBytes(d.bodySize)}; ` +
        `it was not forwarded, and only its first ${formatBytes(stored)} are stored. Copy as curl replays that part only.`);
  }
  return notice('warn',
    h('strong', {}, `Incomplete: ${sizes} (${stored} of ${d.bodySize} bytes)`),
    ' — only the first part of the body is kept (the capture cap, or the sender stopped sending). ' +
      'Copy as curl replays that part only, not the request the sender made.');
}

/**
 * whyOpen holds the deliveries whose facts are open: the pane is drawn
 * anew when the delivery changes (a retry, a live update), and the facts a
 * reader opened stay open.
 */
/** @type {Set<string>} */
const whyOpen = new Set();

/**
 * whyLine says in one line why the sender got the status it got; the dated
 * facts from the log behind it open below it.
 * @param {string} id
 * @param {GQL.Explanation | null} why
 */
function whyLine(id, why) {
  if (!why) return null;
  const el = h('details', { class: 'why', 'data-testid': 'why' },
    h('summary', {}, h('span', { class: 'why-label' }, 'Why'), ' ',
      h('span', { 'data-testid': 'why-summary' }, why.summary)),
    h('ol', { class: 'why-facts', 'data-testid': 'why-facts' }, (why.facts || []).map((f) => h('li', {},
      h('time', { datetime: f.at, title: f.at }, formatFullTime(f.at)), ' ', f.text))));
  el.open = whyOpen.has(id);
  el.addEventListener('toggle', () => {
    if (el.open) whyOpen.add(id);
    else whyOpen.delete(id);
  });
  return el;
}

/**
 * @param {string} label
 * @param {DomChild} value
 */
function fact(label, value) {
  return h('div', {}, h('dt', {}, label), h('dd', {}, value));
}

/**
 * @param {string} title
 * @param {...DomChild} children
 */
function section(title, ...children) {
  return h('section', { class: 'detail-section' }, h('h3', {}, title), ...children);
}

/**
 * statusBadge shows a status, colored by class, or "pending" when unset.
 * @param {number | null | undefined} status
 */
export function statusBadge(status) {
  const cls = statusClass(status);
  return h('span', { class: `status status-${cls}` }, status === null || status === undefined ? 'pending' : String(status));
}

/**
 * @param {ReadonlyArray<GQL.Header> | null | undefined} headers
 * @param {string} caption
 */
function headersTable(headers, caption) {
  if (!headers || !headers.length) return h('p', { class: 'muted' }, 'No headers.');
  return h('div', { class: 'table-scroll' }, h('table', { class: 'table kv' },
    h('caption', { class: 'sr-only' }, caption),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Name'), h('th', { scope: 'col' }, 'Value'))),
    h('tbody', {}, headers.map((x) => h('tr', {},
      h('th', { scope: 'row' }, x.name),
      h('td', {}, h('code', {}, x.value)))))));
}

/**
 * bodyView shows JSON pretty-printed, text as is, and binary (text null)
 * as a hex dump with a base64 alternative.
 * @param {string | null | undefined} text
 * @param {string | null | undefined} b64
 * @param {string} contentType
 * @param {boolean} empty
 */
function bodyView(text, b64, contentType, empty) {
  if (empty) return h('p', { class: 'muted' }, 'Empty body.');
  if (text !== null && text !== undefined) {
    const json = parseJSON(text, contentType);
    if (json !== undefined) {
      return h('div', {}, h('p', { class: 'body-kind' }, 'JSON, pretty-printed'),
        h('pre', { class: 'code body json', tabindex: '0', 'data-testid': 'body-json' }, highlightJSON(json)));
    }
    return h('div', {}, h('p', { class: 'body-kind' }, 'Text'),
      h('pre', { class: 'code body', tabindex: '0', 'data-testid': 'body-text' }, text));
  }
  const bytes = base64ToBytes(b64);
  const limit = 64 * 1024;
  const pre = h('pre', { class: 'code body hex', tabindex: '0', 'data-testid': 'body-hex' }, hexDump(bytes, limit));
  const hexBtn = h('button', { type: 'button', class: 'btn btn-small', 'aria-pressed': 'true' }, 'Hex');
  const b64Btn = h('button', { type: 'button', class: 'btn btn-small', 'aria-pressed': 'false' }, 'Base64');
  hexBtn.addEventListener('click', () => {
    pre.textContent = hexDump(bytes, limit);
    pre.classList.add('hex');
    hexBtn.setAttribute('aria-pressed', 'true');
    b64Btn.setAttribute('aria-pressed', 'false');
  });
  b64Btn.addEventListener('click', () => {
    pre.textContent = /** @type {string} */ (b64);
    pre.classList.remove('hex');
    hexBtn.setAttribute('aria-pressed', 'false');
    b64Btn.setAttribute('aria-pressed', 'true');
  });
  return h('div', {},
    h('div', { class: 'body-toolbar' },
      h('p', { class: 'body-kind' }, `Binary (${formatBytes(bytes.length)} stored)`),
      h('div', { class: 'segmented', role: 'group', 'aria-label': 'Binary body view' }, hexBtn, b64Btn)),
    bytes.length > limit ? h('p', { class: 'muted' }, `Hex view shows the first ${formatBytes(limit)}.`) : null,
    pre);
}

/**
 * editForm is the editor of a recorded request for an edited retry: method,
 * path, headers (one "Name: Value" per line) and body, prefilled. Sending
 * computes what changed and retries with only that; the relay records it
 * with the attempt and leaves the recorded request as it was.
 * @param {GQL.Delivery} d
 * @param {DetailOptions} opts
 */
function editForm(d, opts) {
  const bodyText = d.body === null || d.body === undefined ? null : d.body;
  const method = h('input', { name: 'edit-method', value: d.method, spellcheck: 'false', autocomplete: 'off' });
  const path = h('input', { name: 'edit-path', value: d.path, spellcheck: 'false', autocomplete: 'off' });
  const headers = h('textarea', { name: 'edit-headers', rows: Math.min(12, (d.headers || []).length + 2), spellcheck: 'false' },
    (d.headers || []).map((x) => `${x.name}: ${x.value}`).join('\n'));
  const body = h('textarea', { name: 'edit-body', rows: 8, spellcheck: 'false', disabled: bodyText === null }, bodyText ?? '');
  const status = h('p', { class: 'form-status', role: 'status', 'data-testid': 'edit-status' });
  const form = h('form', {
    class: 'stack edit-form', 'data-testid': 'edit-form', 'aria-label': 'Edit and retry', hidden: true,
    onsubmit: (/** @type {Event} */ ev) => {
      ev.preventDefault();
      /** @type {GQL.RequestEditInput} */
      const edit = {};
      if (method.value.trim() && method.value.trim() !== d.method) edit.method = method.value.trim().toUpperCase();
      if (path.value.trim() && path.value.trim() !== d.path) edit.path = path.value.trim();
      const parsed = parseHeaderLines(headers.value);
      if (parsed.error) {
        status.textContent = parsed.error;
        return;
      }
      Object.assign(edit, headerChanges(d.headers || [], parsed.headers || []));
      if (bodyText !== null && body.value !== bodyText) edit.body = body.value;
      if (!Object.keys(edit).length) {
        status.textContent = 'Nothing changed: use Retry to send the request as recorded.';
        return;
      }
      status.textContent = '';
      opts.onRetry(edit);
    },
  },
  field('Method', method),
  field('Path', path),
  field('Headers (one "Name: Value" per line)', headers),
  field(bodyText === null ? 'Body (not text: it is sent as recorded)' : 'Body', body),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn btn-primary', 'data-testid': 'send-edited' }, 'Send edited copy')),
  status);
  return form;
}

/**
 * parseHeaderLines reads "Name: Value" lines; error names the first bad one.
 * @param {string} text
 * @returns {{ headers?: GQL.HeaderInput[], error?: string }}
 */
function parseHeaderLines(text) {
  const headers = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].replace(/\r$/, '');
    if (!line.trim()) continue;
    const at = line.indexOf(':');
    if (at <= 0) return { error: `Headers, line ${i + 1}: want "Name: Value".` };
    headers.push({ name: line.slice(0, at).trim(), value: line.slice(at + 1).trim() });
  }
  return { headers };
}

/**
 * headerChanges is what an edit sets and unsets to turn before into after.
 * @param {ReadonlyArray<GQL.HeaderInput>} before
 * @param {ReadonlyArray<GQL.HeaderInput>} after
 * @returns {Pick<GQL.RequestEditInput, 'setHeaders' | 'unsetHeaders'>}
 */
function headerChanges(before, after) {
  const group = (/** @type {ReadonlyArray<GQL.HeaderInput>} */ list) => {
    /** @type {Map<string, GQL.HeaderInput[]>} */
    const m = new Map();
    for (const x of list) {
      const k = x.name.toLowerCase();
      if (!m.has(k)) m.set(k, []);
      m.get(k)?.push(x);
    }
    return m;
  };
  const a = group(before);
  const b = group(after);
  const setHeaders = [];
  const unsetHeaders = [];
  for (const [k, list] of b) {
    const old = a.get(k);
    if (!old || old.map((x) => x.value).join('\n') !== list.map((x) => x.value).join('\n')) setHeaders.push(...list);
  }
  for (const [k, list] of a) if (!b.has(k)) unsetHeaders.push(list[0].name);
  /** @type {Pick<GQL.RequestEditInput, 'setHeaders' | 'unsetHeaders'>} */
  const out = {};
  if (setHeaders.length) out.setHeaders = setHeaders;
  if (unsetHeaders.length) out.unsetHeaders = unsetHeaders;
  return out;
}

/**
 * editText describes an attempt's edit in a few words.
 * @param {Partial<GQL.RequestEdit>} e
 */
function editText(e) {
  const parts = [];
  if (e.method) parts.push(`method ${e.method}`);
  if (e.path) parts.push(`path ${e.path}`);
  for (const x of e.setHeaders || []) parts.push(`set ${x.name}`);
  for (const n of e.unsetHeaders || []) parts.push(`unset ${n}`);
  if (e.bodyBase64 !== null && e.bodyBase64 !== undefined) parts.push('body');
  return `Edited: ${parts.join(', ')}`;
}

/**
 * @param {ReadonlyArray<GQL.Attempt> | null | undefined} attempts
 * @param {string | undefined} newAttemptId
 */
function attemptsTable(attempts, newAttemptId) {
  if (!attempts || !attempts.length) return h('p', { class: 'muted' }, 'No attempt to reach a local target.');
  return h('div', { class: 'table-scroll' }, h('table', { class: 'table attempts', 'data-testid': 'attempts' },
    h('caption', { class: 'sr-only' }, 'Attempts, oldest first'),
    h('thead', {}, h('tr', {}, ['#', 'Started', 'Status', 'Duration', 'Error', 'Kind'].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, attempts.map((a, i) => h('tr', { class: a.id === newAttemptId ? 'is-new' : null, 'data-attempt-id': a.id },
      h('th', { scope: 'row' }, String(i + 1)),
      h('td', {}, h('time', { datetime: a.startedAt }, formatFullTime(a.startedAt))),
      h('td', { 'data-testid': 'attempt-status' }, statusBadge(a.status)),
      h('td', {}, a.durationMs === null || a.durationMs === undefined ? '—' : `${a.durationMs} ms`),
      h('td', { class: 'error-cell' }, a.error || '—'),
      h('td', { 'data-testid': 'attempt-kind' }, attemptKind(a),
        a.possibleDuplicate ? h('span', {
          class: 'badge badge-warn',
          'data-testid': 'attempt-duplicate',
          title: 'Sent again after an earlier attempt was left open (the relay stopped or lost a node before the local answer): your local process may have had this delivery already',
        }, ' possible duplicate') : null,
        a.late ? h('span', { class: 'badge badge-warn', 'data-testid': 'attempt-late', title: 'The local process answered after the relay had answered the sender itself' }, ' late') : null,
        a.edit ? h('span', { class: 'badge', 'data-testid': 'attempt-edited', title: editText(a.edit) }, ' edited') : null,
        a.signature ? h('span', {
          class: `badge ${/ valid$/.test(a.signature) ? 'badge-ok' : 'badge-warn'}`,
          'data-testid': 'attempt-signature',
          title: 'Checked by the agent on the developer\'s machine (relay listen --verify)',
        }, ` signature ${a.signature}`) : null,
        fidelityBadge(a.fidelity)))))));
}

/** attemptKind says what sent an attempt: the queue of a QUEUE Endpoint
 * (its attempts are retries to the API, but no user asked for them), a
 * copy given to another listener of the Endpoint, a user's retry, or the
 * first forward.
 * @param {GQL.Attempt} a
 */
function attemptKind(a) {
  if (a.queued) return 'From the queue';
  if (a.role === 'COPY') return 'Copy';
  return a.retry ? 'Retry' : 'First';
}

/** fidelityBadge shows what the agent's receipt says it handed the local
 * process: identical to what the relay sent, or which parts differ.
 * @param {GQL.Fidelity | null | undefined} f
 */
function fidelityBadge(f) {
  if (!f || f.status === 'NOT_REPORTED') return null;
  const identical = f.status === 'IDENTICAL';
  const parts = (f.differences || []).map((p) => p.toLowerCase().replace('_', ' '));
  return h('span', {
    class: `badge ${identical ? 'badge-ok' : 'badge-warn'}`,
    'data-testid': 'attempt-fidelity',
    title: identical
      ? 'The agent reports handing the local process exactly what the relay sent (request line, headers, body)'
      : 'The agent reports handing the local process something other than what the relay sent',
  }, identical ? ' identical' : ` different: ${parts.join(', ')}`);
}
