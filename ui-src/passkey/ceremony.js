// Passkey ceremonies against the auth routes, shared by the sign-in chooser and the passkey
// script (main.js): ask `webauthn-options/passkey` for the options, let the browser and the
// authenticator answer (@simplewebauthn/browser), post the answer to `callback/passkey`.
// Each ends with the URL to go to; a problem the person should read is a PasskeyProblem,
// in the words the page's data gives (`text`: webapp/auth/passkeys.py, passkey_texts).
import {
  browserSupportsWebAuthn,
  browserSupportsWebAuthnAutofill,
  startAuthentication,
  startRegistration,
} from "@simplewebauthn/browser";

export { browserSupportsWebAuthn as passkeysSupported, browserSupportsWebAuthnAutofill as autofillSupported };

/** A failure with a message for the person. */
export class PasskeyProblem extends Error {}

async function json(response) {
  try {
    return await response.json();
  } catch {
    return {};
  }
}

async function request(url, init, text) {
  try {
    return await fetch(url, { credentials: "same-origin", ...init, headers: { Accept: "application/json", ...init?.headers } });
  } catch {
    throw new PasskeyProblem(text.offline);
  }
}

/** The options for `action`; a `{url}` to go to first instead (a confirmation). */
async function getOptions(authBase, action, text) {
  const response = await request(`${authBase}/webauthn-options/passkey?action=${action}`, undefined, text);
  const body = await json(response);
  if (response.ok && body.options) return body;
  if (body.url) return { url: body.url }; // RecentSignInRequired: confirm it is you first
  if (response.status === 401) throw new PasskeyProblem(text.signInFirst);
  throw new PasskeyProblem(text.generic);
}

/** Post the ceremony's answer; return where to go (a sign-in, or the error's page). */
async function finish(authBase, fields, text) {
  const response = await request(`${authBase}/callback/passkey`, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded", "X-Auth-Return-Redirect": "1" },
    body: new URLSearchParams({ ...fields, json: "true" }),
  }, text);
  const body = await json(response);
  if (body.url) return body.url;
  if (body.confirmUrl) return body.confirmUrl; // the sign-in went stale meanwhile
  throw new PasskeyProblem(body.message ?? text.generic);
}

// A browser holds one challenge cookie, so ceremonies take turns: each fetches its options
// only once the one started before has its own (the newest cookie is then the newest
// ceremony's), and a ceremony overtaken meanwhile (the e-mail field's wait, when the button
// is pressed) stops before it starts the browser's, as if aborted.
let newest = 0;
let optionsInFlight = Promise.resolve();

async function optionsInTurn(authBase, action, text) {
  const mine = ++newest;
  const fetched = optionsInFlight.then(() => getOptions(authBase, action, text));
  optionsInFlight = fetched.catch(() => {});
  const body = await fetched;
  if (mine !== newest && !body.url) throw new DOMException("a newer passkey ceremony started", "AbortError");
  return body;
}

/**
 * Sign in with a passkey (any of this site's, chosen in the browser's dialog or, with
 * `autofill`, from the e-mail field's suggestions); return the URL to go to.
 */
export async function signInWithPasskey({ authBase, csrfToken, callbackUrl, autofill = false, text }) {
  const { options, url } = await optionsInTurn(authBase, "authenticate", text);
  if (url) return url;
  const credential = await startAuthentication({ optionsJSON: options, useBrowserAutofill: autofill });
  const fields = { csrfToken, action: "authenticate", data: JSON.stringify(credential) };
  if (callbackUrl) fields.callbackUrl = callbackUrl;
  return finish(authBase, fields, text);
}

/** Create a passkey for the signed-in person, named `name` (empty: the server picks); return the URL to go to. */
export async function addPasskey({ authBase, csrfToken, name, text }) {
  const { options, url } = await optionsInTurn(authBase, "register", text);
  if (url) return url;
  const credential = await startRegistration({ optionsJSON: options });
  return finish(authBase, { csrfToken, action: "register", name, data: JSON.stringify(credential) }, text);
}

/** The message for a failed ceremony, from `text`; null when the page itself cancelled it. */
export function problemMessage(error, text) {
  if (error instanceof PasskeyProblem) return error.message;
  switch (error?.name) {
    case "AbortError":
      return null; // another ceremony replaced this one
    case "NotAllowedError":
      return text.notAllowed;
    case "InvalidStateError":
      return text.registered;
    case "SecurityError":
      return text.wrongAddress;
    default:
      return text.generic;
  }
}

/** Go to `url`; the same page with another #fragment is loaded again (to show what changed). */
export function go(url) {
  const target = new URL(url, window.location.href);
  const here = window.location;
  if (target.origin === here.origin && target.pathname === here.pathname && target.search === here.search) {
    here.hash = target.hash;
    here.reload();
  } else {
    here.assign(target.href);
  }
}
