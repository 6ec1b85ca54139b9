/**
 * Secret redaction for the agent view of other conversations (sessions_history, sessions_list
 * messages, memory notes): one row per secret shape, each a fake but realistic value in
 * ordinary text, plus text that must come through untouched.
 */
import { describe, expect, it } from "vitest";
import { redactSecrets } from "../../src/transcript/redaction";

interface Shape {
  name: string;
  /** The text around the secret; `$` marks where the secret goes. */
  text: string;
  secret: string;
  /** What `$` becomes (default `[REDACTED]`). */
  replacement?: string;
}

const pemBody = "MIIEowIBAAKCAQEAfakefakefakeFAKE0123456789abcdef\nQWERTYfakefakefake0123456789==";

const SHAPES: Shape[] = [
  {
    name: "OpenAI project key",
    text: "OPENAI_KEY is $ in prod",
    secret: "sk-proj-FAKEq2Xb7Lk9Ws3Nd5Tr8Yv1Mz4Hc6Jp0Ge-AbCdEf_12",
  },
  { name: "OpenAI legacy key", text: "use $.", secret: "sk-FAKE0123456789abcdefghijklmnopqrstuvwxyzABCD" },
  {
    name: "OpenAI service-account key",
    text: "svc: $ ok",
    secret: "sk-svcacct-FAKEa1b2c3d4e5f6g7h8i9j0kLmNoPqRsT",
  },
  {
    name: "Anthropic key",
    text: "claude key $, rotate it",
    secret: "sk-ant-api03-FAKE_k1Lm2Nn3Oo4Pp5Qq6Rr7Ss8Tt9Uu0-VvWwXxYyZz-AAAA",
  },
  { name: "OpenRouter key", text: "router: $", secret: `sk-or-v1-${"0f1e2d3c4b5a6978".repeat(4)}` },
  {
    name: "Stripe live secret key",
    text: "stripe $ (live)",
    secret: "sk_live_51FAKEabcDEF0123456789ghijKLMNop",
  },
  {
    name: "Stripe restricted key",
    text: "restricted $ here",
    secret: "rk_live_51FAKEzyxWVU9876543210tsrqPONM",
  },
  { name: "Stripe test key", text: "test mode $", secret: "sk_test_4eC39HqLyjWDarjtT1zdp7dcFAKE" },
  {
    name: "Stripe webhook secret",
    text: "signing secret $",
    secret: "whsec_FAKE5a1b2c3d4e5f6a7b8c9d0e1f2a3b",
  },
  {
    name: "Google API key",
    text: "maps key $ for the map",
    secret: "AIzaSyFAKE-0123456789abcdefghijklmnopq",
  },
  {
    name: "Google OAuth access token",
    text: "gcloud gave $ today",
    secret: "ya29.a0AfH6SMFAKEtokenVALUE0123456789_-abc",
  },
  { name: "AWS access key id", text: "id $ in us-east-1", secret: "AKIAIOSFODNN7EXAMPLE" },
  { name: "AWS temporary access key id", text: "sts $ expires", secret: "ASIAY34FZKBOKMUTVV7A" },
  {
    name: "GitHub classic token",
    text: "git push with $ please",
    secret: "ghp_FAKE0123456789abcdefghijKLMNOPqrstuv",
  },
  { name: "GitHub OAuth token", text: "oauth $", secret: "gho_FAKE0123456789abcdefghijKLMNOPqrstuv" },
  {
    name: "GitHub fine-grained token",
    text: "pat $ end",
    secret: "github_pat_11AFAKE0123456789_abcdefghijklmnopqrstuvwxyzABCDEFG",
  },
  { name: "GitLab token", text: "gitlab $ ok", secret: "glpat-FAKEab12cd34ef56gh78ij" },
  { name: "Hugging Face token", text: "hf: $", secret: "hf_FAKEabcdefghijklmnopqrstuvwxyzABCD" },
  {
    name: "npm token",
    text: "//registry.npmjs.org/:_authToken=$",
    secret: "npm_FAKEabcdefghijklmnopqrstuvwxyz0123",
  },
  {
    name: "SendGrid key",
    text: "mail key $ works",
    secret: "SG.FAKEabcdefghijklmnop.qrstuvwxyzABCDEFGHIJ0123456789abcdef",
  },
  {
    name: "Slack bot token",
    text: "bot $ joined",
    secret: "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpFAKE",
  },
  { name: "Slack user token", text: "user $", secret: "xoxp-123456789012-123456789012-abcdefFAKE" },
  {
    name: "Slack app token",
    text: "socket mode $ on",
    secret: "xapp-1-A0FAKE12345-1234567890123-abcdef0123456789",
  },
  {
    name: "Slack webhook URL",
    text: "post to $ now",
    secret: "https://hooks.slack.com/services/T00FAKE00/B00FAKE00/XXXXfakeXXXXfakeXXXXfake",
    replacement: "https://hooks.slack.com/services/[REDACTED]",
  },
  {
    name: "JWT",
    text: "session cookie $; expires soon",
    secret:
      "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkZha2UifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
  },
  {
    name: "PEM RSA private key",
    text: "key:\n$\nthanks",
    secret: `-----BEGIN RSA PRIVATE KEY-----\n${pemBody}\n-----END RSA PRIVATE KEY-----`,
    replacement: "[REDACTED PRIVATE KEY]",
  },
  {
    name: "PEM PKCS#8 private key",
    text: "$ done",
    secret: `-----BEGIN PRIVATE KEY-----\n${pemBody}\n-----END PRIVATE KEY-----`,
    replacement: "[REDACTED PRIVATE KEY]",
  },
  {
    name: "OpenSSH private key",
    text: "id_ed25519:\n$\n",
    secret: `-----BEGIN OPENSSH PRIVATE KEY-----\n${pemBody}\n-----END OPENSSH PRIVATE KEY-----`,
    replacement: "[REDACTED PRIVATE KEY]",
  },
  {
    name: "PGP private key block",
    text: "gpg export:\n$\nend",
    secret: `-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n${pemBody}\n-----END PGP PRIVATE KEY BLOCK-----`,
    replacement: "[REDACTED PRIVATE KEY]",
  },
  {
    name: "PEM private key cut off before its END line",
    text: "partial $",
    secret: `-----BEGIN EC PRIVATE KEY-----\n${pemBody}`,
    replacement: "[REDACTED PRIVATE KEY]",
  },
  { name: "password= assignment", text: "login with password=$ then", secret: "hunter2hunter2" },
  { name: "PASSWORD: quoted", text: 'PASSWORD: "$"\nUSER: bob', secret: "correct horse battery staple" },
  { name: "env var ending in _PASSWORD", text: "DB_PASSWORD=$\nDB_HOST=db", secret: "Pa55w0rd!" },
  { name: "JSON api_key", text: '{"api_key": "$", "region": "eu"}', secret: "c0ffee-FAKE-1234-abcd" },
  { name: "api-key header", text: "x-api-key: $\naccept: */*", secret: "live_FAKE0123456789abcdef" },
  { name: "apiKey property", text: "apiKey=$;", secret: "FAKEkey0123456789" },
  { name: "token= in a query string", text: "GET /feed?token=$&page=2", secret: "FAKE-0123456789abcdef" },
  { name: "access_token assignment", text: "access_token = '$' # keep", secret: "FAKEaccess0123456789" },
  { name: "client_secret assignment", text: "client_secret: $", secret: "FAKEclientsecret_0123" },
  {
    name: "AWS secret access key assignment",
    text: "aws_secret_access_key = $\nregion = us-east-1",
    secret: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
  },
  { name: "Bearer header", text: "Authorization: Bearer $\nHost: api", secret: "opaqueFAKEtoken0123456789" },
  {
    name: "bearer header in lower case",
    text: "authorization: bearer $",
    secret: "FAKE.0123456789-abc_def~",
  },
  { name: "Basic auth header", text: "Authorization: Basic $ sent", secret: "dXNlcjpGQUtFcGFzc3dvcmQ=" },
  {
    name: "password in a URL",
    text: "DATABASE_URL=postgres://app:$@db.internal:5432/app",
    secret: "s3cr3t-FAKE-pa55",
  },
];

