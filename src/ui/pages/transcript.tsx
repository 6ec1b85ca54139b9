/**
 * A page of a session's transcript (`chat.history`, oldest first): each message with its role,
 * seq, time, model and run; tool calls and tool results folded in `<details>`; compaction
 * entries and memory-flush turns marked as such.
 */
import type { FC } from "hono/jsx";
import {
  type ContentPart,
  FLUSH_ID_MARK,
  type MediaPart,
  mediaLine,
  type TranscriptMessage,
} from "../../transcript/message";
import { Badge, shortId, When } from "../layout";

function json(value: unknown): string {
  try {
    return JSON.stringify(value, null, 2) ?? "null";
  } catch {
    return String(value);
  }
}

/** A tool result as stored (often JSON text), indented when it is JSON. */
function resultText(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

function textParts(parts: ContentPart[]): string {
  return parts
    .filter((p): p is { type: "text"; text: string } => p.type === "text")
    .map((p) => p.text)
    .join("");
}

const ToolCalls: FC<{ parts: ContentPart[] }> = ({ parts }) => (
  <>
    {parts
      .filter((p): p is Extract<ContentPart, { type: "toolCall" }> => p.type === "toolCall")
      .map((p) => (
        <details class="tool">
          <summary>
            Tool call <code>{p.name}</code> <span class="muted small mono">{shortId(p.id)}</span>
          </summary>
          <pre>{json(p.arguments)}</pre>
        </details>
      ))}
  </>
);

/** Audio's captions: its transcript as one WebVTT cue over the whole of it (a data URL). */
function captions(transcript: string | undefined): string {
  const text = (transcript ?? "[not transcribed]").replace(/-->/g, "→");
  return `data:text/vtt;charset=utf-8,${encodeURIComponent(`WEBVTT\n\n00:00.000 --> 99:59:59.000\n${text}\n`)}`;
}

/** A message's files (SPEC §22): an image shown, audio playable with its transcript, a file to open. */
const Files: FC<{ parts: ContentPart[] }> = ({ parts }) => (
  <>
    {parts
      .filter((p): p is MediaPart => p.type === "image" || p.type === "audio" || p.type === "file")
      .map((p) => {
        const src = `/ui/media/${encodeURIComponent(p.mediaId)}`;
        const label = p.name ?? p.mediaId;
        return (
          <figure class="media" data-media={p.type}>
            {p.type === "image" ? (
              <a href={src}>
                <img src={src} alt={label} loading="lazy" />
              </a>
            ) : p.type === "audio" ? (
              <audio controls preload="none" src={src} title={label}>
                <track kind="captions" label="Transcript" src={captions(p.transcript)} default />
              </audio>
            ) : null}
            <figcaption class="muted small">
              <a href={src}>{mediaLine(p)}</a>
              {p.transcript !== undefined && <span> · transcript: “{p.transcript}”</span>}
            </figcaption>
          </figure>
        );
      })}
  </>
);

const Message: FC<{ m: TranscriptMessage }> = ({ m }) => {
  const text = textParts(m.content);
  const flush = m.id.includes(FLUSH_ID_MARK);
  const compaction = m.compaction !== undefined;
  const cls = compaction ? "msg compaction" : `msg ${m.role}`;
  return (
    <article class={cls} id={m.seq !== undefined ? `m${m.seq}` : undefined}>
      <header>
        <span class="role">
          {compaction ? "compaction" : m.role === "toolResult" ? "tool result" : m.role}
        </span>
        {m.seq !== undefined && <span>#{m.seq}</span>}
        <When ms={m.timestamp} />
        {m.model && <span>{m.model}</span>}
        {m.runId && <span class="mono" title={m.runId}>{`run ${shortId(m.runId)}`}</span>}
        {m.usage && <span>{`${m.usage.totalTokens} tokens`}</span>}
        {flush && <Badge value="memory flush" tone="b-muted" />}
        {m.isError && <Badge value="error" />}
        {m.provenance && m.provenance.kind !== "external_user" && (
          <span>
            {m.provenance.kind}
            {m.provenance.sourceSessionKey ? ` from ${m.provenance.sourceSessionKey}` : ""}
          </span>
        )}
      </header>
      {compaction ? (
        <details>
          <summary>
            Summary of the messages before{" "}
            {m.compaction?.firstKeptSeq !== undefined ? `#${m.compaction.firstKeptSeq}` : "this entry"}
          </summary>
          <div class="text">{text}</div>
        </details>
      ) : m.role === "toolResult" ? (
        <details class="tool">
          <summary>
            Result of <code>{m.toolName ?? "tool"}</code>
            {m.toolCallId && <span class="muted small mono"> {shortId(m.toolCallId)}</span>}
          </summary>
          <pre>{resultText(text)}</pre>
        </details>
      ) : (
        <>
          {text && <div class="text">{text}</div>}
          <Files parts={m.content} />
          <ToolCalls parts={m.content} />
        </>
      )}
    </article>
  );
};

export const Transcript: FC<{ messages: TranscriptMessage[] }> = ({ messages }) =>
  messages.length === 0 ? (
    <p class="card empty">No messages in this transcript yet.</p>
  ) : (
    <div class="transcript">
      {messages.map((m) => (
        <Message m={m} />
      ))}
    </div>
  );
