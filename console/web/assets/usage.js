// @ts-check
// The usage part of the settings page: what the account stores and
// receives, beside the limits the relay's operator set. The numbers come
// from the API (me { usage }); the page only renders them.
import { h, replace } from './dom.js';
import { request, describeError } from './graphql.js';
import { USAGE } from './api.js';
import { notice } from './ui.js';
import { formatBytes } from './format.js';

/** @type {Record<string, string>} */
const REASONS = { storage: 'storage quota used up (507)', rate: 'rate exceeded (429)' };

/**
 * usageSection renders the usage card; returns {element, dispose}.
 * @returns {{ element: HTMLElement, dispose(): void }}
 */
export function usageSection() {
  let disposed = false;
  const section = h('section', { class: 'card', 'aria-labelledby': 'usage-title', 'data-testid': 'usage' },
    h('h2', { id: 'usage-title' }, 'Usage'), h('p', { class: 'muted' }, 'Loading usage…'));
  load();

  async function load() {
    try {
      const data = await request(USAGE);
      if (disposed || !data.me) return;
      render(data.me.usage);
    } catch (err) {
      if (!disposed) replace(section, h('h2', { id: 'usage-title' }, 'Usage'), notice('error', describeError(err)));
    }
  }

  /** @param {GQL.AccountUsage} u */
  function render(u) {
    const quota = u.storageQuota == null ? 'unlimited' : formatBytes(u.storageQuota);
    const full = u.storageQuota != null && u.storedBytes >= u.storageQuota;
    const refused = u.refusals.filter((r) => r.count > 0);
    const row = (/** @type {string} */ label, /** @type {string} */ value, /** @type {string} */ id) =>
      h('tr', {}, h('th', { scope: 'row' }, label), h('td', { 'data-testid': id }, value));
    replace(section,
      h('h2', { id: 'usage-title' }, 'Usage'),
      h('p', { class: 'muted' }, 'What this account’s Endpoints store and receive, and the limits this relay’s operator set.'),
      full ? notice('error', 'The storage quota is used up: your Endpoints answer 507 and record nothing until deliveries are deleted or the operator raises it.') : null,
      h('div', { class: 'table-scroll' }, h('table', { class: 'table' }, h('tbody', {},
        row('Stored', `${formatBytes(u.storedBytes)} of ${quota}`, 'usage-stored'),
        row('Rate', u.rate == null ? 'unlimited' : `${u.rate} across all Endpoints`, 'usage-rate'),
        row('Deliveries, last 24 hours', String(u.deliveriesLastDay), 'usage-day'),
        row('Deliveries kept', String(u.deliveries), 'usage-total'),
        row('Refused by the quota', refused.length
          ? refused.map((r) => `${r.count} ${REASONS[r.reason] || r.reason}`).join(', ')
          : 'none', 'usage-refused')))));
  }

  return { element: section, dispose() { disposed = true; } };
}
