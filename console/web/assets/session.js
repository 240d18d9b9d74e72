// @ts-check
// The signed-in account, shared by the top bar and the pages. A browser is
// signed in either by a member's session cookie (HttpOnly: this script
// never sees it; signIn sets it) or by a pasted API token kept in
// localStorage, which, when present, is sent instead of the cookie.
import { request, token, setToken, GraphQLError, subscriptions, onRefused } from './graphql.js';
import { ME, SIGN_IN_PASSWORD, SIGN_OUT } from './api.js';

/** @type {SignedIn | null} */
let account = null;
let checked = false;
let ended = false; // the relay refused the session this page had
let verifying = false; // a pasted token is being checked
/** @type {Set<(account: SignedIn | null) => void>} */
const listeners = new Set();

// A session that ends while a page is open (signed out elsewhere, expired,
// revoked, the member removed) is forgotten at the first refusal.
onRefused(() => {
  if (!account || verifying) return; // nobody signed in, or a sign-in being tried
  account = null;
  ended = true;
  if (token()) setToken('');
  emit();
});

/** sessionEnded tells whether the relay refused the session this page had. */
export function sessionEnded() {
  return ended;
}

function emit() {
  for (const fn of listeners) fn(account);
}

/** currentAccount is the signed-in account ({id, name, member}) or null. */
export function currentAccount() {
  return account;
}

/** sessionChecked tells whether the relay was asked who this browser is. */
export function sessionChecked() {
  return checked;
}

/**
 * onSessionChange calls fn on sign-in and sign-out; returns an unsubscribe.
 * @param {(account: SignedIn | null) => void} fn
 */
export function onSessionChange(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

/**
 * loadSession asks the relay who this browser is (its token, or else its
 * session cookie). A token the relay does not know is forgotten; a network
 * failure keeps it.
 */
export async function loadSession() {
  try {
    const data = await request(ME);
    account = data.me;
    if (!account && token()) setToken('');
  } catch (err) {
    account = null;
    if (err instanceof GraphQLError && err.code === 'UNAUTHENTICATED' && token()) setToken('');
  }
  checked = true;
  emit();
  return account;
}

/**
 * adoptSession takes the answer of a password sign-in (signIn, sign-up,
 * joinAccount, setUpSignIn): the relay set the cookie; a pasted token
 * would hide it, so it is forgotten, and live views reconnect with the
 * cookie.
 * @param {Pick<GQL.SessionPayload, 'account' | 'member'>} payload
 * @returns {SignedIn}
 */
export function adoptSession(payload) {
  setToken('');
  ended = false;
  account = { ...payload.account, member: payload.member };
  checked = true;
  emit();
  return account;
}

/**
 * signInWithPassword signs a member in; it throws the relay's refusal.
 * @param {string} login
 * @param {string} password
 */
export async function signInWithPassword(login, password) {
  const data = await request(SIGN_IN_PASSWORD, { login, password });
  return adoptSession(data.signIn);
}

/**
 * signIn verifies tok with the relay and stores it. It throws when the relay
 * does not recognise the token, and leaves the previous session untouched.
 * @param {string} tok
 * @param {SignedIn} [knownAccount]
 * @returns {Promise<SignedIn | null>}
 */
export async function signIn(tok, knownAccount) {
  const previous = token();
  setToken(tok);
  if (knownAccount) {
    account = knownAccount;
    ended = false;
    emit();
    return account;
  }
  verifying = true;
  try {
    const data = await request(ME);
    if (!data.me) throw new Error('The relay does not recognise this token.');
    account = data.me;
    ended = false;
  } catch (err) {
    setToken(previous);
    if (err instanceof GraphQLError && err.code === 'UNAUTHENTICATED') {
      throw new Error('The relay does not recognise this token.');
    }
    throw err;
  } finally {
    verifying = false;
  }
  emit();
  return account;
}

/**
 * signOut forgets a pasted token in this browser, or ends the cookie
 * session on the relay (its token is revoked, the cookie cleared).
 */
export async function signOut() {
  const pasted = token();
  account = null;
  emit();
  if (pasted) {
    setToken('');
    return;
  }
  try {
    await request(SIGN_OUT);
  } finally {
    subscriptions.restart();
  }
}
