// @ts-check
// Entry point: the client-side router and the top bar.
import { h, replace } from './dom.js';
import { homePage } from './home.js';
import { historyPage } from './history.js';
import { settingsPage } from './settings.js';
import { devicePage } from './device.js';
import { joinPage } from './join.js';
import { currentAccount, loadSession, onSessionChange, signOut } from './session.js';
import { setToken } from './graphql.js';

// index.html has both.
const main = /** @type {HTMLElement} */ (document.getElementById('main'));
const accountBox = /** @type {HTMLElement} */ (document.getElementById('account'));
/** @type {Page | null | undefined} */
let page = null;

/**
 * navigate moves to a console path without reloading.
 * @param {string} path
 */
export function navigate(path) {
  if (path !== location.pathname + location.search) history.pushState(null, '', path);
  route();
}

function route() {
  if (page && page.dispose) page.dispose();
  page = null;
  main.replaceChildren();
  const path = location.pathname;
  let m;
  if (path === '/' || path === '') {
    document.title = 'Relay';
    page = homePage(main, { navigate });
  } else if (path === '/device' || path === '/device/') {
    page = devicePage(main);
  } else if (path === '/join' || path === '/join/') {
    page = joinPage(main, { navigate });
  } else if (path === '/settings' || path === '/settings/') {
    page = settingsPage(main, { navigate });
  } else if ((m = /^\/([ie])\/([^/]+)\/?$/.exec(path))) {
    const kind = m[1] === 'i' ? 'inspector' : 'endpoint';
    page = historyPage(main, { kind, id: decodeURIComponent(m[2]), navigate });
  } else {
    document.title = 'Not found · Relay';
    replace(main, h('section', { class: 'card' },
      h('h1', {}, 'Nothing here'),
      h('p', {}, 'This console page does not exist. ', h('a', { href: '/' }, 'Go to the home page'), '.')));
  }
  markNav();
  // Move focus to the new page so keyboard and screen reader users start there.
  if (routed) main.focus({ preventScroll: true });
  routed = true;
  window.scrollTo(0, 0);
}
let routed = false;

function markNav() {
  for (const a of document.querySelectorAll('nav a')) {
    if (a.getAttribute('href') === location.pathname) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

/** @param {SignedIn | null} account */
function renderAccount(account) {
  if (!account) {
    replace(accountBox, h('span', { class: 'muted' }, 'Guest'));
    return;
  }
  const who = account.member ? [h('strong', { 'data-testid': 'member-login' }, account.member.login), ' in '] : [];
  replace(accountBox,
    h('span', { class: 'account-name' }, 'Signed in as ', ...who, h('strong', {}, account.name)),
    h('a', { class: 'btn btn-small btn-ghost', href: '/settings', 'data-testid': 'settings-link' }, 'Settings'),
    h('button', {
      type: 'button',
      class: 'btn btn-small btn-ghost',
      'data-testid': 'sign-out',
      onclick: () => {
        signOut().catch(() => {}); // the top bar already shows the guest; a relay out of reach forgets nothing more
        navigate('/');
      },
    }, 'Sign out'));
}

// Same-origin links to console pages navigate on the client.
document.addEventListener('click', (ev) => {
  if (ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
  const a = /** @type {HTMLAnchorElement | null} */ (/** @type {Element} */ (ev.target).closest('a[href]'));
  if (!a || a.target || a.hasAttribute('download') || a.origin !== location.origin) return;
  if (!/^\/($|[ie]\/|settings$)/.test(a.pathname)) return;
  ev.preventDefault();
  navigate(a.pathname + a.search);
});

// A link from `relay open` carries the token in its fragment (#token=…),
// which browsers never send to a server nor put in a Referer: it is stored
// as a pasted token is, and taken out of the address bar and the history
// at once. loadSession below checks it with the relay.
{
  const fragment = new URLSearchParams(location.hash.slice(1));
  const linked = fragment.get('token');
  if (linked) {
    setToken(linked);
    history.replaceState(null, '', location.pathname + location.search);
  }
}

window.addEventListener('popstate', route);
onSessionChange(renderAccount);
renderAccount(currentAccount());
route();
loadSession();
