// @ts-check
// Formatting helpers shared by the pages. Pure functions, no DOM, except
// highlightJSON which returns nodes.

/**
 * formatBytes renders a size in binary units: 512 B, 256 KiB, 1.5 MiB.
 * @param {number | null | undefined} n
 */
export function formatBytes(n) {
  if (n === null || n === undefined) return '';
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB'];
  let v = n;
  let u = -1;
  do {
    v /= 1024;
    u += 1;
  } while (v >= 1024 && u < units.length - 1);
  const text = v >= 100 || Number.isInteger(v) ? Math.round(v).toString() : v.toFixed(1).replace(/\.0$/, '');
  return `${text} ${units[u]}`;
}

// 24-hour times keep the time column narrow and sortable by eye.
const timeFmt = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' });
const dateTimeFmt = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
const fullFmt = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });

/**
 * formatTime shows the time of day for today, else a short date and time.
 * @param {string | null | undefined} iso
 */
export function formatTime(iso) {
  const d = new Date(/** @type {string} */ (iso));
  if (Number.isNaN(d.getTime())) return String(iso || '');
  const now = new Date();
  const today = d.toDateString() === now.toDateString();
  return today ? timeFmt.format(d) : dateTimeFmt.format(d);
}

/**
 * formatFullTime is the long form used in titles and the detail pane.
 * @param {string | null | undefined} iso
 */
export function formatFullTime(iso) {
  const d = new Date(/** @type {string} */ (iso));
  return Number.isNaN(d.getTime()) ? String(iso || '') : fullFmt.format(d);
}

/**
 * statusClass maps a status to '2xx'…'5xx', or 'none' while unanswered.
 * @param {number | null | undefined} status
 */
export function statusClass(status) {
  if (status === null || status === undefined) return 'none';
  return `${Math.floor(status / 100)}xx`;
}

/**
 * base64ToBytes decodes standard base64.
 * @param {string | null | undefined} b64
 */
export function base64ToBytes(b64) {
  const bin = atob(b64 || '');
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i += 1) out[i] = bin.charCodeAt(i);
  return out;
}

/**
 * storedLength is the byte length of a base64 payload without decoding it.
 * @param {string | null | undefined} b64
 */
export function storedLength(b64) {
  if (!b64) return 0;
  const pad = b64.endsWith('==') ? 2 : b64.endsWith('=') ? 1 : 0;
  return (b64.length / 4) * 3 - pad;
}

/**
 * hexDump renders bytes as offset, 16 hex bytes and their printable ASCII.
 * @param {Uint8Array} bytes
 */
export function hexDump(bytes, limit = 64 * 1024) {
  const n = Math.min(bytes.length, limit);
  const lines = [];
  for (let off = 0; off < n; off += 16) {
    const row = bytes.subarray(off, Math.min(off + 16, n));
    let hex = '';
    let ascii = '';
    for (let i = 0; i < 16; i += 1) {
      if (i < row.length) {
        hex += row[i].toString(16).padStart(2, '0') + ' ';
        ascii += row[i] >= 0x20 && row[i] < 0x7f ? String.fromCharCode(row[i]) : '.';
      } else {
        hex += '   ';
      }
      if (i === 7) hex += ' ';
    }
    lines.push(`${off.toString(16).padStart(8, '0')}  ${hex} |${ascii}|`);
  }
  return lines.join('\n');
}

/**
 * headerValue returns the first value of a header, case-insensitively.
 * @param {ReadonlyArray<{ name: string, value: string }> | null | undefined} headers
 * @param {string} name
 */
export function headerValue(headers, name) {
  const lower = name.toLowerCase();
  const h = (headers || []).find((x) => x.name.toLowerCase() === lower);
  return h ? h.value : '';
}

/**
 * parseJSON returns the parsed body when it is JSON (by content type or by
 * shape), else undefined.
 * @param {string | null | undefined} body
 * @returns {unknown}
 */
export function parseJSON(body, contentType = '') {
  if (body === null || body === undefined) return undefined;
  const t = body.trim();
  const looksJSON = /json/i.test(contentType) || t.startsWith('{') || t.startsWith('[');
  if (!looksJSON || t === '') return undefined;
  try {
    return JSON.parse(t);
  } catch {
    return undefined;
  }
}

/**
 * highlightJSON pretty-prints a value with two-space indentation and returns
 * a fragment whose keys, strings, numbers and literals are in classed spans.
 * @param {unknown} value
 */
export function highlightJSON(value) {
  const text = JSON.stringify(value, null, 2);
  const frag = document.createDocumentFragment();
  const token = /("(?:\\.|[^"\\])*")(\s*:)?|\b(true|false|null)\b|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g;
  let last = 0;
  for (const m of text.matchAll(token)) {
    if (m.index > last) frag.append(text.slice(last, m.index));
    const span = document.createElement('span');
    if (m[1]) {
      span.className = m[2] ? 'j-key' : 'j-str';
      span.textContent = m[1];
      frag.append(span);
      if (m[2]) frag.append(m[2]);
    } else {
      span.className = m[3] ? 'j-lit' : 'j-num';
      span.textContent = m[0];
      frag.append(span);
    }
    last = m.index + m[0].length;
  }
  if (last < text.length) frag.append(text.slice(last));
  return frag;
}
