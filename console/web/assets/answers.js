// @ts-check
// The settings of an address's own answer and handshakes (docs/answers.md).
import { h, field, uid } from './dom.js';

/**
 * HANDSHAKES are the providers' verification requests the relay can answer.
 * @type {Array<[GQL.Handshake, string]>}
 */
export const HANDSHAKES = [
  ['SLACK', 'Slack'], ['META', 'Meta'], ['MSGRAPH', 'Microsoft Graph'], ['DROPBOX', 'Dropbox'], ['ZOOM', 'Zoom'],
];

/**
 * headersText shows headers one per line, as "Name: value".
 * @param {ReadonlyArray<GQL.Header> | null | undefined} headers
 */
function headersText(headers) {
  return (headers || []).map((x) => `${x.name}: ${x.value}`).join('\n');
}

/**
 * parseHeaders reads "Name: value" lines; a line without a colon is an error naming it.
 * @param {string} text
 * @returns {GQL.HeaderInput[]}
 */
function parseHeaders(text) {
  const out = [];
  for (const [i, line] of text.split('\n').entries()) {
    if (line.trim() === '') continue;
    const at = line.indexOf(':');
    if (at < 1) throw new Error(`Answer headers, line ${i + 1}: want "Name: value"`);
    out.push({ name: line.slice(0, at).trim(), value: line.slice(at + 1).trim() });
  }
  return out;
}

/**
 * answerFields builds the inputs of an address's answer and handshakes, and
 * reads them back as {answer, handshakes} (AnswerInput, HandshakesInput).
 * Secrets are never shown: an empty secret field keeps the one set.
 * @param {Pick<GQL.AddressAnswer, 'status' | 'headers' | 'body'> | null | undefined} answer
 * @param {Pick<GQL.Handshakes, 'enabled' | 'metaVerifyTokenSet' | 'zoomSecretSet' | 'inProxy'> | null | undefined} handshakes
 * @param {{ proxy?: boolean }} [options]
 */
export function answerFields(answer, handshakes, { proxy = true } = {}) {
  const a = answer || { status: 204, headers: [], body: '' };
  const hs = handshakes || { enabled: [], metaVerifyTokenSet: false, zoomSecretSet: false, inProxy: /** @type {GQL.HandshakeSide} */ ('LOCAL') };
  const status = h('input', { type: 'number', name: 'answerStatus', min: '200', max: '599', required: true, value: String(a.status) });
  const headers = h('textarea', { name: 'answerHeaders', rows: '3', spellcheck: 'false', placeholder: 'Content-Type: application/json' });
  headers.value = headersText(a.headers);
  const body = h('textarea', { name: 'answerBody', rows: '4', spellcheck: 'false', maxlength: String(64 * 1024) });
  body.value = a.body || '';
  const boxes = HANDSHAKES.map(([value, label]) => {
    const box = h('input', { type: 'checkbox', name: `handshake-${value}`, value, id: uid('hs'), checked: hs.enabled.includes(value) });
    return { value, box, element: h('div', { class: 'field field-check' }, box, h('label', { for: box.id }, label)) };
  });
  const meta = h('input', {
    type: 'password', name: 'metaVerifyToken', autocomplete: 'off', spellcheck: 'false',
    placeholder: hs.metaVerifyTokenSet ? 'set; leave empty to keep' : 'the verify token given to Meta',
  });
  const zoom = h('input', {
    type: 'password', name: 'zoomSecret', autocomplete: 'off', spellcheck: 'false',
    placeholder: hs.zoomSecretSet ? 'set; leave empty to keep' : "the Zoom app's secret token",
  });
  const inProxy = h('select', { name: 'handshakesInProxy' },
    h('option', { value: 'LOCAL', selected: hs.inProxy !== 'RELAY' }, 'your local process'),
    h('option', { value: 'RELAY', selected: hs.inProxy === 'RELAY' }, 'the relay'));
  const element = h('fieldset', { class: 'stack answers', 'data-testid': 'answer-settings' },
    h('legend', {}, 'Own answer and handshakes'),
    h('div', { class: 'grid-fields' },
      field('Answer status', status, '204 with no header and no body is the default.'),
      field('Answer headers', headers, 'One per line: Name: value.'),
      field('Answer body', body, 'At most 64 KiB.')),
    h('div', { class: 'grid-fields', role: 'group', 'aria-label': 'Handshakes the relay answers' }, boxes.map((b) => b.element)),
    h('div', { class: 'grid-fields' },
      field('Meta verify token', meta, 'Needed by the Meta handshake; never shown back.'),
      field('Zoom secret token', zoom, 'Needed by the Zoom handshake; never shown back.'),
      proxy ? field('In PROXY mode, handshakes are answered by', inProxy) : null));
  return {
    element,
    /** @returns {{ answer: GQL.AnswerInput, handshakes: GQL.HandshakesInput }} */
    value() {
      /** @type {{ answer: GQL.AnswerInput, handshakes: GQL.HandshakesInput }} */
      const out = {
        answer: { status: Number(status.value), headers: parseHeaders(headers.value), body: body.value },
        handshakes: { enabled: boxes.filter((b) => b.box.checked).map((b) => b.value) },
      };
      if (meta.value !== '') out.handshakes.metaVerifyToken = meta.value;
      if (zoom.value !== '') out.handshakes.zoomSecret = zoom.value;
      if (proxy) out.handshakes.inProxy = /** @type {GQL.HandshakeSide} */ (inProxy.value);
      return out;
    },
  };
}
