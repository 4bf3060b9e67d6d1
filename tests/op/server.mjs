// A real OpenID Provider (the npm package oidc-provider) for the tests, on loopback.
//
// Usage: node tests/op/server.mjs config.json
//   config: { "port": 4000, "clients": [ ...client metadata... ],
//             "accounts": { "<id>": { ...claims... } },
//             "api": { "resource": "http://localhost/api", "scope": "api:read" },
//             "jwks": { "keys": [ ...private JWKs: the OP's signing keys... ] },
//             "device": { "interval": 1, "slowDownIncrement": 5, "ttl": 600 },
//             "clientSettings": { "<client_id>": { "interval": 1, "deviceCodeTtl": 2,
//                                                   "amr": ["pwd", "otp"] } } }
// Prints "ready <issuer>" once it listens.
//
// Test-only interaction: there is no login form. The authorization request's login_hint
// names the account to log in (login_hint=deny answers access_denied), and consent is
// granted at once. In the device flow (RFC 8628) the account is the "op_account" cookie if
// set, else the device authorization request's login_hint; GET /device?op_account=<id>
// sets that cookie (and redirects to /device without it). Cookies are prefixed "op_" so
// they cannot clash with the app's cookies, which share the host 127.0.0.1.
// A login for a client whose clientSettings name "amr" records those authentication
// methods (RFC 8176) in the provider session: its ID tokens carry them as the amr claim.
// Without it a login records none and ID tokens have no amr.
//
// Pages (minimal, parseable HTML; each keeps the provider's own form, id and xsrf field):
//   logout confirmation:   <form id="op.logoutForm">; submit logout=yes to end the whole
//                          OP session, or nothing to sign out of the requesting client only
//   logout success:        <h1 id="op.loggedOut">Signed out</h1>
//   device code input:     <form id="op.deviceInputForm"> (user_code), <p id="op.error">
//                          names a re-render error (NotFoundError, ExpiredError,
//                          AlreadyUsedError, AbortedError, NoCodeError)
//   device code confirm:   <form id="op.deviceConfirmForm"> (confirm=yes); add abort=yes
//                          to deny
//   device success:        <h1 id="op.deviceSuccess">
//
// Device flow extras (oidc-provider itself neither advertises an interval nor ever answers
// slow_down): the device authorization response gets "interval" (device.interval, or the
// client's clientSettings interval; null advertises none). A token request polling a still
// pending device code less than the current interval after the previous poll of the same
// code (100 ms tolerance; the first poll is never too early) answers slow_down instead of
// authorization_pending, and raises that code's interval by device.slowDownIncrement.
// ttl.DeviceCode is the client's clientSettings deviceCodeTtl, else device.ttl.
//
// Back-channel logout: outgoing requests skip oidc-provider's SSRF guard (which refuses
// loopback addresses), so the RPs can listen on 127.0.0.1. The provider makes them (once
// each, no retry, 2.5 s timeout) before it answers the logout confirmation.
//
// Test-only routes:
//   GET  /__test/grants       successful token endpoint grants so far, counted per
//                             "<client_id> <grant_type>" (e.g. {"op-basic refresh_token": 3})
//   GET  /__test/backchannel  back-channel logout deliveries so far, in order: [{client_id,
//                             url, sub, sid, logout_token, status (the RP's HTTP status, or
//                             null), error (text, or null), ok (true/false once the
//                             provider's backchannel.success/.error event fired)}]
//   GET  /__test/device       device_code polls so far: [{client_id, at (epoch s), answer
//                             ("tokens" or the error code)}]
//   GET  /__test/introspection  introspection requests so far, in order: [{client_id (or
//                             null), token_sha256 (hex SHA-256 of the token sent), status,
//                             error (the OAuth error code, or null)}]
//   POST /__test/device/expire  {"user_code": "..."}: that device code expires now
//   POST /__test/clients      {"metadata": {...}, "settings": {...}}: registers (or replaces)
//                             a client at run time; its id must not be a configured one
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';

