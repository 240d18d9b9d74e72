// Signs one payload with each provider's own library (or, for Shopify,
// its documented recipe) and prints the headers as JSON, for the relay's
// signature checks (internal/signatures) to verify.
import Stripe from 'stripe';
import { sign as signGitHub } from '@octokit/webhooks-methods';
import { Webhook } from 'standardwebhooks';
import { createHmac } from 'node:crypto';

const [payload, secret, whsec, timestamp] = process.argv.slice(2);
const stripe = new Stripe('sk_test_unused');
const ts = Number(timestamp);
const out = {
  stripe: { 'Stripe-Signature': stripe.webhooks.generateTestHeaderString({ payload, secret, timestamp: ts }) },
  github: { 'X-Hub-Signature-256': await signGitHub(secret, payload) },
  'standard-webhooks': new Webhook(whsec).sign('msg_1', new Date(ts * 1000), payload),
  shopify: { 'X-Shopify-Hmac-Sha256': createHmac('sha256', secret).update(payload, 'utf8').digest('base64') },
};
console.log(JSON.stringify(out));
