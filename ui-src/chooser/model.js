// Pure rules of the provider chooser, kept apart from React so they are easy to test.

/** The filter box appears when there are more than this many providers. */
export const FILTER_THRESHOLD = 5;

/** Types that sign in with one button (a redirect to the identity provider). */
export const REDIRECT_TYPES = new Set(["oidc", "oauth", "saml"]);

/** The passkey provider's type: a button of its own, never a form. */
export const PASSKEY_TYPE = "webauthn";

/**
 * Return the providers with the one last used in this browser first; the rest keep the
 * server's order. An unknown or missing id changes nothing.
 */
export function orderProviders(providers, lastUsedId) {
  const last = providers.find((p) => p.id === lastUsedId);
  if (!last) return providers;
  return [last, ...providers.filter((p) => p !== last)];
}

/** Return the providers whose name or id contains `query` (case-insensitive, trimmed). */
export function filterProviders(providers, query) {
  const needle = query.trim().toLocaleLowerCase();
  if (!needle) return providers;
  return providers.filter(
    (p) => p.name.toLocaleLowerCase().includes(needle) || p.id.includes(needle),
  );
}

/**
 * Check an e-mail address by the server's rules (NFKC, trim, lower-case; one "@", no
 * quotes or spaces, a local part, a domain with a dot, at most 254 characters). Returns
 * what is wrong, as the key of its message in the page's `text.emailProblems`, or null
 * when the address is acceptable. The server checks again: this only saves a round trip.
 */
export function emailProblem(raw) {
  const value = raw.normalize("NFKC").trim();
  if (!value) return "empty";
  if (value.length > 254) return "tooLong";
  if (/[\s"']/.test(value)) return "spaces";
  const parts = value.split("@");
  if (parts.length !== 2) return "oneAt";
  const [local, domain] = parts;
  if (!local) return "local";
  if (!/^[^.]+(\.[^.]+)+$/.test(domain)) return "domain";
  return null;
}