describe("redactSecrets", () => {
  for (const shape of SHAPES) {
    it(`redacts a ${shape.name}, keeping the text around it`, () => {
      const input = shape.text.replace("$", shape.secret);
      const out = redactSecrets(input);
      expect(out.text).not.toContain(shape.secret);
      expect(out).toEqual({
        text: shape.text.replace("$", shape.replacement ?? "[REDACTED]"),
        redacted: true,
      });
    });
  }

  it("redacts every secret of a text, also several of one shape", () => {
    const a = "ghp_FAKE0123456789abcdefghijKLMNOPqrstuv";
    const b = "AKIAIOSFODNN7EXAMPLE";
    expect(redactSecrets(`${a} and ${b} and ${a}`).text).toBe("[REDACTED] and [REDACTED] and [REDACTED]");
  });

  it("is idempotent: redacted text stays as it is", () => {
    for (const shape of SHAPES) {
      const once = redactSecrets(shape.text.replace("$", shape.secret)).text;
      expect(redactSecrets(once)).toEqual({ text: once, redacted: false });
    }
  });

  const PLAIN = [
    "ask-me about task-force sk-8 and a bearer of news; AKIA is not a key",
    "Bearer authentication is described in RFC 6750",
    "the password reset link was sent; the api key is in the vault",
    "secretary, secrets and token budgets are ordinary words",
    "run 123e4567-e89b-12d3-a456-426614174000 in session 9b2c0f3e-1d4a-4b5c-8e6f-0a1b2c3d4e5f",
    "commit 0053039, hash deadbeefcafe1234 and color #ff8800",
    '{"totalTokens": 1200, "contextTokens": 4000, "max_tokens": 1024, "token_count": 5}',
    "Stats: runtime 1m02s • tokens 1.2k (in 800 / out 400) • sessionKey agent:main:main",
    "Basic setup: install, configure, deploy",
    "see https://example.com:8080/path@v2 and mailto:alice@example.com",
    "sk_live is a prefix, AIza and eyJ and xoxb alone are not keys",
    "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n-----END PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBa\n-----END CERTIFICATE-----",
    '{"sessionKey": "agent:main:main", "idempotencyKey": "k1", "token": null}',
    "empty values: password= ; token= ; api_key: ''",
    "Ünïcödé text, emoji 🎉 and 日本語 stay",
  ];
  for (const text of PLAIN) {
    it(`leaves alone: ${JSON.stringify(text.slice(0, 48))}`, () => {
      expect(redactSecrets(text)).toEqual({ text, redacted: false });
    });
  }
});
