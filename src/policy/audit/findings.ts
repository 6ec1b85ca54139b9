/**
 * What `security.audit` collects as it goes: the warnings (id, severity, the setting to change,
 * a message saying what to change) and the secrets it names (purpose, set, required). Reads a
 * secret's value only to decide a fact about it (set, shorter than `MIN_SECRET_LENGTH`, a known
 * development value) and never keeps the value, or any part of one.
 */
export type Severity = "high" | "medium" | "low" | "info";

export interface Warning {
  id: string;
  severity: Severity;
  setting: string;
  message: string;
}

export interface SecretEntry {
  name: string;
  purpose: string;
  set: boolean;
  required: boolean;
}

/** Development values shipped in .dev.vars.example and the test setup: never in production. */
const DEV_VALUES = new Set(["dev-token", "dev-hooks-token", "dev-connector-secret"]);
export const MIN_SECRET_LENGTH = 24;
export const SEVERITY_ORDER: Severity[] = ["high", "medium", "low", "info"];

/** A secret's value, when it is set to something. */
export function secretValue(env: Record<string, unknown>, name: string): string | undefined {
  const v = env[name];
  return typeof v === "string" && v !== "" ? v : undefined;
}

export class Findings {
  readonly warnings: Warning[] = [];
  readonly secrets: SecretEntry[] = [];

  constructor(private readonly env: Record<string, unknown>) {}

  warn(warning: Warning): void {
    this.warnings.push(warning);
  }

  /** Whether the secret `name` is set. */
  isSet(name: string): boolean {
    return secretValue(this.env, name) !== undefined;
  }

  /** Names a secret in the report; with the `setting` it is configured at, warns when its value is weak. */
  secret(entry: SecretEntry, setting?: string): void {
    this.secrets.push(entry);
    if (setting !== undefined) this.checkStrength(entry.name, setting);
  }

  private checkStrength(name: string, setting: string): void {
    const v = secretValue(this.env, name);
    if (v === undefined) return;
    if (DEV_VALUES.has(v)) {
      this.warn({
        id: "secret-dev-value",
        severity: "high",
        setting,
        message: `${name} holds a development value from .dev.vars.example; set a random secret (wrangler secret put ${name})`,
      });
    } else if (v.length < MIN_SECRET_LENGTH) {
      this.warn({
        id: "secret-short",
        severity: "medium",
        setting,
        message: `${name} is shorter than ${MIN_SECRET_LENGTH} characters; use a long random value`,
      });
    }
  }

  /** The warnings most severe first (in the order found within a severity), and their count per severity. */
  sorted(): { warnings: Warning[]; summary: Record<Severity, number> } {
    const rank = (w: Warning) => SEVERITY_ORDER.indexOf(w.severity);
    const warnings = [...this.warnings].sort((x, y) => rank(x) - rank(y));
    const summary = Object.fromEntries(
      SEVERITY_ORDER.map((s) => [s, warnings.filter((w) => w.severity === s).length]),
    ) as Record<Severity, number>;
    return { warnings, summary };
  }
}
