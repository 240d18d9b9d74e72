// Compare two attempts of a delivery: what each sent (the request as
// recorded, or an edited retry's) and what each got back — status, headers
// and body, JSON bodies field by field. The rules are those of
// `relay deliveries diff` (cmd/relay/diff.go), so the console and the CLI
// list the same differences.
import { h, replace, field } from './dom.js';
import { base64ToBytes } from './format.js';

// Past this many differences in one part, a comparison says how many more.
const MAX_CHANGES = 100;
// Texts longer than this are compared by their number of lines.
const MAX_LINES = 1000;

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** payload is a body: its base64 (the bytes compared) and its text, null when not UTF-8. */
function payload(b64) {
  const bytes = base64ToBytes(b64 || '');
  let text = null;
  try {
    text = utf8.decode(bytes);
  } catch {
    text = null;
  }
  return { b64: b64 || '', size: bytes.length, text };
}

/**
 * applyEdit is the request an edited retry made of the recorded one, by
 * the relay's rule (domain RequestEdit.Apply): set headers replace every
 * value of their name in place, unset ones go, a new body updates
 * Content-Length.
 */
export function applyEdit(req, e) {
  if (!e) return req;
  const lower = (s) => s.toLowerCase();
  const unset = new Set((e.unsetHeaders || []).map(lower));
  const set = new Map();
  for (const x of e.setHeaders || []) {
    const k = lower(x.name);
    if (!set.has(k)) set.set(k, []);
    set.get(k).push({ name: x.name, value: x.value });
  }
  const headers = [];
  const placed = new Set();
  for (const x of req.headers) {
    const k = lower(x.name);
    if (unset.has(k)) continue;
    if (set.has(k)) {
      if (!placed.has(k)) headers.push(...set.get(k));
      placed.add(k);
      continue;
    }
    headers.push(x);
  }
  for (const [k, list] of set) {
    if (!placed.has(k)) headers.push(...list);
    placed.add(k);
  }
  let body = req.body;
  if (e.bodyBase64 !== null && e.bodyBase64 !== undefined) {
    body = payload(e.bodyBase64);
    for (let i = 0; i < headers.length; i += 1) {
      if (lower(headers[i].name) === 'content-length') headers[i] = { name: headers[i].name, value: String(body.size) };
    }
  }
  return { method: e.method || req.method, target: e.path || req.target, headers, body };
}

/** recordedRequest is the request as the relay recorded it. */
function recordedRequest(d) {
  return { method: d.method, target: d.path, headers: d.headers || [], body: payload(d.bodyBase64) };
}

/** describeAttempt is an attempt in a few words: "404 (12 ms)", "pending". */
export function describeAttempt(a) {
  let s = a.status === null || a.status === undefined ? 'pending' : String(a.status);
  if (a.durationMs !== null && a.durationMs !== undefined) s += ` (${a.durationMs} ms)`;
  if (a.error) s += ` ${a.error}`;
  return s;
}

/**
 * compareAttempts compares two sides of delivery d: 'original' (the
 * request as recorded) or an attempt's number from 1. It returns
 * {request, response, note} as `relay deliveries diff -o json` does: each
 * change is {where, a, b}, a or b null where that side has none.
 */
export function compareAttempts(d, refA, refB) {
  const recorded = recordedRequest(d);
  const side = (ref) => {
    if (ref === 'original') return { req: recorded, resp: null };
    const at = d.attempts[Number(ref) - 1];
    const r = at.response;
    const resp = r ? { status: r.status, headers: r.headers || [], body: payload(r.bodyBase64), captured: r.captured } : null;
    return { req: applyEdit(recorded, at.edit), resp };
  };
  const a = side(refA);
  const b = side(refB);
  const out = { request: diffRequests(a.req, b.req), response: [], note: '' };
  if (!a.resp || !b.resp) {
    out.note = 'a side has no response (the request as recorded, or an attempt still waiting): only the requests are compared';
  } else {
    out.response = diffResponses(a.resp, b.resp);
    if (!a.resp.captured || !b.resp.captured) {
      out.note = 'response bodies are compared only when the Endpoint captures them (relay endpoints update ENDPOINT --response-capture)';
    }
  }
  return out;
}

function change(where, a, b) {
  return { where, a: a === undefined ? null : a, b: b === undefined ? null : b };
}

function diffRequests(a, b) {
  const out = [];
  if (a.method !== b.method) out.push(change('method', a.method, b.method));
  if (a.target !== b.target) out.push(change('path', a.target, b.target));
  out.push(...diffHeaders(a.headers, b.headers));
  out.push(...diffBodies(a.body, b.body));
  return out;
}

function diffResponses(a, b) {
  const out = [];
  if (a.status !== b.status) out.push(change('status', String(a.status), String(b.status)));
  out.push(...diffHeaders(a.headers, b.headers));
  if (a.captured && b.captured) out.push(...diffBodies(a.body, b.body));
  return out;
}

