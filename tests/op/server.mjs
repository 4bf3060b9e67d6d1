// A real OpenID Provider (the npm package oidc-provider) for the tests, on loopback.
//
// Usage: node tests/op/server.mjs config.json
//   config: { "port": 4000, "clients": [ ...client metadata... ],
//             "accounts": { "<id>": { ...claims... } },
//             "api": { "resource": "http://localhost/api", "scope": "api:read" } }
// Prints "ready <issuer>" once it listens.
//
// Test-only interaction: there is no login form. The authorization request's login_hint
// names the account to log in (login_hint=deny answers access_denied), and consent is
// granted at once. Its cookies are prefixed "op_" so they cannot clash with the app's
// cookies, which share the host 127.0.0.1.
//
// Test-only route: GET /__test/grants answers the successful token endpoint grants so far,
// counted per "<client_id> <grant_type>" (e.g. {"op-basic refresh_token": 3}), so a test
// can tell whether the app refreshed a token.
import { readFileSync } from 'node:fs';
import http from 'node:http';

import Provider, { errors } from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const issuer = `http://127.0.0.1:${config.port}`;

const provider = new Provider(issuer, {
  clients: config.clients,
  async findAccount(ctx, id) {
    const claims = config.accounts[id];
    if (!claims) return undefined;
    return { accountId: id, async claims() { return { sub: id, ...claims }; } };
  },
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'picture'],
  },
  cookies: {
    names: { session: 'op_session', interaction: 'op_interaction', resume: 'op_resume' },
    keys: ['test-only-cookie-key-0123456789abcdef'],
  },
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
  },
  pkce: { required: () => true },
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  // Every refresh consumes the refresh token and returns a new one; presenting a consumed
  // one again is refused (invalid_grant) and revokes the whole grant.
  rotateRefreshToken: () => true,
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  ttl: { AccessToken: 3600, AuthorizationCode: 60, IdToken: 3600, RefreshToken: 86400,
    Grant: 86400, Interaction: 600, Session: 86400 },
  renderError(ctx, out) {
    ctx.type = 'json';
    ctx.body = out;
  },
});

async function interaction(req, res) {
  const details = await provider.interactionDetails(req, res);
  const { prompt, params, session } = details;
  let result;
  if (params.login_hint === 'deny') {
    result = { error: 'access_denied', error_description: 'The user declined' };
  } else if (prompt.name === 'login') {
    if (!config.accounts[params.login_hint]) {
      res.writeHead(400, { 'content-type': 'text/plain' });
      res.end(`unknown login_hint ${params.login_hint}`);
      return;
    }
    result = { login: { accountId: params.login_hint } };
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

const handler = provider.callback();
const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/__test/grants') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(grants));
    return;
  }
  if (req.url.startsWith('/interaction/')) {
    interaction(req, res).catch((err) => {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String(err));
    });
    return;
  }
  handler(req, res);
});
server.listen(config.port, '127.0.0.1', () => {
  process.stdout.write(`ready ${issuer}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
