/**
 * An OpenAI-compatible chat completion as the gateway's streaming call reads it (SPEC §22):
 * `chat.completion.chunk` server-sent events, the text in as many pieces as asked, optionally
 * spaced in time, ending with the usage chunk and `[DONE]`. Runs in workerd and in Node.
 */

export interface StreamedAnswer {
  text?: string;
  toolCalls?: Array<{ id: string; name: string; arguments: unknown }>;
  usage?: { prompt: number; completion: number };
  /** How many pieces the text comes in (default 1). */
  pieces?: number;
  /** Between two pieces (default 0: all at once). */
  delayMs?: number;
}

function piecesOf(text: string, n: number): string[] {
  const size = Math.max(1, Math.ceil(text.length / Math.max(1, n)));
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

/** The answer as the server-sent events of a streamed chat completion. */
export function completionEvents(a: StreamedAnswer): string[] {
  const base = { id: "chatcmpl-stream", object: "chat.completion.chunk", created: 0, model: "m" };
  const chunk = (delta: unknown, extra: Record<string, unknown> = {}) =>
    `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta, ...extra }] })}\n\n`;
  const events = [chunk({ role: "assistant" })];
  for (const piece of piecesOf(a.text ?? "", a.pieces ?? 1)) events.push(chunk({ content: piece }));
  for (const [index, call] of (a.toolCalls ?? []).entries()) {
    events.push(
      chunk({
        tool_calls: [
          {
            index,
            id: call.id,
            type: "function",
            function: { name: call.name, arguments: JSON.stringify(call.arguments ?? {}) },
          },
        ],
      }),
    );
  }
  events.push(chunk({}, { finish_reason: a.toolCalls?.length ? "tool_calls" : "stop" }));
  const usage = a.usage ?? { prompt: 10, completion: 5 };
  events.push(
    `data: ${JSON.stringify({
      ...base,
      choices: [],
      usage: {
        prompt_tokens: usage.prompt,
        completion_tokens: usage.completion,
        total_tokens: usage.prompt + usage.completion,
      },
    })}\n\n`,
  );
  events.push("data: [DONE]\n\n");
  return events;
}

/**
 * A streamed completion's response: the events written `delayMs` apart. `alive()` false (a
 * simulated crash) errors the stream where it is.
 */
export function streamedCompletion(a: StreamedAnswer, alive: () => boolean = () => true): Response {
  const events = completionEvents(a);
  const encoder = new TextEncoder();
  let i = 0;
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (i > 0 && a.delayMs) await new Promise((r) => setTimeout(r, a.delayMs));
      if (!alive()) {
        controller.error(new Error("simulated crash: the process died here"));
        return;
      }
      const event = events[i++];
      if (event === undefined) controller.close();
      else controller.enqueue(encoder.encode(event));
    },
  });
  return new Response(body, { headers: { "content-type": "text/event-stream" } });
}
