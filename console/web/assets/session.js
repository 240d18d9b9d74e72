// The signed-in account, shared by the top bar and the pages.
import { request, token, setToken, GraphQLError } from './graphql.js';
import { ME } from './api.js';

let account = null;
const listeners = new Set();

function emit() {
  for (const fn of listeners) fn(account);
}

/** currentAccount is the signed-in account ({id, name}) or null. */
export function currentAccount() {
  return account;
}

/** onSessionChange calls fn on sign-in and sign-out; returns an unsubscribe. */
export function onSessionChange(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

/**
 * loadSession checks the stored token with the relay. A token the relay
 * does not know is forgotten; a network failure keeps it.
 */
export async function loadSession() {
  if (!token()) {
    account = null;
    emit();
    return null;
  }
  try {
    const data = await request(ME);
    account = data.me;
    if (!account) setToken('');
  } catch (err) {
    account = null;
    if (err instanceof GraphQLError && err.code === 'UNAUTHENTICATED') setToken('');
  }
  emit();
  return account;
}

/**
 * signIn verifies tok with the relay and stores it. It throws when the relay
 * does not recognise the token, and leaves the previous session untouched.
 */
export async function signIn(tok, knownAccount) {
  const previous = token();
  setToken(tok);
  if (knownAccount) {
    account = knownAccount;
    emit();
    return account;
  }
  try {
    const data = await request(ME);
    if (!data.me) throw new Error('The relay does not recognise this token.');
    account = data.me;
  } catch (err) {
    setToken(previous);
    if (err instanceof GraphQLError && err.code === 'UNAUTHENTICATED') {
      throw new Error('The relay does not recognise this token.');
    }
    throw err;
  }
  emit();
  return account;
}

/** signOut forgets the token in this browser. */
export function signOut() {
  setToken('');
  account = null;
  emit();
}
