// @ts-check
// Builds a shell command that replays a recorded request byte for byte.
//
// Everything the sender chose reaches the shell only inside single quotes,
// where nothing expands ($(...), `...`, $VAR, \ stay literal), and reaches
// curl only where curl reads it as data: the body never goes in an argument,
// because curl reads a local file for "--data-binary @name" (a sender could
// post "@.env" and have whoever replays it upload their secrets).

/**
 * shellQuote wraps s in single quotes, escaping embedded single quotes.
 * @param {unknown} s
 */
export function shellQuote(s) {
  return `'${String(s).replace(/'/g, `'\\''`)}'`;
}

// curl computes these itself from the URL and the body it sends.
const COMPUTED = new Set(['host', 'content-length']);

/**
 * curlCommand returns a POSIX sh command reproducing the delivery: method,
 * public URL + raw path, every header in order including repeats, and the
 * stored body. The body, text or binary, is piped in as base64 through
 * base64 -d into --data-binary "@-" (standard input): that is the one form in
 * which curl reads no file, a NUL survives the shell, and a terminal paste
 * cannot turn a CR, a tab or a newline into something else.
 *
 * baseURL is the address's public URL, e.g. "http://abc.localhost:8080/".
 * @param {Pick<GQL.Delivery, 'method' | 'path' | 'headers' | 'bodySize' | 'bodyBase64' | 'complete'>} d
 * @param {string} baseURL
 */
export function curlCommand(d, baseURL) {
  const url = baseURL.replace(/\/+$/, '') + d.path;
  const parts = ['curl'];
  const names = new Set((d.headers || []).map((h) => h.name.toLowerCase()));
  const bodyBytes = d.bodySize > 0 || (d.bodyBase64 || '') !== '';
  if (d.method === 'HEAD') parts.push('--head');
  else parts.push('-X', shellQuote(d.method));
  // curl would otherwise resolve "/../" and "/./" segments in the path.
  if (/\/\.\.?(\/|$|\?)/.test(d.path)) parts.push('--path-as-is');
  // Brackets and braces are curl URL globs; the path must go as sent.
  if (/[[\]{}]/.test(d.path)) parts.push('--globoff');
  parts.push(shellQuote(url));
  for (const h of d.headers || []) {
    if (COMPUTED.has(h.name.toLowerCase())) continue;
    // "Name;" is curl's syntax for a header with an empty value. The
    // argument starts with the name, an HTTP token, which cannot begin with
    // "@" (curl's "read headers from this file").
    parts.push('-H', shellQuote(h.value === '' ? `${h.name};` : `${h.name}: ${h.value}`));
  }
  // Suppress the headers curl adds by default when the sender sent none.
  if (!names.has('user-agent')) parts.push('-H', shellQuote('User-Agent:'));
  if (!names.has('accept')) parts.push('-H', shellQuote('Accept:'));
  if (bodyBytes && !names.has('content-type')) parts.push('-H', shellQuote('Content-Type:'));
  // curl asks "Expect: 100-continue" before large bodies; the sender did not.
  if (bodyBytes && !names.has('expect')) parts.push('-H', shellQuote('Expect:'));

  if (!bodyBytes) return joinLines(parts);
  parts.push('--data-binary', '@-');
  const cmd = `printf '%s' ${shellQuote(d.bodyBase64 || '')} | base64 -d | ${joinLines(parts)}`;
  if (d.complete === false) {
    const stored = Math.floor(((d.bodyBase64 || '').replace(/=+$/, '').length * 3) / 4);
    return `# PARTIAL: only ${stored} of the ${d.bodySize} body bytes are stored; this does not replay the request as sent\n${cmd}`;
  }
  return cmd;
}

// joinLines keeps the command readable: one option per line.
/** @param {string[]} parts */
function joinLines(parts) {
  const lines = [];
  let line = parts[0];
  for (let i = 1; i < parts.length; i += 1) {
    const p = parts[i];
    if (p.startsWith('-') && !p.startsWith("'")) {
      lines.push(line);
      line = `  ${p}`;
    } else {
      line += ` ${p}`;
    }
  }
  lines.push(line);
  return lines.join(' \\\n');
}
