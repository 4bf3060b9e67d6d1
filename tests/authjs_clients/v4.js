// The browser client of next-auth v4 (`next-auth/react`), as an app built with it ships it.
// tests/browser/test_authjs_clients.py loads this bundle into a page of the app's origin.
import { getCsrfToken, getProviders, getSession, signIn, signOut } from "next-auth/react";

Object.assign(window, { getCsrfToken, getProviders, getSession, signIn, signOut });
// eslint-disable-next-line no-undef -- defined by build.mjs
window.authjsClient = __AUTHJS_CLIENT__;
