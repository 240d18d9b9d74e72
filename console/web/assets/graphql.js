// @ts-check
// A small GraphQL client: queries and mutations over fetch, subscriptions over
// the graphql-transport-ws protocol, and the signed-in token in localStorage.

const TOKEN_KEY = 'relay.token';
const ENDPOINT = '/graphql';

/** token returns the signed-in account's token, or '' when signed out. */
export function token() {
  try {
    return localStorage.getItem(TOKEN_KEY) || '';
  } catch {
    return '';
  }
}

/**
 * setToken remembers (or, with '', forgets) the account token.
 * @param {string} value
 */
export function setToken(value) {
  if (value) localStorage.setItem(TOKEN_KEY, value);
  else localStorage.removeItem(TOKEN_KEY);
  subscriptions.restart();
}

/**
 * One error of a GraphQL answer.
 * @typedef {{ message?: string, path?: Array<string | number>, extensions?: { code?: string } & Record<string, unknown> }} ErrorEntry
 */

/** GraphQLError carries the server's errors; code is extensions.code of the first. */
export class GraphQLError extends Error {
  /** @param {ErrorEntry[]} errors */
  constructor(errors) {
    const first = errors[0] || {};
    super(first.message || 'GraphQL error');
    this.name = 'GraphQLError';
    this.errors = errors;
    this.code = (first.extensions && first.extensions.code) || '';
  }
}

/**
 * describeError renders an error for people: "CODE: message".
 * @param {unknown} err
 */
export function describeError(err) {
  if (err instanceof GraphQLError && err.code) return `${err.code}: ${err.message}`;
  const message = err && /** @type {{ message?: unknown }} */ (err).message;
  return message ? String(message) : String(err);
}

/** @type {(() => void) | null} */
let refusedHandler = null;

/**
 * onRefused sets what runs when the relay refuses this browser's
 * credential (UNAUTHENTICATED): the session module then forgets the
 * account, so every page shows the sign-in instead of failing request
 * after request.
 * @param {() => void} fn
 */
export function onRefused(fn) {
  refusedHandler = fn;
}

/**
 * request runs a query or mutation and returns its data. It throws a
 * GraphQLError when the answer has errors, an Error on transport failure.
 * @param {string} query
 * @param {Record<string, unknown>} [variables]
 * @param {{ signal?: AbortSignal }} [options]
 * @returns {Promise<GQL.Data>}
 */
export async function request(query, variables = {}, { signal } = {}) {
  /** @type {Record<string, string>} */
  const headers = { 'Content-Type': 'application/json', Accept: 'application/json' };
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  let res;
  try {
    res = await fetch(ENDPOINT, {
      method: 'POST',
      headers,
      body: JSON.stringify({ query, variables }),
      signal,
    });
  } catch (err) {
    if (err instanceof Error && err.name === 'AbortError') throw err;
    throw new Error(`The relay is unreachable (${describeError(err)}).`);
  }
  let body;
  try {
    body = await res.json();
  } catch {
    throw new Error(`The relay answered ${res.status} without a GraphQL result.`);
  }
  if (body.errors && body.errors.length) {
    const err = new GraphQLError(body.errors);
    if (err.code === 'UNAUTHENTICATED' && refusedHandler) refusedHandler();
    throw err;
  }
  if (!res.ok) throw new Error(`The relay answered ${res.status}.`);
  return body.data;
}

// Close codes that say the server refused this client (graphql-transport-ws):
// retrying at once would only be refused again, so the next try waits the
// longest backoff.
const REFUSED_CLOSE = new Set([4400, 4401, 4403, 4406, 4409, 4429]);

const BACKOFF_MIN_MS = 500;
const BACKOFF_MAX_MS = 15000;

/**
 * backoff is the wait before retry number attempt (0 first): 0.5 s, 1 s,
 * 2 s … capped at 15 s, with jitter so pages that lost the relay together
 * do not all come back in the same instant.
 */
/** @param {number} attempt */
export function backoff(attempt) {
  return Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** attempt) * (0.75 + Math.random() / 2);
}

/**
 * SubscriptionClient multiplexes subscriptions over one WebSocket that it
 * opens lazily, keeps alive with ping/pong, and reopens with exponential
 * backoff. A subscription lasts until its caller unsubscribes: whatever
 * ends it first (the socket closes, or the server sends complete or error,
 * as a relay that shuts down does) is followed by a new subscribe, with
 * backoff, under a fresh id and with freshly computed variables. Each sink
 * hears status('live' | 'connecting' | 'offline', reason) so the page can
 * show when it is not live, and reconnected() after every subscribe but the
 * first so it can refresh what it shows.
 */
