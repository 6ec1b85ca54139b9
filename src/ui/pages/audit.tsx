/**
 * The security audit page (`security.audit`): the verdict, the warnings most severe first with
 * the setting to change, which secrets are set (names only), and which endpoints are open.
 */
import type { FC } from "hono/jsx";
import { Badge, Page, Table } from "../layout";

export interface AuditReport {
  ok: boolean;
  summary: Record<string, number>;
  warnings: Array<{ id: string; severity: string; setting: string; message: string }>;
  secrets: Array<{ name: string; purpose: string; set: boolean; required: boolean }>;
  endpoints: Array<{ method: string; path: string; auth: string; enabled: boolean; reason?: string }>;
}

const yes = (v: boolean, good = "yes", bad = "no") => (
  <Badge value={v ? good : bad} tone={v ? "b-ok" : "b-bad"} />
);

export const AuditPage: FC<{ report: AuditReport; csrf: string }> = ({ report, csrf }) => (
  <Page title="Security audit" section="/ui/audit" csrf={csrf}>
    <h1>Security audit</h1>
    <p class={report.ok ? "notice" : "error"}>
      {report.ok ? "No high-severity warnings." : "There are high-severity warnings: see below."}{" "}
      {Object.entries(report.summary)
        .map(([severity, n]) => `${n} ${severity}`)
        .join(" · ")}
    </p>
    <h2>Warnings</h2>
    <Table
      label="Warnings"
      head={["Severity", "Setting", "What to change"]}
      rows={report.warnings.length}
      empty="No warnings."
    >
      {report.warnings.map((w) => (
        <tr>
          <td>
            <Badge value={w.severity} />
          </td>
          <td class="nowrap">
            <code>{w.setting}</code>
          </td>
          <td class="wrap">{w.message}</td>
        </tr>
      ))}
    </Table>
    <h2>Secrets</h2>
    <Table
      label="Secrets"
      head={["Name", "Purpose", "Set", "Required"]}
      rows={report.secrets.length}
      empty="No secrets."
    >
      {report.secrets.map((s) => (
        <tr>
          <td class="nowrap">
            <code>{s.name}</code>
          </td>
          <td class="wrap">{s.purpose}</td>
          <td>
            {s.set || s.required ? yes(s.set, "set", "missing") : <Badge value="not set" tone="b-muted" />}
          </td>
          <td>{s.required ? "required" : "optional"}</td>
        </tr>
      ))}
    </Table>
    <h2>Endpoints</h2>
    <Table
      label="Endpoints"
      head={["Endpoint", "Auth", "Open"]}
      rows={report.endpoints.length}
      empty="No endpoints."
    >
      {report.endpoints.map((e) => (
        <tr>
          <td class="nowrap">
            <code>{`${e.method} ${e.path}`}</code>
          </td>
          <td class="wrap">{e.auth}</td>
          <td class="wrap">
            {yes(e.enabled, "open", "closed")} {e.reason ? <span class="muted small">{e.reason}</span> : ""}
          </td>
        </tr>
      ))}
    </Table>
  </Page>
);
