// issuer.mjs - a JWKS issuer for the identity tests, made with jose: an OpenID discovery
// document and a JWKS on 127.0.0.1, and tokens minted on request, good and bad.
//
// Usage: node issuer.mjs PORT_FILE   (writes the port once listening; SIGTERM stops it)
//
// GET  /.well-known/openid-configuration, /jwks   what a relying party fetches
// GET  /mint?kid=rsa-1|ec-1|rsa-unpublished&sub=&email=&groups=a,b&aud=&iss=&exp=&nbf=&jti=
//      a signed JWT (exp/nbf are seconds relative to now; iss defaults to this issuer)
// GET  /mint?bad=none|hs256-rsa-public|tampered&...   the refusal classes no library mints
// POST /publish?kids=rsa-1,ec-1                        which keys the JWKS shows (rotation)
// GET  /stats                                          {"jwks_gets": n}
import http from 'node:http';
import fs from 'node:fs';
import { SignJWT, UnsecuredJWT, exportJWK, exportSPKI, generateKeyPair } from 'jose';

const keys = {
  'rsa-1': { alg: 'RS256', ...(await generateKeyPair('RS256', { extractable: true })) },
  'ec-1': { alg: 'ES256', ...(await generateKeyPair('ES256', { extractable: true })) },
  'rsa-unpublished': { alg: 'RS256', ...(await generateKeyPair('RS256', { extractable: true })) },
};
let published = ['rsa-1', 'ec-1'];
let jwksGets = 0;
let issuer = '';

async function jwks() {
  const out = [];
  for (const kid of published) {
    const jwk = await exportJWK(keys[kid].publicKey);
    out.push({ ...jwk, kid, use: 'sig', alg: keys[kid].alg });
  }
  return { keys: out };
}

function claimsFrom(q) {
  const now = Math.floor(Date.now() / 1000);
  const c = {
    iss: q.get('iss') ?? issuer,
    sub: q.get('sub') ?? 'alice',
    aud: q.get('aud') ?? 'modelgate',
    iat: now,
    exp: now + Number(q.get('exp') ?? 600),
  };
  if (q.has('nbf')) c.nbf = now + Number(q.get('nbf'));
  if (q.has('email')) c.email = q.get('email');
  if (q.has('groups')) c.groups = q.get('groups') === '' ? [] : q.get('groups').split(',');
  if (q.has('jti')) c.jti = q.get('jti');
  for (const [k, v] of q) if (k.startsWith('c.')) c[k.slice(2)] = v;
  return c;
}

const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');

async function mint(q) {
  const claims = claimsFrom(q);
  const kid = q.get('kid') ?? 'rsa-1';
  const k = keys[kid];
  switch (q.get('bad')) {
    case 'none':
      return new UnsecuredJWT(claims).encode();
    case 'hs256-rsa-public': {
      // The classic confusion: HMAC keyed with the RSA public key the verifier holds.
      const secret = new TextEncoder().encode(await exportSPKI(keys['rsa-1'].publicKey));
      return new SignJWT(claims).setProtectedHeader({ alg: 'HS256', kid: 'rsa-1' }).sign(secret);
    }
    case 'tampered': {
      const t = await new SignJWT(claims).setProtectedHeader({ alg: k.alg, kid }).sign(k.privateKey);
      const [h, , s] = t.split('.');
      return `${h}.${b64({ ...claims, sub: 'root' })}.${s}`;
    }
    default:
      return new SignJWT(claims).setProtectedHeader({ alg: k.alg, kid, typ: 'JWT' }).sign(k.privateKey);
  }
}

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, issuer);
  const send = (status, body, type = 'application/json') => {
    res.writeHead(status, { 'content-type': type });
    res.end(typeof body === 'string' ? body : JSON.stringify(body));
  };
  try {
    if (url.pathname === '/.well-known/openid-configuration') {
      return send(200, {
        issuer,
        jwks_uri: `${issuer}/jwks`,
        authorization_endpoint: `${issuer}/auth`,
        token_endpoint: `${issuer}/token`,
        id_token_signing_alg_values_supported: ['RS256', 'ES256'],
      });
    }
    if (url.pathname === '/jwks') {
      jwksGets++;
      return send(200, await jwks());
    }
    if (url.pathname === '/mint') return send(200, await mint(url.searchParams), 'text/plain');
    if (url.pathname === '/publish' && req.method === 'POST') {
      published = url.searchParams.get('kids').split(',').filter((k) => k in keys);
      return send(200, { published });
    }
    if (url.pathname === '/stats') return send(200, { jwks_gets: jwksGets });
    return send(404, { error: 'not found' });
  } catch (e) {
    return send(500, { error: String(e) });
  }
});

server.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  issuer = `http://127.0.0.1:${port}`;
  fs.writeFileSync(process.argv[2], `${port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