export class SubscriptionClient {
  /** @param {string} url */
  constructor(url) {
    this.url = url;
    /** @type {WebSocket | null} */
    this.ws = null;
    this.acked = false;
    /** @type {Set<Subscription>} */
    this.subs = new Set(); // every subscription until its caller unsubscribes
    /** @type {Map<string, Subscription>} */
    this.byId = new Map(); // operation id on the wire -> subscription, while the server runs it
    this.nextId = 1;
    this.attempt = 0; // failed socket connections in a row
    /** @type {ReturnType<typeof setTimeout> | 0} */
    this.retryTimer = 0;
    /** @type {ReturnType<typeof setInterval> | 0} */
    this.pingTimer = 0;
    /** @type {ReturnType<typeof setTimeout> | 0} */
    this.pongTimer = 0;
  }

  /**
   * subscribe starts a subscription. variables may be a function, called
   * each time the subscription is sent (again after every end). sink has
   * next(data), error(err) and, optionally, status(state, reason) and
   * reconnected(). Returns a function that unsubscribes.
   * @param {string} query
   * @param {Record<string, unknown> | (() => Record<string, unknown>)} variables
   * @param {Sink} sink
   * @returns {() => void}
   */
  subscribe(query, variables, sink) {
    /** @type {Subscription} */
    const sub = { query, variables, sink, id: '', sent: false, attempt: 0, timer: 0 };
    this.subs.add(sub);
    if (this.acked) {
      this.sendSubscribe(sub);
    } else {
      this.setStatus(sub, this.retryTimer ? 'offline' : 'connecting');
      this.connect();
    }
    return () => {
      if (!this.subs.delete(sub)) return;
      clearTimeout(sub.timer);
      if (sub.id) {
        this.byId.delete(sub.id);
        if (this.acked) this.send({ id: sub.id, type: 'complete' });
      }
      if (this.subs.size === 0) this.close();
    };
  }

  /** restart drops the socket and reconnects, e.g. after the token changed. */
  restart() {
    if (!this.ws && !this.retryTimer) return;
    this.close();
    if (this.subs.size) this.connect();
  }

  connect() {
    if (this.ws || this.retryTimer) return;
    // A subscription that was live stays "offline" through the attempts.
    for (const sub of this.subs) if (!sub.sent) this.setStatus(sub, 'connecting');
    const ws = new WebSocket(this.url, 'graphql-transport-ws');
    this.ws = ws;
    this.acked = false;
    ws.onopen = () => {
      const t = token();
      this.send({ type: 'connection_init', payload: t ? { Authorization: `Bearer ${t}` } : {} });
    };
    ws.onmessage = (ev) => this.onMessage(ev);
    ws.onclose = (ev) => this.onClose(ws, ev);
    // onerror is always followed by onclose, where recovery happens.
    ws.onerror = () => {};
  }

  /** @param {MessageEvent} ev */
  onMessage(ev) {
    let msg;
    try {
      msg = JSON.parse(ev.data);
    } catch {
      this.ws?.close(4400, 'Invalid message');
      return;
    }
    switch (msg.type) {
      case 'connection_ack':
        this.acked = true;
        this.attempt = 0;
        this.startPing();
        for (const sub of this.subs) {
          clearTimeout(sub.timer);
          sub.timer = 0;
          this.sendSubscribe(sub);
        }
        break;
      case 'ping':
        this.send({ type: 'pong' });
        break;
      case 'pong':
        clearTimeout(this.pongTimer);
        break;
      case 'next': {
        const sub = this.byId.get(msg.id);
        if (!sub) break;
        sub.attempt = 0; // rows flow: the subscription is healthy again
        if (msg.payload.errors && msg.payload.errors.length) sub.sink.error(new GraphQLError(msg.payload.errors));
        else sub.sink.next(msg.payload.data);
        break;
      }
      case 'error':
        this.ended(msg.id, new GraphQLError(msg.payload || []));
        break;
      case 'complete':
        // The server ended it (a relay shutting down completes every
        // subscription): the caller still wants rows, so subscribe again.
        this.ended(msg.id, null);
        break;
      default:
        break;
    }
  }

  /**
   * ended handles the server's end of one subscription: report it, retry it.
   * @param {string} id
   * @param {Error | null} err
   */
  ended(id, err) {
    const sub = this.byId.get(id);
    if (!sub) return;
    this.byId.delete(id);
    sub.id = '';
    if (err) sub.sink.error(err);
    this.setStatus(sub, 'offline', err ? describeError(err) : 'The relay ended the live updates.');
    sub.timer = setTimeout(() => {
      sub.timer = 0;
      if (!this.subs.has(sub)) return;
      if (this.acked) this.sendSubscribe(sub);
      else this.connect(); // a closed socket resubscribes everything on its ack
    }, backoff(sub.attempt));
    sub.attempt += 1;
  }

