/**
 * The deliveries page (`deliveries.list`): the outbox newest first, filtered by status and
 * session, keyset-paged, with each delivery's attempts and last error; a dead delivery can be
 * queued again (`deliveries.retry`).
 */
import type { FC } from "hono/jsx";
import { ActionButton, Badge, Choice, Page, Pager, SessionLink, shortId, Table, When } from "../layout";

export interface DeliveryRow {
  deliveryId: string;
  kind: string;
  sessionKey: string;
  runId?: string;
  channel: string;
  to: string;
  text: string;
  status: string;
  attempts: number;
  nextAttemptAt?: number;
  lastError?: string;
  createdAt: number;
  deliveredAt?: number;
}

export interface DeliveriesData {
  filter: { status?: string; session?: string; cursor?: string };
  deliveries: DeliveryRow[];
  nextCursor?: string;
  /** This page's own URL, where a retry comes back to. */
  here: string;
}

export const DELIVERY_STATUSES = ["pending", "retrying", "delivered", "dead"] as const;

function preview(text: string): string {
  return text.length > 160 ? `${text.slice(0, 160)}…` : text;
}

export const DeliveriesPage: FC<DeliveriesData & { csrf: string; notice?: string }> = (props) => {
  const f = props.filter;
  return (
    <Page title="Deliveries" section="/ui/deliveries" csrf={props.csrf} notice={props.notice}>
      <h1>Deliveries</h1>
      <form class="filters" method="get" action="/ui/deliveries" aria-label="Filter deliveries">
        <Choice name="status" label="Status" value={f.status} options={DELIVERY_STATUSES} />
        <label class="grow">
          Session key
          <input name="session" value={f.session ?? ""} placeholder="agent:main:main" />
        </label>
        <button type="submit">Filter</button>
        <a href="/ui/deliveries" class="small">
          Clear
        </a>
      </form>
      <Table
        label="Deliveries"
        head={[
          "Created",
          "Status",
          "Delivery",
          "Session",
          "Kind",
          "To",
          "Attempts",
          "Last error",
          "Text",
          "",
        ]}
        rows={props.deliveries.length}
        empty="No deliveries match."
      >
        {props.deliveries.map((d) => (
          <tr data-delivery={d.deliveryId}>
            <td class="nowrap">
              <When ms={d.createdAt} />
            </td>
            <td>
              <Badge value={d.status} />
            </td>
            <td class="nowrap">
              <code title={d.deliveryId}>{shortId(d.deliveryId)}</code>
            </td>
            <td class="wrap">
              <SessionLink sessionKey={d.sessionKey} />
            </td>
            <td>{d.kind}</td>
            <td class="nowrap">{`${d.channel}: ${d.to}`}</td>
            <td class="num">{d.attempts}</td>
            <td class="wrap">{d.lastError ?? ""}</td>
            <td class="wrap" title={d.text}>
              {preview(d.text)}
            </td>
            <td>
              {d.status === "dead" && (
                <ActionButton
                  action="/ui/deliveries/retry"
                  csrf={props.csrf}
                  fields={{ deliveryId: d.deliveryId, next: props.here }}
                  label="Retry"
                />
              )}
            </td>
          </tr>
        ))}
      </Table>
      <Pager
        base="/ui/deliveries"
        params={{ status: f.status, session: f.session, cursor: f.cursor }}
        nextCursor={props.nextCursor}
      />
    </Page>
  );
};
