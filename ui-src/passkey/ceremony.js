// Passkey ceremonies against the auth routes, shared by the sign-in chooser and the passkey
// script (main.js): ask `webauthn-options/passkey` for the options, let the browser and the
// authenticator answer (@simplewebauthn/browser), post the answer to `callback/passkey`.
// Each ends with the URL to go to; a problem the person should read is a PasskeyProblem.
import {
  browserSupportsWebAuthn,
  browserSupportsWebAuthnAutofill,
  startAuthentication,
  startRegistration,
} from "@simplewebauthn/browser";

export { browserSupportsWebAuthn as passkeysSupported, browserSupportsWebAuthnAutofill as autofillSupported };

const OFFLINE = "We could not reach the server. Check your connection and try again.";
const GENERIC = "Something went wrong with the passkey. Try again, or choose another way.";

/** A failure with a message for the person. */
export class PasskeyProblem extends Error {}

async function json(response) {
  try {
    return await response.json();
  } catch {
    return {};
  }
}

async function request(url, init) {
  try {
    return await fetch(url, { credentials: "same-origin", ...init, headers: { Accept: "application/json", ...init?.headers } });
  } catch {
    throw new PasskeyProblem(OFFLINE);
  }
}

/** The options for `action`; a `{url}` to go to first instead (a confirmation). */
async function getOptions(authBase, action) {
  const response = await request(`${authBase}/webauthn-options/passkey?action=${action}`);
  const body = await json(response);
  if (response.ok && body.options) return body;
  if (body.url) return { url: body.url }; // RecentSignInRequired: confirm it is you first
  if (response.status === 401) throw new PasskeyProblem("Sign in first, then add a passkey.");
  throw new PasskeyProblem(GENERIC);
}

/** Post the ceremony's answer; return where to go (a sign-in, or the error's page). */
async function finish(authBase, fields) {
  const response = await request(`${authBase}/callback/passkey`, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded", "X-Auth-Return-Redirect": "1" },
    body: new URLSearchParams({ ...fields, json: "true" }),
  });
  const body = await json(response);
  if (body.url) return body.url;
  if (body.confirmUrl) return body.confirmUrl; // the sign-in went stale meanwhile
  throw new PasskeyProblem(body.message ?? GENERIC);
}

// A browser holds one challenge cookie, so ceremonies take turns: each fetches its options
// only once the one started before has its own (the newest cookie is then the newest
// ceremony's), and a ceremony overtaken meanwhile (the e-mail field's wait, when the button
// is pressed) stops before it starts the browser's, as if aborted.
let newest = 0;
let optionsInFlight = Promise.resolve();

async function optionsInTurn(authBase, action) {
  const mine = ++newest;
  const fetched = optionsInFlight.then(() => getOptions(authBase, action));
  optionsInFlight = fetched.catch(() => {});
  const body = await fetched;
  if (mine !== newest && !body.url) throw new DOMException("a newer passkey ceremony started", "AbortError");
  return body;
}

/**
 * Sign in with a passkey (any of this site's, chosen in the browser's dialog or, with
 * `autofill`, from the e-mail field's suggestions); return the URL to go to.
 */
export async function signInWithPasskey({ authBase, csrfToken, callbackUrl, autofill = false }) {
  const { options, url } = await optionsInTurn(authBase, "authenticate");
  if (url) return url;
  const credential = await startAuthentication({ optionsJSON: options, useBrowserAutofill: autofill });
  const fields = { csrfToken, action: "authenticate", data: JSON.stringify(credential) };
  if (callbackUrl) fields.callbackUrl = callbackUrl;
  return finish(authBase, fields);
}

/** Create a passkey for the signed-in person, named `name` (empty: the server picks); return the URL to go to. */
export async function addPasskey({ authBase, csrfToken, name }) {
  const { options, url } = await optionsInTurn(authBase, "register");
  if (url) return url;
  const credential = await startRegistration({ optionsJSON: options });
  return finish(authBase, { csrfToken, action: "register", name, data: JSON.stringify(credential) });
}

/** The message for a failed ceremony; null when it was cancelled by the page itself. */
export function problemMessage(error) {
  if (error instanceof PasskeyProblem) return error.message;
  switch (error?.name) {
    case "AbortError":
      return null; // another ceremony replaced this one
    case "NotAllowedError":
      return "No passkey was used: it was cancelled, timed out, or this device has none for this site.";
    case "InvalidStateError":
      return "This device already has a passkey for your account.";
    case "SecurityError":
      return "Passkeys do not work at this address.";
    default:
      return GENERIC;
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
