// A third-party agent: the graphql-ws client library over the ws package,
// speaking only graphql-transport-ws, as anyone could write against the
// relay's API. It serves one Endpoint: every forward request is answered
// 200 with a JSON body naming the request, through completeForward.
//
//   node agent.mjs ws://127.0.0.1:PORT/graphql TOKEN ENDPOINT_ID
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';

const [url, token, endpointId] = process.argv.slice(2);
const client = createClient({
  url,
  webSocketImpl: WebSocket,
  connectionParams: { Authorization: `Bearer ${token}` },
  retryAttempts: 0,
});

const forwards = client.iterate({
  query: `subscription($e: ID!){ forwardRequests(endpointId: $e){ attemptId deliveryId method path headers{ name value } bodyBase64 } }`,
  variables: { e: endpointId },
});
console.log('subscribed');
for await (const result of forwards) {
  if (result.errors) {
    console.error('subscription errors', JSON.stringify(result.errors));
    process.exit(1);
  }
  const fr = result.data.forwardRequests;
  const body = Buffer.from(fr.bodyBase64, 'base64');
  const answer = JSON.stringify({ agent: 'graphql-ws', method: fr.method, path: fr.path, bytes: body.length });
  const done = await new Promise((resolve, reject) => {
    let out;
    client.subscribe({
      query: `mutation($input: CompleteForwardInput!){ completeForward(input: $input) }`,
      variables: { input: { attemptId: fr.attemptId, status: 200, durationMs: 1,
        headers: [{ name: 'Content-Type', value: 'application/json' }],
        bodyBase64: Buffer.from(answer).toString('base64') } },
    }, { next: (r) => { out = r; }, error: reject, complete: () => resolve(out) });
  });
  if (done.errors || done.data.completeForward !== true) {
    console.error('completeForward', JSON.stringify(done));
    process.exit(1);
  }
  console.log(`completed ${fr.attemptId}`);
}
