/**
 * Secret redaction for what agents read of other conversations (SPEC §6): `sessions_history`,
 * the messages of `sessions_list` rows and the notes `memory_write` stores. It errs towards
 * redacting: a false positive costs the model a word, a miss leaks a credential into another
 * context. Operators (`chat.history`, the transcript export) see the stored text as it is.
 */

const REDACTED = "[REDACTED]";

/** Names whose assigned value is a credential (`password=…`, `"api_key": "…"`, `DB_PASSWORD=…`). */
const SECRET_NAME =
  "[A-Za-z0-9_-]*?(?:password|passwd|passphrase|secret|api[_-]?key|access[_-]?key|private[_-]?key|token)";
/** Quoted values keep their quotes; a value already redacted, `null`, `true` or `false` is left alone. */
const ASSIGNMENT = new RegExp(
  `\\b(${SECRET_NAME}["']?\\s*[:=]\\s*)(?!["']?\\[REDACTED)(?!(?:null|true|false)\\b)("[^"\\n]+"|'[^'\\n]+'|[^\\s"',;&)}\\]]+)`,
  "gi",
);

/** Credentials that must never reach another model's context. Order matters: the most specific first. */
const SECRET_PATTERNS: Array<[RegExp, string | ((match: string, ...groups: string[]) => string)]> = [
  // PEM and PGP private keys, also when the END line was cut off.
  [
    /-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|$)/g,
    "[REDACTED PRIVATE KEY]",
  ],
  // The password of a URL's user info (`postgres://app:<password>@db`).
  [/\b([a-z][a-z0-9+.-]*:\/\/[^\s:/@]+:)(?!\[REDACTED)[^\s@/]+@/gi, `$1${REDACTED}@`],
  // JWTs: base64url JSON header and payload (both start `eyJ`), then the signature.
  [/\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*/g, REDACTED],
  // Bearer tokens: the word is kept. A token has a digit or a symbol, or is long (not prose).
  [
    /\b(Bearer\s+)(?=[A-Za-z0-9\-._~+/]*[0-9\-._~+/]|[A-Za-z0-9\-._~+/]{20})[A-Za-z0-9\-._~+/]{8,}=*/gi,
    `$1${REDACTED}`,
  ],
  [/\b(Authorization\s*:\s*Basic\s+)[A-Za-z0-9+/]{6,}={0,2}/gi, `$1${REDACTED}`],
  // Provider keys by prefix: Anthropic, OpenAI and OpenRouter (`sk-…`), Stripe, Google, AWS,
  // GitHub, GitLab, Hugging Face, npm, SendGrid, Slack.
  [/\bsk-ant-[A-Za-z0-9_-]{8,}/g, REDACTED],
  [/\bsk-[A-Za-z0-9_-]{16,}/g, REDACTED],
  [/\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}/g, REDACTED],
  [/\bwhsec_[A-Za-z0-9]{20,}/g, REDACTED],
  [/\bAIza[0-9A-Za-z_-]{30,}/g, REDACTED],
  [/\bya29\.[0-9A-Za-z_-]{20,}/g, REDACTED],
  [/\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g, REDACTED],
  [/\bgh[opsru]_[A-Za-z0-9]{20,}/g, REDACTED],
  [/\bgithub_pat_[A-Za-z0-9_]{20,}/g, REDACTED],
  [/\bglpat-[A-Za-z0-9_-]{20,}/g, REDACTED],
  [/\bhf_[A-Za-z0-9]{30,}/g, REDACTED],
  [/\bnpm_[A-Za-z0-9]{30,}/g, REDACTED],
  [/\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}/g, REDACTED],
  [/\bxox[abeoprs]-[A-Za-z0-9-]{10,}/g, REDACTED],
  [/\bxapp-\d-[A-Za-z0-9-]{10,}/g, REDACTED],
  [/\b(https:\/\/hooks\.slack\.com\/services\/)(?!\[REDACTED)[A-Za-z0-9/_-]+/g, `$1${REDACTED}`],
  // Last, so that a value already redacted above keeps its name and is not redacted twice.
  [
    ASSIGNMENT,
    (_match, name = "", value = "") => {
      const quote = value[0] === '"' || value[0] === "'" ? value[0] : "";
      return `${name}${quote}${REDACTED}${quote}`;
    },
  ],
];

/**
 * A literal every pattern above requires (matched case-insensitively, so a superset of each):
 * a text without any of them has nothing to redact, and the patterns are not run on it.
 */
const MAY_HOLD_SECRET =
  /-----BEGIN|:\/\/|eyJ|bearer|authorization|sk-|[sr]k_|whsec_|AIza|ya29\.|AKIA|ASIA|gh[opsru]_|github_pat_|glpat-|hf_|npm_|SG\.|xox|xapp-|password|passwd|passphrase|secret|api[_-]?key|access[_-]?key|private[_-]?key|token/i;

export function redactSecrets(text: string): { text: string; redacted: boolean } {
  if (!MAY_HOLD_SECRET.test(text)) return { text, redacted: false };
  let out = text;
  for (const [re, replacement] of SECRET_PATTERNS) {
    out = typeof replacement === "string" ? out.replace(re, replacement) : out.replace(re, replacement);
  }
  return { text: out, redacted: out !== text };
}