import Provider, { errors } from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const issuer = `http://127.0.0.1:${config.port}`;
const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
const device = { interval: 1, slowDownIncrement: 5, ttl: 600, ...config.device };
const clientSettings = { ...config.clientSettings };
const settingsOf = (clientId) => clientSettings[clientId] ?? {};

const esc = (value) => String(value).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const page = (title, body) => `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>${esc(title)}</title></head>
<body>
${body}
</body></html>`;

// Back-channel logout deliveries, recorded by the outgoing fetch and completed by events.
const deliveries = [];

function jwtPayload(token) {
  try {
    return JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString('utf8'));
  } catch {
    return {};
  }
}

async function testFetch(url, options) {
  // The test RPs listen on loopback, which the provider's SSRF guard refuses.
  delete options.dispatcher;
  const token = options.body instanceof URLSearchParams ? options.body.get('logout_token') : null;
  if (!token) return globalThis.fetch(url, options);
  const claims = jwtPayload(token);
  const entry = {
    client_id: claims.aud,
    url: String(url),
    sub: claims.sub ?? null,
    sid: claims.sid ?? null,
    logout_token: token,
    status: null,
    error: null,
    ok: null,
  };
  deliveries.push(entry);
  try {
    const response = await globalThis.fetch(url, options);
    entry.status = response.status;
    return response;
  } catch (err) {
    entry.error = String(err?.cause ?? err);
    throw err;
  }
}