/** diffHeaders compares headers by name (any case), the values of one name joined in order. */
function diffHeaders(a, b) {
  const values = (list) => {
    const v = new Map();
    const names = new Map();
    for (const x of list) {
      const k = x.name.toLowerCase();
      if (v.has(k)) v.set(k, `${v.get(k)}, ${x.value}`);
      else {
        v.set(k, x.value);
        names.set(k, x.name);
      }
    }
    return [v, names];
  };
  const [va, na] = values(a);
  const [vb, nb] = values(b);
  const out = [];
  for (const k of sortedKeys([...va.keys()], [...vb.keys()])) {
    if (va.has(k) && vb.has(k) && va.get(k) === vb.get(k)) continue;
    out.push(change(`header ${na.get(k) || nb.get(k)}`, va.get(k), vb.get(k)));
  }
  return out;
}

/** diffBodies compares field by field when both are JSON, line by line when both are text, by size otherwise. */
function diffBodies(a, b) {
  if (a.b64 === b.b64) return [];
  const ja = parse(a.text);
  const jb = parse(b.text);
  if (ja.ok && jb.ok) {
    const out = [];
    diffValues('body $', ja.value, jb.value, out);
    if (!out.length) out.push(change('body (the same JSON, formatted differently)', `${a.size} bytes`, `${b.size} bytes`));
    return capChanges(out);
  }
  if (a.text !== null && b.text !== null) return capChanges(diffLines(a.text.split('\n'), b.text.split('\n')));
  return [change('body (binary, differs)', `${a.size} bytes`, `${b.size} bytes`)];
}

function parse(text) {
  if (text === null) return { ok: false };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/** diffValues lists the paths where two JSON values differ. */
function diffValues(path, a, b, out) {
  if (out.length > MAX_CHANGES) return;
  if (isObject(a) && isObject(b)) {
    for (const k of sortedKeys(Object.keys(a), Object.keys(b))) {
      const p = `${path}.${k}`;
      const inA = Object.hasOwn(a, k);
      const inB = Object.hasOwn(b, k);
      if (inA && inB) diffValues(p, a[k], b[k], out);
      else if (inA) out.push(change(p, jsonText(a[k]), null));
      else out.push(change(p, null, jsonText(b[k])));
    }
    return;
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); i += 1) {
      const p = `${path}[${i}]`;
      if (i < a.length && i < b.length) diffValues(p, a[i], b[i], out);
      else if (i < a.length) out.push(change(p, jsonText(a[i]), null));
      else out.push(change(p, null, jsonText(b[i])));
    }
    return;
  }
  const x = jsonText(a);
  const y = jsonText(b);
  if (x !== y) out.push(change(path, x, y));
}

