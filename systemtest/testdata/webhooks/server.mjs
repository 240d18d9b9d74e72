// A local process behind the relay that verifies webhook signatures with
// the providers' own libraries, rebuilding the public URL from the
// headers the relay's agent adds, as a framework that trusts its proxy
// does. It prints "listening <port>" once it accepts connections.
import http from 'node:http';
import twilio from 'twilio';
import Stripe from 'stripe';
import { verify } from '@octokit/webhooks-methods';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const twilioToken = env('TWILIO_AUTH_TOKEN');
const stripeSecret = env('STRIPE_WEBHOOK_SECRET');
const githubSecret = env('GITHUB_WEBHOOK_SECRET');
const stripe = new Stripe('sk_test_relay_systemtest');

// publicURL is what express's req.protocol and req.get('host') give
// with 'trust proxy' set: X-Forwarded-Proto and X-Forwarded-Host.
const publicURL = (req) => `${req.headers['x-forwarded-proto']}://${req.headers['x-forwarded-host']}${req.url}`;

const answer = (res, status, text) => {
  res.writeHead(status, { 'Content-Type': 'text/plain' });
  res.end(text + '\n');
};

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', async () => {
    const raw = Buffer.concat(chunks);
    const path = req.url.split('?')[0];
    try {
      if (path === '/twilio') {
        const params = Object.fromEntries(new URLSearchParams(raw.toString('utf8')));
        const url = publicURL(req);
        const ok = twilio.validateRequest(twilioToken, req.headers['x-twilio-signature'] || '', url, params);
        return ok ? answer(res, 200, `twilio ok ${url}`) : answer(res, 403, `twilio signature invalid for ${url}`);
      }
      if (path === '/stripe') {
        const event = stripe.webhooks.constructEvent(raw, req.headers['stripe-signature'] || '', stripeSecret);
        return answer(res, 200, `stripe ok ${event.id}`);
      }
      if (path === '/github') {
        const ok = await verify(githubSecret, raw.toString('utf8'), req.headers['x-hub-signature-256'] || '');
        return ok ? answer(res, 200, 'github ok') : answer(res, 401, 'github signature invalid');
      }
      answer(res, 404, 'no such hook');
    } catch (err) {
      answer(res, 400, `${path}: ${err.message}`);
    }
  });
});

server.listen(0, '127.0.0.1', () => {
  console.log(`listening ${server.address().port}`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
