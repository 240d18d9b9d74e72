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

/** setToken remembers (or, with '', forgets) the account token. */
export function setToken(value) {
  if (value) localStorage.setItem(TOKEN_KEY, value);
  else localStorage.removeItem(TOKEN_KEY);
  subscriptions.restart();
}

/** GraphQLError carries the server's errors; code is extensions.code of the first. */
export class GraphQLError extends Error {
  constructor(errors) {
    const first = errors[0] || {};
    super(first.message || 'GraphQL error');
    this.name = 'GraphQLError';
    this.errors = errors;
    this.code = (first.extensions && first.extensions.code) || '';
  }
}

/** describeError renders an error for people: "CODE: message". */
export function describeError(err) {
  if (err instanceof GraphQLError && err.code) return `${err.code}: ${err.message}`;
  return err && err.message ? err.message : String(err);
}

/**
 * request runs a query or mutation and returns its data. It throws a
 * GraphQLError when the answer has errors, an Error on transport failure.
 */
export async function request(query, variables = {}, { signal } = {}) {
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
    if (err.name === 'AbortError') throw err;
    throw new Error(`The relay is unreachable (${err.message}).`);
  }
  let body;
  try {
    body = await res.json();
  } catch {
    throw new Error(`The relay answered ${res.status} without a GraphQL result.`);
  }
  if (body.errors && body.errors.length) throw new GraphQLError(body.errors);
  if (!res.ok) throw new Error(`The relay answered ${res.status}.`);
  return body.data;
}

// Close codes after which reconnecting cannot help (graphql-transport-ws).
const FATAL_CLOSE = new Set([4400, 4401, 4403, 4406, 4409, 4429]);

/**
 * SubscriptionClient multiplexes subscriptions over one WebSocket that it
 * opens lazily, keeps alive with ping/pong, and reopens with exponential
 * backoff. After a reconnect it resubscribes and calls each sink's
 * reconnected() so the page can catch up on what it missed.
 */
export class SubscriptionClient {
  constructor(url) {
    this.url = url;
    this.ws = null;
    this.acked = false;
    this.sinks = new Map(); // id -> {query, variables, sink}
    this.nextId = 1;
    this.attempt = 0;
    this.everConnected = false;
    this.retryTimer = 0;
    this.pingTimer = 0;
    this.pongTimer = 0;
  }

  /**
   * subscribe starts a subscription. variables may be a function, called
   * each time the subscription is sent (again after a reconnect). sink has
   * next(data), error(err) and, optionally, reconnected() and status(state)
   * with state 'live', 'connecting' or 'offline'. Returns a function that
   * unsubscribes.
   */
  subscribe(query, variables, sink) {
    const id = String(this.nextId++);
    this.sinks.set(id, { query, variables, sink });
    if (this.acked) this.sendSubscribe(id);
    else this.connect();
    return () => {
      if (!this.sinks.delete(id)) return;
      if (this.acked) this.send({ id, type: 'complete' });
      if (this.sinks.size === 0) this.close();
    };
  }

  /** restart drops the socket and reconnects, e.g. after the token changed. */
  restart() {
    if (!this.ws && !this.retryTimer) return;
    const caughtUpBefore = this.everConnected;
    this.close();
    this.everConnected = caughtUpBefore;
    if (this.sinks.size) this.connect();
  }

  connect() {
    if (this.ws || this.retryTimer) return;
    this.notify('connecting');
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

  onMessage(ev) {
    let msg;
    try {
      msg = JSON.parse(ev.data);
    } catch {
      this.ws.close(4400, 'Invalid message');
      return;
    }
    switch (msg.type) {
      case 'connection_ack': {
        const reconnect = this.everConnected;
        this.acked = true;
        this.everConnected = true;
        this.attempt = 0;
        this.startPing();
        this.notify('live');
        for (const id of this.sinks.keys()) this.sendSubscribe(id);
        if (reconnect) {
          for (const { sink } of this.sinks.values()) if (sink.reconnected) sink.reconnected();
        }
        break;
      }
      case 'ping':
        this.send({ type: 'pong' });
        break;
      case 'pong':
        clearTimeout(this.pongTimer);
        break;
      case 'next': {
        const s = this.sinks.get(msg.id);
        if (!s) break;
        if (msg.payload.errors && msg.payload.errors.length) s.sink.error(new GraphQLError(msg.payload.errors));
        else s.sink.next(msg.payload.data);
        break;
      }
      case 'error': {
        const s = this.sinks.get(msg.id);
        if (s) {
          this.sinks.delete(msg.id);
          s.sink.error(new GraphQLError(msg.payload || []));
        }
        break;
      }
      case 'complete': {
        const s = this.sinks.get(msg.id);
        if (s) {
          this.sinks.delete(msg.id);
          if (s.sink.complete) s.sink.complete();
        }
        break;
      }
      default:
        break;
    }
  }

  onClose(ws, ev) {
    if (ws !== this.ws) return; // an old socket closed after restart()
    this.ws = null;
    this.acked = false;
    this.stopPing();
    if (this.sinks.size === 0) return;
    if (FATAL_CLOSE.has(ev.code)) {
      const err = new Error(`Live updates refused (${ev.code} ${ev.reason || ''})`.trim());
      for (const { sink } of this.sinks.values()) sink.error(err);
      this.sinks.clear();
      this.notify('offline');
      return;
    }
    this.notify('offline');
    // Exponential backoff with jitter: 0.5 s, 1 s, 2 s … capped at 15 s.
    const delay = Math.min(15000, 500 * 2 ** this.attempt) * (0.75 + Math.random() / 2);
    this.attempt += 1;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = 0;
      this.connect();
    }, delay);
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

  sendSubscribe(id) {
    const { query, variables } = this.sinks.get(id);
    const vars = typeof variables === 'function' ? variables() : variables;
    this.send({ id, type: 'subscribe', payload: { query, variables: vars } });
  }

  send(msg) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(msg));
  }

  notify(state) {
    for (const { sink } of this.sinks.values()) if (sink.status) sink.status(state);
  }

  close() {
    clearTimeout(this.retryTimer);
    this.retryTimer = 0;
    this.stopPing();
    const ws = this.ws;
    this.ws = null;
    this.acked = false;
    this.everConnected = false;
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

const wsProto = location.protocol === 'https:' ? 'wss:' : 'ws:';

/** subscriptions is the page's one WebSocket client. */
export const subscriptions = new SubscriptionClient(`${wsProto}//${location.host}${ENDPOINT}`);