  /**
   * @param {WebSocket} ws
   * @param {CloseEvent} ev
   */
  onClose(ws, ev) {
    if (ws !== this.ws) return; // an old socket closed after restart()
    this.ws = null;
    this.acked = false;
    this.stopPing();
    this.byId.clear();
    for (const sub of this.subs) {
      // The socket's reconnect resubscribes every subscription.
      clearTimeout(sub.timer);
      sub.timer = 0;
      sub.id = '';
    }
    if (this.subs.size === 0) return;
    const refused = REFUSED_CLOSE.has(ev.code);
    const reason = refused
      ? `The relay refused live updates (${[ev.code, ev.reason].filter(Boolean).join(' ')}).`
      : 'The connection to the relay was lost.';
    if (refused) {
      const err = new Error(reason);
      for (const sub of this.subs) sub.sink.error(err);
      this.attempt = Math.max(this.attempt, Math.ceil(Math.log2(BACKOFF_MAX_MS / BACKOFF_MIN_MS)));
    }
    this.notify('offline', reason);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = 0;
      this.connect();
    }, backoff(this.attempt));
    this.attempt += 1;
  }

  startPing() {
    this.stopPing();
    // A client ping every 20 s notices a dead connection the OS has not.
    this.pingTimer = setInterval(() => {
      this.send({ type: 'ping' });
      clearTimeout(this.pongTimer);
      this.pongTimer = setTimeout(() => {
        if (this.ws) this.ws.close(4408, 'Pong timeout');
      }, 10000);
    }, 20000);
  }

  stopPing() {
    clearInterval(this.pingTimer);
    clearTimeout(this.pongTimer);
  }

  /**
   * sendSubscribe (re)starts one subscription under a fresh id.
   * @param {Subscription} sub
   */
  sendSubscribe(sub) {
    const again = sub.sent;
    sub.id = String(this.nextId++);
    sub.sent = true;
    this.byId.set(sub.id, sub);
    const vars = typeof sub.variables === 'function' ? sub.variables() : sub.variables;
    this.send({ id: sub.id, type: 'subscribe', payload: { query: sub.query, variables: vars } });
    this.setStatus(sub, 'live');
    if (again && sub.sink.reconnected) sub.sink.reconnected();
  }

  /** @param {Record<string, unknown>} msg */
  send(msg) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(msg));
  }

  /**
   * @param {Subscription} sub
   * @param {LiveState} state
   */
  setStatus(sub, state, reason = '') {
    if (sub.sink.status) sub.sink.status(state, reason);
  }

  /** @param {LiveState} state */
  notify(state, reason = '') {
    for (const sub of this.subs) this.setStatus(sub, state, reason);
  }

  close() {
    clearTimeout(this.retryTimer);
    this.retryTimer = 0;
    this.stopPing();
    for (const sub of this.subs) {
      clearTimeout(sub.timer);
      sub.timer = 0;
      sub.id = '';
    }
    this.byId.clear();
    const ws = this.ws;
    this.ws = null;
    this.acked = false;
    if (!ws) return;
    ws.onmessage = null;
    if (ws.readyState === WebSocket.CONNECTING) {
      // Closing a socket that is still connecting makes the browser log an
      // error; let it open first, then close it.
      ws.onopen = () => ws.close(1000, 'Normal Closure');
    } else {
      ws.close(1000, 'Normal Closure');
    }
  }
}

/**
 * What a subscription's caller hears (SubscriptionClient.subscribe).
 * @typedef {object} Sink
 * @property {(data: GQL.Subscription) => void} next
 * @property {(err: Error) => void} error
 * @property {(state: LiveState, reason: string) => void} [status]
 * @property {() => void} [reconnected]
 */

/** @typedef {'live' | 'connecting' | 'offline'} LiveState */

/**
 * One subscription, from subscribe until its caller unsubscribes.
 * @typedef {object} Subscription
 * @property {string} query
 * @property {Record<string, unknown> | (() => Record<string, unknown>)} variables
 * @property {Sink} sink
 * @property {string} id the operation id on the wire; '' while not running
 * @property {boolean} sent
 * @property {number} attempt
 * @property {ReturnType<typeof setTimeout> | 0} timer
 */

const wsProto = location.protocol === 'https:' ? 'wss:' : 'ws:';

/** subscriptions is the page's one WebSocket client. */
export const subscriptions = new SubscriptionClient(`${wsProto}//${location.host}${ENDPOINT}`);
