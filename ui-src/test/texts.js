// The words the server puts into the pages' data (English), for the islands' tests: the
// real ones come from webapp/auth/chooser.py and errorpage.py, translated per request.
export const passkeyText = {
  offline: "We could not reach the server. Check your connection and try again.",
  generic: "Something went wrong with the passkey. Try again, or choose another way.",
  signInFirst: "Sign in first, then add a passkey.",
  notAllowed: "No passkey was used: it was cancelled, timed out, or this device has none for this site.",
  registered: "This device already has a passkey for your account.",
  wrongAddress: "Passkeys do not work at this address.",
  unsupported: "This browser cannot create passkeys.",
};

export const chooserText = {
  filterLabel: "Find your sign-in provider",
  providerCount: "6 providers",
  matchCount: "Showing {shown} of {total}",
  noMatch: "No provider matches “{query}”.",
  or: "or",
  signInWith: "Sign in with {name}",
  continueWith: "Continue with {name}",
  redirecting: "Redirecting to {name}…",
  lastUsed: "last used",
  emailLabel: "E-mail address",
  sendingLink: "Sending your link…",
  signingIn: "Signing in…",
  offline: "We could not reach the server. Check your connection and try again.",
  demoTitle: "Development only:",
  demoNote: "any e-mail address with the password {password} signs in. This option cannot be enabled in production.",
  emailProblems: {
    empty: "Enter your e-mail address.",
    tooLong: "That address is too long.",
    spaces: "An e-mail address cannot contain spaces or quotes.",
    oneAt: "Enter an address with one @, like ann@example.com.",
    local: "Add the part before the @, like ann@example.com.",
    domain: "Check the part after the @, like example.com.",
  },
  passkeyButton: "Sign in with a passkey",
  passkeyWaiting: "Waiting for your passkey…",
  passkey: passkeyText,
};

export const errorPageText = {
  reference: "Reference: {reference}",
  referenceAndCode: "Reference: {reference} · code {code}",
  copy: "Copy reference",
  copied: "Reference copied.",
  copyFailed: "Could not copy; select the reference and copy it yourself.",
  lastUsed: "Last time you signed in here with {name}.",
};
