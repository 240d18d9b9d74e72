// @ts-check
// Compare two attempts of a delivery: what each sent (the request as
// recorded, or an edited retry's) and what each got back. The comparison
// is the relay's (Delivery.compare, the one `relay deliveries diff`
// prints): this module only asks for it and renders it.
import { h, replace, field } from './dom.js';
import { request, describeError } from './graphql.js';
import { COMPARE } from './api.js';

/**
 * describeAttempt is an attempt in a few words: "404 (12 ms)", "pending".
 * @param {Pick<GQL.Attempt, 'status' | 'durationMs' | 'error'>} a
 */
export function describeAttempt(a) {
  let s = a.status === null || a.status === undefined ? 'pending' : String(a.status);
  if (a.durationMs !== null && a.durationMs !== undefined) s += ` (${a.durationMs} ms)`;
  if (a.error) s += ` ${a.error}`;
  return s;
}

/**
 * A change between two sides of a comparison: a or b is null where that
 * side has none.
 * @typedef {{ where: string, a: string | null, b: string | null }} SideChange
 */

/**
 * A comparison as compareView renders it.
 * @typedef {{ request: SideChange[], response: SideChange[], responseCompared: boolean, note: string }} Comparison
 */

/**
 * How compareView asks for a comparison: of delivery id, side a against b.
 * @typedef {(id: string, a: string, b: string) => Promise<Pick<GQL.AttemptComparison, 'request' | 'response' | 'responseCompared' | 'note'>>} Ask
 */

/**
 * askRelay asks the relay for its comparison (Delivery.compare) as the signed-in page.
 * @type {Ask}
 */
async function askRelay(id, refA, refB) {
  const data = await request(COMPARE, { id, a: refA, b: refB });
  if (!data.delivery) throw new Error('This request is no longer in the history.');
  return data.delivery.compare;
}

/**
 * fetchComparison asks for the relay's comparison of two sides of delivery
 * id: 'original' (the request as recorded) or an attempt's number from 1.
 * ask is how (the desktop asks through its Go side); by default the page
 * asks the relay. It returns {request, response, responseCompared, note}:
 * each change is {where, a, b}, a or b null where that side has none.
 * @param {string} id
 * @param {string} refA
 * @param {string} refB
 * @param {Ask} [ask]
 * @returns {Promise<Comparison>}
 */
export async function fetchComparison(id, refA, refB, ask = askRelay) {
  const c = await ask(id, refA, refB);
  const changes = (/** @type {GQL.Change[]} */ list) => list.map((x) => ({ where: x.where, a: x.before, b: x.after }));
  return { request: changes(c.request), response: changes(c.response), responseCompared: c.responseCompared, note: c.note || '' };
}

/**
 * answers keeps the comparisons already fetched, by delivery, sides and
 * attempts' outcomes: the pane is drawn anew on every live update, and an
 * unchanged comparison is not asked for again.
 */
/** @type {Map<string, Promise<Comparison>>} */
const answers = new Map();
const MAX_ANSWERS = 50;

/**
 * @param {Pick<GQL.Delivery, 'id' | 'attempts'>} d
 * @param {string} refA
 * @param {string} refB
 * @param {Ask} [ask]
 * @returns {Promise<Comparison>}
 */
function comparison(d, refA, refB, ask) {
  const key = [d.id, refA, refB, ...(d.attempts || []).map((a) => `${a.id}:${a.status ?? ''}`)].join('|');
  if (!answers.has(key)) {
    if (answers.size >= MAX_ANSWERS) answers.clear();
    const p = fetchComparison(d.id, refA, refB, ask);
    p.catch(() => answers.delete(key)); // asked again next time
    answers.set(key, p);
  }
  return /** @type {Promise<Comparison>} */ (answers.get(key));
}

// ---- the view ----------------------------------------------------------------

/**
 * chosen holds, per delivery, whether its comparison is open and the sides
 * a reader picked: the pane is drawn anew on every live update, and a
 * comparison someone is reading stays as it was. Sides not picked follow
 * the default, the last two attempts.
 */
/** @type {Map<string, { open: boolean, a: string, b: string }>} */
const chosen = new Map();

/**
 * compareView is the Compare attempts block of delivery d's attempts: two
 * sides to pick (the request as recorded, or any attempt) and their
 * differences, as the relay answers them; ask (optional) is how to ask it
 * (see fetchComparison). It needs two attempts or more.
 * @param {Pick<GQL.Delivery, 'id' | 'attempts'>} d
 * @param {Ask} [ask]
 */
export function compareView(d, ask) {
  const attempts = d.attempts || [];
  if (attempts.length < 2) return null;
  const mine = chosen.get(d.id) || { open: false, a: '', b: '' };
  const n = attempts.length;
  const refA = mine.a || String(n - 1);
  const refB = mine.b || String(n);
  const label = (/** @type {string} */ ref) => (ref === 'original' ? 'the request as recorded'
    : `attempt ${ref}: ${describeAttempt(attempts[Number(ref) - 1])}${attempts[Number(ref) - 1].edit ? ', edited' : ''}`);
  const options = (/** @type {string} */ selected) => [
    h('option', { value: 'original', selected: selected === 'original' }, 'Request as recorded'),
    attempts.map((a, i) => h('option', { value: String(i + 1), selected: selected === String(i + 1) },
      `Attempt ${i + 1} · ${a.status ?? 'pending'}${a.edit ? ' · edited' : ''}`)),
  ];
  const selA = h('select', { name: 'compare-a', 'data-testid': 'compare-a' }, options(refA));
  const selB = h('select', { name: 'compare-b', 'data-testid': 'compare-b' }, options(refB));
  const result = h('div', { class: 'compare-result', 'data-testid': 'compare-result', 'aria-live': 'polite' });
  let shown = 0; // the latest comparison asked for: an older answer is dropped
  const show = async () => {
    const a = selA.value;
    const b = selB.value;
    const sides = h('p', { class: 'muted small', 'data-testid': 'compare-sides' }, `Comparing ${label(a)} with ${label(b)}.`);
    const mine = ++shown;
    replace(result, sides, h('p', { class: 'muted', 'data-testid': 'compare-loading' }, 'Comparing…'));
    let r;
    try {
      r = await comparison(d, a, b, ask);
    } catch (err) {
      if (mine === shown) replace(result, sides, h('p', { class: 'error', role: 'alert', 'data-testid': 'compare-error' }, describeError(err)));
      return;
    }
    if (mine !== shown) return;
    replace(result,
      sides,
      h('h4', {}, 'Request'),
      changesTable(r.request, 'request'),
      r.responseCompared ? [h('h4', {}, 'Response'), changesTable(r.response, 'response')] : null,
      r.note ? h('p', { class: 'muted small', 'data-testid': 'compare-note' }, `(${r.note})`) : null);
  };
  const pick = (/** @type {string} */ a, /** @type {string} */ b) => {
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

/**
 * changesTable lists changes: where, each side's value, and whether it was added, removed or changed.
 * @param {SideChange[]} changes
 * @param {string} part
 */
function changesTable(changes, part) {
  if (!changes.length) return h('p', { class: 'muted', 'data-testid': `compare-same-${part}` }, 'The same.');
  const value = (/** @type {string | null} */ v) => (v === null ? h('span', { class: 'muted' }, '(none)') : h('code', {}, v));
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
