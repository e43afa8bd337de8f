// A real OpenID provider for the sign-in tests: `node provider.mjs PORT ACCOUNTS_JSON`.
// One confidential client (`sursis`), accounts read from ACCOUNTS_JSON at every look-up (a test edits
// the file to move a person out of a group), the provider's own development login form.
// With SURSIS_TEST_GROUPS_IN=userinfo the ID token carries only the standard claims: email and
// groups are answered by the userinfo endpoint alone (as providers that keep ID tokens small do).
import { readFileSync } from "node:fs";
import Provider from "oidc-provider";

const [port, accountsFile, redirectUri] = process.argv.slice(2);
const issuer = `http://127.0.0.1:${port}`;

function account(id) {
  const people = JSON.parse(readFileSync(accountsFile, "utf8"));
  const person = people[id];
  if (!person) return undefined;
  return {
    accountId: id,
    async claims() {
      return { sub: id, email: person.email, groups: person.groups };
    },
  };
}

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: "sursis",
      client_secret: "sursis-test-secret",
      redirect_uris: [redirectUri],
      post_logout_redirect_uris: [],
      grant_types: ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"],
      response_types: ["code"],
    },
  ],
  claims: { openid: ["sub"], email: ["email"], groups: ["groups"] },
  scopes: ["openid", "email", "groups", "offline_access"],
  conformIdTokenClaims: process.env.SURSIS_TEST_GROUPS_IN === "userinfo",
  findAccount: (_ctx, id) => account(id),
  features: { devInteractions: { enabled: true }, deviceFlow: { enabled: true } },
  // Every sign-in gets a refresh token: the service reads the groups again with it.
  issueRefreshToken: async () => true,
  ttl: { IdToken: 300, Session: 3600, Interaction: 600, Grant: 3600, AuthorizationCode: 60, AccessToken: 300 },
  loadExistingGrant: async (ctx) => {
    // The test client is first-party: consent is implied, so a sign-in is one login form.
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope("openid email groups offline_access");
    await grant.save();
    return grant;
  },
});
provider.listen(Number(port), "127.0.0.1", () => {
  console.log(`listening ${issuer}`);
});
