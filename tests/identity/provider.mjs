// provider.mjs - a real OpenID provider for the single sign-on test: npm oidc-provider (a
// certified implementation) on 127.0.0.1 with its development login and consent pages,
// one confidential client (modelgated) that must use PKCE S256. Any login name signs in;
// its groups: "rita" is in ml-reviewers, anyone else in no mapped group.
//
// Usage: node provider.mjs PORT_FILE REDIRECT_URI CLIENT_SECRET
import fs from 'node:fs';
import http from 'node:http';
import Provider from 'oidc-provider';

const [portFile, redirectUri, clientSecret] = process.argv.slice(2);
const server = http.createServer();
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  const issuer = `http://127.0.0.1:${port}`;
  const provider = new Provider(issuer, {
    clients: [{
      client_id: 'modelgate-ui',
      client_secret: clientSecret,
      redirect_uris: [redirectUri],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_post',
    }],
    pkce: { required: () => true, methods: ['S256'] },
    claims: { openid: ['sub'], email: ['email'], profile: ['groups', 'name'] },
    findAccount: async (ctx, id) => ({
      accountId: id,
      claims: async () => ({
        sub: id,
        email: `${id}@example.com`,
        name: id,
        groups: id === 'rita' ? ['ml-reviewers'] : ['nobody'],
      }),
    }),
    features: { devInteractions: { enabled: true } },
    cookies: { keys: ['modelgate-sso-test'] },
    // the ID token carries the profile claims (modelgated reads groups from it)
    conformIdTokenClaims: false,
  });
  provider.proxy = false;
  server.on('request', provider.callback());
  fs.writeFileSync(portFile, `${port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
