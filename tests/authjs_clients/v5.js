// The browser client of next-auth v5 (`next-auth/react`, built on @auth/core), installed
// under the npm alias next-auth-v5. tests/browser/test_authjs_clients.py loads this bundle
// into a page of the app's origin.
import { getCsrfToken, getProviders, getSession, signIn, signOut } from "next-auth-v5/react";

Object.assign(window, { getCsrfToken, getProviders, getSession, signIn, signOut });
// eslint-disable-next-line no-undef -- defined by build.mjs
window.authjsClient = __AUTHJS_CLIENT__;
