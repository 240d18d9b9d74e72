// @ts-check
// A recognised provider's delivery (GitHub, Stripe, Shopify…): its name,
// event type and the provider's own delivery id, and a mark when the
// provider sent that delivery id more than once (a redelivery).
import { h } from './dom.js';

/**
 * providerBadge is a history row's badge: the provider's event, marked when sent again.
 * @param {Pick<GQL.Delivery, 'provider' | 'duplicates'>} d
 */
export function providerBadge(d) {
  if (!d.provider) return null;
  const what = [d.provider.name, d.provider.eventType].filter(Boolean).join(' ');
  const dup = d.duplicates > 0;
  return h('span', {
    class: `badge provider${dup ? ' badge-warn duplicate' : ''}`,
    title: dup
      ? `${d.provider.name} sent delivery ${d.provider.deliveryId} ${d.duplicates + 1} times`
      : `${d.provider.name} delivery ${d.provider.deliveryId || '(no id)'}`,
  }, dup ? `${what} ×${d.duplicates + 1}` : what);
}

/**
 * providerFacts is the detail pane's Provider fact, null for a request no
 * provider is recognised in: name, event type, the provider's delivery id,
 * and how many times it sent that id.
 * @param {Pick<GQL.Delivery, 'provider' | 'duplicates'>} d
 */
export function providerFacts(d) {
  if (!d.provider) return null;
  const p = d.provider;
  return h('div', {},
    h('dt', {}, 'Provider'),
    h('dd', { 'data-testid': 'provider' },
      h('span', { 'data-testid': 'provider-name' }, p.name),
      p.eventType ? [' ', h('span', { class: 'badge', 'data-testid': 'provider-event' }, p.eventType)] : null,
      p.deliveryId ? [' delivery ', h('code', { 'data-testid': 'provider-delivery' }, p.deliveryId)] : ' (no delivery id)',
      d.duplicates > 0 ? [' ', h('span', {
        class: 'badge badge-warn', 'data-testid': 'provider-duplicates',
        title: 'The provider sent this delivery id again: a redelivery, each copy recorded',
      }, `sent ${d.duplicates + 1} times`)] : null));
}
