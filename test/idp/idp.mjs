// An OpenID Connect provider for Arbiter's identity tests (docs/identity.md): the real
// oidc-provider on 127.0.0.1, with a public test client, a few users with groups, RS256 and ES256
// keys, and helpers that let a test get tokens without a person at a browser.
//
//   node idp.mjs [--port N] [--alg RS256|ES256]
//
// Prints one line of JSON when listening: {"port": N, "issuer": "http://127.0.0.1:N"}. Port 0 (the
// default) is any free port. Exits when stdin closes or on SIGTERM, so a test that dies does not
// leave it running.
//
// Clients (public, PKCE S256, device flow, authorization code, refresh tokens; redirect URIs
// http://127.0.0.1/sign-in/callback on any port, as RFC 8252 allows loopback):
//   arbiter     the client Arbiter is configured with (audience = client id: ID tokens' aud)
//   other-app   another client: its tokens carry aud "other-app"
// Users (sign in by name, no password): alice (vision-team), carol (vision-leads), root
// (platform), mallory (sales, mapped to nothing in the tests).
//
// Test routes, beside the provider's own:
//   GET  /interaction/:uid      a sign-in form: one text field "login" (the user's name)
//   POST /interaction/:uid      signs that user in and grants what the client asked for
//   GET  /test/token?user=alice[&client=arbiter][&ttl=SECONDS]
//        runs the authorization code flow with PKCE against this provider over HTTP, as a browser
//        would, and answers the token endpoint's JSON (id_token, access_token, refresh_token);
//        ttl sets the ID token's lifetime
//   GET  /test/device?user_code=XXXX-XXXX&user=alice
//        approves a device authorization as that user, through the provider's device pages
//   POST /test/rotate           new signing keys (new kids), the old ones dropped from the JWKS
import crypto from 'node:crypto';
import http from 'node:http';
import process from 'node:process';

import Provider from 'oidc-provider';

const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : fallback;
};
const wantPort = Number(flag('--port', '0'));
const alg = flag('--alg', 'RS256');

const USERS = {
  alice: ['vision-team'],
  carol: ['vision-leads'],
  root: ['platform'],
  mallory: ['sales'],
};
const REDIRECT = 'http://127.0.0.1/sign-in/callback';

let generation = 0;
let idTokenTtl = null; // the next ID token's lifetime, when a test asked for one

function newKeys() {
  generation += 1;
  const rsa = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
  const ec = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
  return [
    { ...rsa.export({ format: 'jwk' }), kid: `rsa-${generation}`, alg: 'RS256', use: 'sig' },
    { ...ec.export({ format: 'jwk' }), kid: `ec-${generation}`, alg: 'ES256', use: 'sig' },
  ];
}

function client(id) {
  return {
    client_id: id,
    application_type: 'native',
    token_endpoint_auth_method: 'none',
    grant_types: [
      'authorization_code',
      'refresh_token',
      'urn:ietf:params:oauth:grant-type:device_code',
    ],
    response_types: ['code'],
    redirect_uris: [REDIRECT],
    id_token_signed_response_alg: alg,
  };
}

function newProvider(issuer) {
  const provider = new Provider(issuer, {
    clients: [client('arbiter'), client('other-app')],
    jwks: { keys: newKeys() },
    async findAccount(ctx, id) {
      if (!USERS[id]) return undefined;
      return {
        accountId: id,
        async claims() {
          return { sub: id, preferred_username: id, name: id, groups: USERS[id] };
        },
      };
    },
    scopes: ['openid', 'offline_access', 'profile', 'groups'],
    claims: { openid: ['sub'], profile: ['preferred_username', 'name', 'groups'], groups: ['groups'] },
    // The user's claims in the ID token itself, as Arbiter reads them (not only at userinfo).
    conformIdTokenClaims: false,
    enabledJWA: { idTokenSigningAlgValues: ['RS256', 'ES256'] },
    features: {
      devInteractions: { enabled: false },
      deviceFlow: { enabled: true },
      revocation: { enabled: true },
    },
    pkce: { required: () => true },
    // The console calls the token endpoint from its own origin: any loopback origin may.
    clientBasedCORS(ctx, origin) {
      return /^http:\/\/(127\.0\.0\.1|localhost)(:\d+)?$/.test(origin);
    },
    ttl: {
      IdToken() {
        return idTokenTtl ?? 3600;
      },
      AccessToken: 3600,
      AuthorizationCode: 60,
      DeviceCode: 600,
      Grant: 3600,
      Interaction: 600,
      Session: 3600,
      RefreshToken: 86400,
    },
    cookies: { keys: ['arbiter-test-idp'] },
  });
  provider.proxy = false;
  return provider;
}

async function readForm(req) {
  let body = '';
  for await (const chunk of req) body += chunk;
  return new URLSearchParams(body);
}

function send(res, status, type, body) {
  res.writeHead(status, { 'Content-Type': type, 'Cache-Control': 'no-store' });
  res.end(body);
}

const loginPage = (uid, prompt) => `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Test IdP sign-in</title></head>
<body><h1>Test IdP</h1><p>${prompt}</p>
<form method="post" action="/interaction/${uid}">
<label>User <input id="login" name="login" autofocus></label>
<button id="submit" type="submit">Sign in</button>
</form></body></html>`;

