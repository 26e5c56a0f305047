// A distribution token server for the OCI auth tests: GET /token?service=&scope= with HTTP
// Basic credentials (the user:password in argv[4]) answers {"token": <RS256 JWT>} whose
// header carries the signing certificate (x5c) the registry trusts (rootcertbundle).
// argv: key.pem cert.pem port user:password. Prints {"port":N} once listening.
'use strict';

const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');

const [key, cert, port, cred] = process.argv.slice(2);
const privateKey = crypto.createPrivateKey(fs.readFileSync(key));
const der = new crypto.X509Certificate(fs.readFileSync(cert)).raw.toString('base64');
const b64u = (b) => Buffer.from(b).toString('base64url');

http
  .createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    const want = 'Basic ' + Buffer.from(cred).toString('base64');
    if (url.pathname !== '/token' || req.headers.authorization !== want) {
      res.writeHead(401, { 'Content-Type': 'application/json' });
      return res.end('{"errors":[{"code":"UNAUTHORIZED"}]}');
    }
    const access = [];
    for (const s of url.searchParams.getAll('scope')) {
      const [type, name, actions] = s.split(':');
      access.push({ type, name, actions: actions.split(',') });
    }
    const now = Math.floor(Date.now() / 1000);
    const head = { alg: 'RS256', typ: 'JWT', x5c: [der] };
    const claims = {
      iss: 'modelgate-test',
      sub: cred.split(':')[0],
      aud: url.searchParams.get('service'),
      exp: now + 300,
      nbf: now - 10,
      iat: now,
      jti: crypto.randomUUID(),
      access,
    };
    const input = b64u(JSON.stringify(head)) + '.' + b64u(JSON.stringify(claims));
    const sig = crypto.sign('RSA-SHA256', Buffer.from(input), privateKey);
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ token: input + '.' + b64u(sig), expires_in: 300 }));
  })
  .listen(Number(port), '127.0.0.1', function () {
    console.log(JSON.stringify({ port: this.address().port }));
  });