/** jsonText writes a value as Go's encoding/json does, which escapes <, >, & and the line separators. */
function jsonText(v) {
  return JSON.stringify(v).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** sortedKeys is the keys of both lists together, once each, sorted as Go sorts strings (by code point). */
function sortedKeys(a, b) {
  return [...new Set([...a, ...b])].sort((x, y) => {
    const cx = [...x];
    const cy = [...y];
    for (let i = 0; i < Math.min(cx.length, cy.length); i += 1) {
      if (cx[i] !== cy[i]) return cx[i].codePointAt(0) - cy[i].codePointAt(0);
    }
    return cx.length - cy.length;
  });
}

/**
 * diffLines lists the lines one text has and the other has not, by the
 * longest common subsequence. Between two common lines, the k-th line
 * removed and the k-th added are one change (a line changed, not a line
 * removed and another added); the lines left over follow, removed first,
 * as diff prints them. cmd/relay/diff.go does the same.
 * @param {string[]} a
 * @param {string[]} b
 */
function diffLines(a, b) {
  if (a.length > MAX_LINES || b.length > MAX_LINES) {
    return [change('body (text, differs)', `${a.length} lines`, `${b.length} lines`)];
  }
  const lcs = Array.from({ length: a.length + 1 }, () => new Int32Array(b.length + 1));
  for (let i = a.length - 1; i >= 0; i -= 1) {
    for (let j = b.length - 1; j >= 0; j -= 1) {
      lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const out = [];
  /** @type {number[]} */
  let removed = [];
  /** @type {number[]} */
  let added = [];
  const flush = () => {
    const n = Math.min(removed.length, added.length);
    for (let k = 0; k < n; k += 1) {
      const ai = removed[k];
      const bj = added[k];
      const where = ai === bj ? `body line ${ai + 1}` : `body line ${ai + 1} → ${bj + 1}`;
      out.push(change(where, a[ai], b[bj]));
    }
    for (const ai of removed.slice(n)) out.push(change(`body line ${ai + 1}`, a[ai], null));
    for (const bj of added.slice(n)) out.push(change(`body line ${bj + 1}`, null, b[bj]));
    removed = [];
    added = [];
  };
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      flush();
      i += 1;
      j += 1;
    } else if (i < a.length && (j === b.length || lcs[i + 1][j] >= lcs[i][j + 1])) {
      removed.push(i);
      i += 1;
    } else {
      added.push(j);
      j += 1;
    }
  }
  flush();
  return out;
}

function capChanges(list) {
  if (list.length <= MAX_CHANGES) return list;
  return [...list.slice(0, MAX_CHANGES), change('…', `${list.length - MAX_CHANGES} more differences`, null)];
}

// ---- the view ----------------------------------------------------------------

/**
 * chosen holds, per delivery, whether its comparison is open and the sides
 * a reader picked: the pane is drawn anew on every live update, and a
 * comparison someone is reading stays as it was. Sides not picked follow
 * the default, the last two attempts.
 */
const chosen = new Map();

/**
 * compareView is the Compare attempts block of delivery d's attempts: two
 * sides to pick (the request as recorded, or any attempt) and their
 * differences. It needs two attempts or more, each with its response.
 */
export function compareView(d) {
  const attempts = d.attempts || [];
  if (attempts.length < 2) return null;
  const mine = chosen.get(d.id) || { open: false, a: '', b: '' };
  const n = attempts.length;
  const refA = mine.a || String(n - 1);
  const refB = mine.b || String(n);
  const label = (ref) => (ref === 'original' ? 'the request as recorded'
    : `attempt ${ref}: ${describeAttempt(attempts[Number(ref) - 1])}${attempts[Number(ref) - 1].edit ? ', edited' : ''}`);
  const options = (selected) => [
    h('option', { value: 'original', selected: selected === 'original' }, 'Request as recorded'),
    attempts.map((a, i) => h('option', { value: String(i + 1), selected: selected === String(i + 1) },
      `Attempt ${i + 1} · ${a.status ?? 'pending'}${a.edit ? ' · edited' : ''}`)),
  ];
  const selA = h('select', { name: 'compare-a', 'data-testid': 'compare-a' }, options(refA));
  const selB = h('select', { name: 'compare-b', 'data-testid': 'compare-b' }, options(refB));
  const result = h('div', { class: 'compare-result', 'data-testid': 'compare-result', 'aria-live': 'polite' });
  const show = () => {
    const r = compareAttempts(d, selA.value, selB.value);
    replace(result,
      h('p', { class: 'muted small', 'data-testid': 'compare-sides' }, `Comparing ${label(selA.value)} with ${label(selB.value)}.`),
      h('h4', {}, 'Request'),
      changesTable(r.request, 'request'),
      r.note.startsWith('a side has no response') ? null : [h('h4', {}, 'Response'), changesTable(r.response, 'response')],
      r.note ? h('p', { class: 'muted small', 'data-testid': 'compare-note' }, `(${r.note})`) : null);
  };
  const pick = (a, b) => {
    selA.value = a;
    selB.value = b;
    chosen.set(d.id, { ...(chosen.get(d.id) || { open: true }), a, b });
    show();
  };
  selA.addEventListener('change', () => pick(selA.value, selB.value));
  selB.addEventListener('change', () => pick(selA.value, selB.value));
  // The edit of the latest edited retry, at one click: the recorded
  // request against what that retry sent.
  const lastEdited = attempts.map((a, i) => (a.edit ? i + 1 : 0)).filter(Boolean).pop();
  const presets = h('div', { class: 'actions compare-presets' },
    h('button', { type: 'button', class: 'btn btn-small', 'data-testid': 'compare-last-two', onclick: () => pick(String(n - 1), String(n)) }, 'Last two'),
    lastEdited ? h('button', {
      type: 'button', class: 'btn btn-small', 'data-testid': 'compare-edit',
      onclick: () => pick('original', String(lastEdited)),
    }, `Recorded vs edited attempt ${lastEdited}`) : null);
  const el = h('details', { class: 'compare', 'data-testid': 'compare' },
    h('summary', {}, 'Compare attempts'),
    h('div', { class: 'compare-pick' }, field('Compare', selA), field('with', selB), presets),
    result);
  el.open = mine.open;
  if (el.open) show();
  el.addEventListener('toggle', () => {
    chosen.set(d.id, { ...(chosen.get(d.id) || { a: '', b: '' }), open: el.open });
    if (el.open) show();
  });
  return el;
}

/** changesTable lists changes: where, each side's value, and whether it was added, removed or changed. */
function changesTable(changes, part) {
  if (!changes.length) return h('p', { class: 'muted', 'data-testid': `compare-same-${part}` }, 'The same.');
  const value = (v) => (v === null ? h('span', { class: 'muted' }, '(none)') : h('code', {}, v));
  return h('div', { class: 'table-scroll' }, h('table', { class: 'table compare-table', 'data-testid': `compare-${part}` },
    h('caption', { class: 'sr-only' }, `Differences of the ${part}`),
    h('thead', {}, h('tr', {}, ['Where', 'A', 'B'].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, changes.map((c) => {
      const kind = c.where === '…' ? 'more' : c.a === null ? 'added' : c.b === null ? 'removed' : 'changed';
      return h('tr', { class: `change-${kind}`, 'data-where': c.where },
        h('th', { scope: 'row' }, h('code', {}, c.where), ' ', h('span', { class: 'change-kind' }, kind)),
        h('td', {}, value(c.a)),
        h('td', {}, value(c.b)));
    }))));
}