const provider = new Provider(issuer, {
  clients: config.clients,
  jwks: config.jwks,
  async findAccount(ctx, id) {
    const claims = config.accounts[id];
    if (!claims) return undefined;
    return { accountId: id, async claims() { return { sub: id, ...claims }; } };
  },
  claims: {
    // amr: in ID tokens when the login recorded one (clientSettings amr); never otherwise.
    openid: ['sub', 'amr'],
    email: ['email', 'email_verified'],
    profile: ['name', 'picture'],
  },
  cookies: {
    names: { session: 'op_session', interaction: 'op_interaction', resume: 'op_resume' },
    keys: ['test-only-cookie-key-0123456789abcdef'],
  },
  fetch: testFetch,
  features: {
    devInteractions: { enabled: false },
    revocation: { enabled: true }, // RFC 7009
    introspection: { enabled: true }, // RFC 7662
    // RFC 8707: the one resource server is the app's API; asking for it (resource=...)
    // gets a JWT access token (RFC 9068, signed with the keys at jwks_uri) whose aud is the
    // API. A request without resource gets none: an opaque token, usable at userinfo.
    resourceIndicators: {
      enabled: true,
      getResourceServerInfo(ctx, resource) {
        if (resource !== config.api.resource) throw new errors.InvalidTarget();
        return {
          scope: config.api.scope,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
    // OpenID Connect RP-Initiated Logout 1.0
    rpInitiatedLogout: {
      enabled: true,
      async logoutSource(ctx, form) {
        ctx.body = page('Sign out', `<h1 id="op.logoutPrompt">Sign out of ${esc(ctx.host)}?</h1>
${form}
<button type="submit" form="op.logoutForm" name="logout" value="yes">Yes, sign me out</button>
<button type="submit" form="op.logoutForm">No, stay signed in</button>`);
      },
      async postLogoutSuccessSource(ctx) {
        const client = ctx.oidc.client?.clientId;
        ctx.body = page('Signed out', `<h1 id="op.loggedOut">Signed out</h1>
<p id="op.client">${client ? esc(client) : ''}</p>`);
      },
    },
    // OpenID Connect Back-Channel Logout 1.0
    backchannelLogout: { enabled: true },
    // RFC 8628
    deviceFlow: {
      enabled: true,
      async userCodeInputSource(ctx, form, out, err) {
        const error = err ? `<p id="op.error">${esc(err.name)}: ${esc(err.message)}</p>` : '';
        ctx.body = page('Enter code', `<h1 id="op.deviceInput">Enter the code</h1>
${error}
${form}
<button type="submit" form="op.deviceInputForm">Continue</button>`);
      },
      async userCodeConfirmSource(ctx, form, client, deviceInfo, userCode) {
        ctx.body = page('Confirm device', `<h1 id="op.deviceConfirm">Confirm ${esc(client.clientId)}</h1>
<p id="op.userCode">${esc(userCode)}</p>
${form}
<button type="submit" form="op.deviceConfirmForm">Continue</button>
<button type="submit" form="op.deviceConfirmForm" name="abort" value="yes">Abort</button>`);
      },
      async successSource(ctx) {
        ctx.body = page('Device signed in', `<h1 id="op.deviceSuccess">Signed in ${esc(ctx.oidc.client.clientId)}</h1>`);
      },
    },
  },
  pkce: { required: () => true },
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  // Every refresh consumes the refresh token and returns a new one; presenting a consumed
  // one again is refused (invalid_grant) and revokes the whole grant.
  rotateRefreshToken: () => true,
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  ttl: { AccessToken: 3600, AuthorizationCode: 60, IdToken: 3600, RefreshToken: 86400,
    Grant: 86400, Interaction: 600, Session: 86400,
    DeviceCode: (ctx, token, client) => settingsOf(client?.clientId).deviceCodeTtl ?? device.ttl },
  renderError(ctx, out) {
    ctx.type = 'json';
    ctx.body = out;
  },
});

// Device flow: advertise an interval, enforce it with slow_down, log the polls.
const polling = new Map(); // device_code -> { last: ms | null, interval: s }
const polls = [];
provider.use(async (ctx, next) => {
  await next();
  const { oidc } = ctx;
  if (!oidc) return;
  if (oidc.route === 'device_authorization' && ctx.status === 200 && ctx.body?.device_code) {
    const settings = settingsOf(oidc.client.clientId);
    const interval = 'interval' in settings ? settings.interval : device.interval;
    if (interval != null) ctx.body.interval = interval;
    polling.set(ctx.body.device_code, { last: null, interval: interval ?? 5 });
  } else if (oidc.route === 'token' && oidc.params?.grant_type === DEVICE_GRANT) {
    const now = Date.now();
    const state = polling.get(oidc.params.device_code);
    let answer = ctx.status === 200 ? 'tokens' : ctx.body?.error;
    if (state) {
      const tooSoon = state.last !== null && now - state.last < state.interval * 1000 - 100;
      if (answer === 'authorization_pending' && tooSoon) {
        state.interval += device.slowDownIncrement;
        const err = new errors.SlowDown();
        ctx.body = { error: err.error, error_description: err.error_description };
        answer = err.error;
      }
      state.last = now;
    }
    polls.push({ client_id: oidc.client?.clientId ?? null, at: now / 1000, answer });
  }
});

// Introspection requests, whatever the answer (oidc-provider answers a JWT with 400).
const introspections = [];
provider.use(async (ctx, next) => {
  await next();
  if (ctx.oidc?.route !== 'introspection') return;
  const token = ctx.oidc.params?.token;
  introspections.push({
    client_id: ctx.oidc.client?.clientId ?? null,
    token_sha256: typeof token === 'string' ? createHash('sha256').update(token).digest('hex') : null,
    status: ctx.status,
    error: ctx.body?.error ?? null,
  });
});

function cookie(req, name) {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [key, ...value] = part.trim().split('=');
    if (key === name) return decodeURIComponent(value.join('='));
  }
  return undefined;
}

async function interaction(req, res) {
  const details = await provider.interactionDetails(req, res);
  const { prompt, params, session } = details;
  let account = params.login_hint;
  if (details.deviceCode) {
    account = cookie(req, 'op_account') ?? account;
    res.setHeader('Set-Cookie', 'op_account=; Path=/; Max-Age=0');
  }
  let result;
  if (account === 'deny') {
    result = { error: 'access_denied', error_description: 'The user declined' };
  } else if (prompt.name === 'login') {
    if (!config.accounts[account]) {
      res.writeHead(400, { 'content-type': 'text/plain' });
      res.end(`unknown account ${account}`);
      return;
    }
    const { amr } = settingsOf(params.client_id);
    result = { login: { accountId: account, ...(amr ? { amr } : {}) } };
  } else {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    const missing = prompt.details;
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes || {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    result = { consent: { grantId: await grant.save() } };
  }
  await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: true });
}

const grants = {};
provider.on('grant.success', (ctx) => {
  const key = `${ctx.oidc.client.clientId} ${ctx.oidc.params.grant_type}`;
  grants[key] = (grants[key] ?? 0) + 1;
});

function settle(clientId, ok, err) {
  const entry = deliveries.find((d) => d.client_id === clientId && d.ok === null);
  if (!entry) return;
  entry.ok = ok;
  if (err && !entry.error) entry.error = String(err.message ?? err);
}
provider.on('backchannel.success', (ctx, client) => settle(client.clientId, true));
provider.on('backchannel.error', (ctx, err, client) => settle(client.clientId, false, err));

async function readJson(req) {
  let body = '';
  for await (const chunk of req) body += chunk;
  return JSON.parse(body || '{}');
}

function json(res, status, body) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

async function registerClient(req, res) {
  const { metadata, settings } = await readJson(req);
  if (config.clients.some((c) => c.client_id === metadata.client_id)) {
    json(res, 400, { error: `${metadata.client_id} is a configured client` });
    return;
  }
  try {
    await provider.Client.validate(metadata);
  } catch (err) {
    json(res, 400, { error: err.error ?? 'invalid', error_description: err.error_description ?? String(err) });
    return;
  }
  await provider.Client.adapter.upsert(metadata.client_id, metadata);
  clientSettings[metadata.client_id] = settings ?? {};
  json(res, 201, metadata);
}

async function expireDeviceCode(req, res) {
  const { user_code: userCode } = await readJson(req);
  const normalized = String(userCode).toUpperCase().replace(/\W/g, '');
  const code = await provider.DeviceCode.findByUserCode(normalized, { ignoreExpiration: true });
  if (!code) {
    json(res, 404, { error: 'no such user_code' });
    return;
  }
  code.exp = Math.floor(Date.now() / 1000);
  await code.save();
  json(res, 200, {});
}

const testRoutes = {
  'GET /__test/grants': (req, res) => json(res, 200, grants),
  'GET /__test/backchannel': (req, res) => json(res, 200, deliveries),
  'GET /__test/device': (req, res) => json(res, 200, polls),
  'GET /__test/introspection': (req, res) => json(res, 200, introspections),
  'POST /__test/device/expire': expireDeviceCode,
  'POST /__test/clients': registerClient,
};

const handler = provider.callback();
const server = http.createServer((req, res) => {
  const url = new URL(req.url, issuer);
  const route = testRoutes[`${req.method} ${url.pathname}`];
  const fail = (err) => {
    if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
    res.end(String(err?.stack ?? err));
  };
  if (route) {
    Promise.resolve(route(req, res)).catch(fail);
    return;
  }
  if (req.method === 'GET' && url.pathname === '/device' && url.searchParams.has('op_account')) {
    const account = url.searchParams.get('op_account');
    url.searchParams.delete('op_account');
    res.writeHead(303, {
      location: url.pathname + url.search,
      'set-cookie': `op_account=${encodeURIComponent(account)}; Path=/; HttpOnly; SameSite=Lax`,
    });
    res.end();
    return;
  }
  if (url.pathname.startsWith('/interaction/')) {
    interaction(req, res).catch(fail);
    return;
  }
  handler(req, res);
});
server.listen(config.port, '127.0.0.1', () => {
  process.stdout.write(`ready ${issuer}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
