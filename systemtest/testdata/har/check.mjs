// Loads a HAR file the way HAR tools do and checks it against HAR 1.2 with
// har-validator (systemtest/cli_export_test.go). Prints what a tool reads
// from each entry, bodies as the bytes they decode to (base64 here), or
// the validator's errors and exit code 1.
import { readFileSync } from 'node:fs';
import validator from 'har-validator';

const har = JSON.parse(readFileSync(process.argv[2], 'utf8'));
try {
  await validator.har(har);
} catch (err) {
  console.log(JSON.stringify({ invalid: err.errors ?? String(err) }));
  process.exit(1);
}

// The bytes a HAR text stands for: base64 when its encoding says so.
const bytes = (text, encoding) =>
  text === undefined ? null : Buffer.from(text, encoding === 'base64' ? 'base64' : 'utf8').toString('base64');

console.log(JSON.stringify(har.log.entries.map((e) => ({
  id: e._relay.deliveryId,
  startedDateTime: e.startedDateTime,
  method: e.request.method,
  url: e.request.url,
  httpVersion: e.request.httpVersion,
  headers: e.request.headers.map((h) => [h.name, h.value]),
  queryString: e.request.queryString.map((q) => [q.name, q.value]),
  body: e.request.postData ? bytes(e.request.postData.text, e.request.postData.encoding) : null,
  status: e.response.status,
  responseBody: bytes(e.response.content.text, e.response.content.encoding),
  complete: e._relay.complete,
  comment: e.comment ?? '',
}))));