// Signs the interaction's user in and grants every scope and claim the client asked for.
async function finishInteraction(provider, req, res, login) {
  const details = await provider.interactionDetails(req, res);
  if (!USERS[login]) {
    send(res, 200, 'text/html; charset=utf-8', loginPage(details.uid, `no user ${login}`));
    return;
  }
  const grant = new provider.Grant({ accountId: login, clientId: details.params.client_id });
  grant.addOIDCScope(String(details.params.scope || 'openid'));
  const grantId = await grant.save();
  await provider.interactionFinished(
    req,
    res,
    { login: { accountId: login }, consent: { grantId } },
    { mergeWithLastSubmission: false },
  );
}

// A cookie jar and fetch that follows nothing by itself: each redirect is the caller's.
function browser() {
  const jar = new Map();
  return async (url, init = {}) => {
    const headers = { ...(init.headers || {}) };
    if (jar.size) headers.cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const res = await fetch(url, { ...init, headers, redirect: 'manual' });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const eq = pair.indexOf('=');
      jar.set(pair.slice(0, eq).trim(), pair.slice(eq + 1));
    }
    return res;
  };
}

const form = (o) => ({
  method: 'POST',
  headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
  body: new URLSearchParams(o).toString(),
});

// Follows redirects from `url` (at most 20), signing `user` in at the interaction; returns the
// last response and its URL: the one that is no redirect, or the first to the callback.
async function follow(get, issuer, url, user, init) {
  let res = await get(url, init);
  for (let i = 0; i < 20; i += 1) {
    const loc = res.headers.get('location');
    if (res.status < 300 || res.status >= 400 || !loc) return { res, url };
    url = new URL(loc, url).href;
    if (url.includes('/sign-in/callback')) return { res, url };
    res = url.includes('/interaction/')
      ? await get(url, form({ login: user }))
      : await get(url);
  }
  throw new Error('too many redirects');
}

async function mintToken(issuer, user, clientId, ttl) {
  const get = browser();
  const verifier = crypto.randomBytes(32).toString('base64url');
  const challenge = crypto.createHash('sha256').update(verifier).digest('base64url');
  const redirectUri = 'http://127.0.0.1:9/sign-in/callback';
  const auth = new URL(`${issuer}/auth`);
  for (const [k, v] of Object.entries({
    client_id: clientId,
    response_type: 'code',
    redirect_uri: redirectUri,
    scope: 'openid profile groups offline_access',
    prompt: 'consent',
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state: crypto.randomBytes(8).toString('hex'),
    nonce: crypto.randomBytes(8).toString('hex'),
  })) {
    auth.searchParams.set(k, v);
  }
  const { url } = await follow(get, issuer, auth.href, user);
  const code = new URL(url).searchParams.get('code');
  if (!code) throw new Error(`no code: ended at ${url}`);
  idTokenTtl = ttl;
  try {
    const res = await get(
      `${issuer}/token`,
      form({
        grant_type: 'authorization_code',
        code,
        redirect_uri: redirectUri,
        client_id: clientId,
        code_verifier: verifier,
      }),
    );
    return { status: res.status, body: await res.text() };
  } finally {
    idTokenTtl = null;
  }
}

async function approveDevice(issuer, userCode, user) {
  const get = browser();
  const page = await (await get(`${issuer}/device?user_code=${encodeURIComponent(userCode)}`)).text();
  const xsrf = /name="xsrf" value="([^"]+)"/.exec(page)?.[1];
  if (!xsrf) throw new Error('no xsrf on the device page');
  const { res } = await follow(
    get,
    issuer,
    `${issuer}/device`,
    user,
    form({ xsrf, user_code: userCode, confirm: 'yes' }),
  );
  const text = await res.text();
  if (!/Sign-in Success/i.test(text)) throw new Error(`device approval failed: ${text.slice(0, 300)}`);
}

let provider;
let handler; // provider.callback()
let issuer;
const server = http.createServer(async (req, res) => {
  try {
    const url = new URL(req.url, issuer);
    const m = /^\/interaction\/([^/]+)$/.exec(url.pathname);
    if (m && req.method === 'GET') {
      const details = await provider.interactionDetails(req, res);
      send(res, 200, 'text/html; charset=utf-8', loginPage(details.uid, `sign in to ${details.params.client_id}`));
      return;
    }
    if (m && req.method === 'POST') {
      const body = await readForm(req);
      await finishInteraction(provider, req, res, body.get('login') || '');
      return;
    }
    if (url.pathname === '/test/token') {
      const user = url.searchParams.get('user') || 'alice';
      const ttl = url.searchParams.has('ttl') ? Number(url.searchParams.get('ttl')) : null;
      const r = await mintToken(issuer, user, url.searchParams.get('client') || 'arbiter', ttl);
      send(res, r.status, 'application/json', r.body);
      return;
    }
    if (url.pathname === '/test/device') {
      await approveDevice(issuer, url.searchParams.get('user_code') || '', url.searchParams.get('user') || 'alice');
      send(res, 200, 'application/json', JSON.stringify({ approved: true }));
      return;
    }
    if (url.pathname === '/test/rotate' && req.method === 'POST') {
      provider = newProvider(issuer);
      handler = provider.callback();
      send(res, 200, 'application/json', JSON.stringify({ generation }));
      return;
    }
    handler(req, res);
  } catch (e) {
    send(res, 500, 'application/json', JSON.stringify({ error: String(e && e.stack || e) }));
  }
});

server.listen(wantPort, '127.0.0.1', () => {
  const { port } = server.address();
  issuer = `http://127.0.0.1:${port}`;
  provider = newProvider(issuer);
  handler = provider.callback();
  process.stdout.write(`${JSON.stringify({ port, issuer })}\n`);
});

const stop = () => server.close(() => process.exit(0)) && setTimeout(() => process.exit(0), 500);
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.stdin.on('end', stop);
process.stdin.resume();
