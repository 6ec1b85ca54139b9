/**
 * The pairing page (`pairing.list`): senders a connector does not know yet, with the code their
 * notice showed and an Approve button (`pairing.approve`), and the approved senders with Revoke
 * (`pairing.revoke`). SPEC §18 "Access".
 */
import type { FC } from "hono/jsx";
import { ActionButton, Page, Table, When } from "../layout";

export interface PendingCode {
  channel: string;
  code: string;
  accountId: string;
  peerId: string;
  createdAt: number;
  expiresAt: number;
}

export interface ApprovedSender {
  channel: string;
  peerId: string;
  approvedAt: number;
}

export const PairingPage: FC<{
  pending: PendingCode[];
  approved: ApprovedSender[];
  csrf: string;
  notice?: string | undefined;
}> = ({ pending, approved, csrf, notice }) => (
  <Page title="Pairing" section="/ui/pairing" csrf={csrf} notice={notice}>
    <h1>Pairing</h1>
    <p class="muted">
      A sender a connector with <code>dmPolicy: "pairing"</code> does not know yet gets a code and no answer.
      Approve the code they show you; their next message runs.
    </p>
    <h2>Waiting for approval</h2>
    <Table
      label="Pending pairing codes"
      head={["Channel", "Code", "Sender", "Asked", "Expires", ""]}
      rows={pending.length}
      empty="No sender is waiting."
    >
      {pending.map((p) => (
        <tr data-code={p.code}>
          <td>{p.channel}</td>
          <td>
            <code>{p.code}</code>
          </td>
          <td class="wrap">{p.peerId}</td>
          <td class="nowrap">
            <When ms={p.createdAt} />
          </td>
          <td class="nowrap">
            <When ms={p.expiresAt} />
          </td>
          <td>
            <ActionButton
              action="/ui/pairing/approve"
              csrf={csrf}
              fields={{ channel: p.channel, code: p.code }}
              label="Approve"
            />
          </td>
        </tr>
      ))}
    </Table>
    <h2>Approved senders</h2>
    <Table
      label="Approved senders"
      head={["Channel", "Sender", "Approved", ""]}
      rows={approved.length}
      empty="No approved senders."
    >
      {approved.map((a) => (
        <tr>
          <td>{a.channel}</td>
          <td class="wrap">{a.peerId}</td>
          <td class="nowrap">
            <When ms={a.approvedAt} />
          </td>
          <td>
            <ActionButton
              action="/ui/pairing/revoke"
              csrf={csrf}
              fields={{ channel: a.channel, peerId: a.peerId }}
              label="Revoke"
            />
          </td>
        </tr>
      ))}
    </Table>
  </Page>
);
