// A real OpenID Connect provider on loopback for tests/test_oidc.py (npm's oidc-provider):
// two accounts, hana (groups ["hr"]) and omar (no groups), signed in at the provider's own
// development login form (any password), and one confidential client whose PKCE is required.
// Usage: node provider.mjs PORT CLIENT_ID CLIENT_SECRET REDIRECT_URI
import Provider from "oidc-provider";

const [port, clientId, clientSecret, redirectUri] = process.argv.slice(2);
const accounts = {
  hana: { sub: "hana", preferred_username: "hana", email: "hana@example.test", groups: ["hr"] },
  omar: { sub: "omar", preferred_username: "omar", email: "omar@example.test", groups: [] },
};

const provider = new Provider(`http://127.0.0.1:${port}`, {
  clients: [{
    client_id: clientId,
    client_secret: clientSecret,
    redirect_uris: [redirectUri],
    grant_types: ["authorization_code"],
    response_types: ["code"],
  }],
  pkce: { required: () => true },
  claims: { openid: ["sub"], profile: ["preferred_username"], email: ["email"], groups: ["groups"] },
  // The claims in the ID token itself, where hybrid-rag reads them (no userinfo call).
  conformIdTokenClaims: false,
  findAccount: async (ctx, id) => (accounts[id]
    ? { accountId: id, claims: async () => accounts[id] }
    : undefined),
  features: { devInteractions: { enabled: true } },
  cookies: { keys: ["a test provider's cookie key"] },
});
provider.listen(Number(port), "127.0.0.1", () => console.log(`ready ${provider.issuer}`));
