// Server-Sent Events over fetch(): /v1/events/stream takes the token in the
// Authorization header like every other route, and EventSource cannot send
// headers; putting the token in the URL would leak it to logs and history.
// So the stream is read with fetch() and a streaming reader, and parsed here
// (the text/event-stream format, WHATWG HTML 9.2.6), resuming after a drop
// with `since` set to the last id seen.

export interface SseMessage {
  id: string | null;
  event: string;
  data: string;
}

// Incremental parser: feed() chunks of text as they arrive; it returns the
// messages completed so far and keeps the partial rest.
export class SseParser {
  private buffer = "";
  private data: string[] = [];
  private event = "";
  private id: string | null = null;

  feed(chunk: string): SseMessage[] {
    this.buffer += chunk;
    const out: SseMessage[] = [];
    for (;;) {
      const nl = this.buffer.search(/\r\n|\r|\n/);
      if (nl < 0) break;
      const line = this.buffer.slice(0, nl);
      const eol = this.buffer.startsWith("\r\n", nl) ? 2 : 1;
      this.buffer = this.buffer.slice(nl + eol);
      if (line === "") {
        if (this.data.length > 0) out.push({ id: this.id, event: this.event || "message", data: this.data.join("\n") });
        this.data = [];
        this.event = "";
        continue;
      }
      if (line.startsWith(":")) continue;  // a comment (keep-alive)
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "data") this.data.push(value);
      else if (field === "event") this.event = value;
      else if (field === "id" && !value.includes("\0")) this.id = value;
    }
    return out;
  }
}

export interface StreamHandle {
  close(): void;
}

// Follows `url` with `token` until close(): each message goes to onMessage;
// a dropped connection is retried after `retryMs` from the last id seen. A
// 401/403 stops it (onFatal), since retrying cannot help.
export function followEvents(
  url: string,
  token: string,
  onMessage: (m: SseMessage) => void,
  onFatal: (status: number) => void,
  retryMs = 2000,
): StreamHandle {
  const abort = new AbortController();
  let lastId: string | null = null;
  let closed = false;

  const run = async (): Promise<void> => {
    while (!closed) {
      try {
        const target = lastId === null ? url : `${url}${url.includes("?") ? "&" : "?"}since=${encodeURIComponent(lastId)}`;
        const res = await fetch(target, {
          headers: { Authorization: `Bearer ${token}`, Accept: "text/event-stream" },
          signal: abort.signal,
          cache: "no-store",
        });
        if (res.status === 401 || res.status === 403) {
          onFatal(res.status);
          return;
        }
        if (!res.ok || res.body === null) throw new Error(`stream answered ${res.status}`);
        const parser = new SseParser();
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          for (const m of parser.feed(value)) {
            if (m.id !== null) lastId = m.id;
            onMessage(m);
          }
        }
      } catch {
        if (closed) return;  // aborted by close(); otherwise retried below
      }
      if (closed) return;
      await new Promise((r) => setTimeout(r, retryMs));
    }
  };
  void run();
  return {
    close() {
      closed = true;
      abort.abort();
    },
  };
}
