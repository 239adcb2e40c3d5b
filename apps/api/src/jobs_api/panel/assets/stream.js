// The live feed: GET /jobs/events read with fetch, so that the panel itself sends
// Last-Event-ID when it reconnects (an EventSource gives up for good after an HTTP error and
// forgets the id when it is recreated), sees a 401 (signed out) and chooses its back-off.

const RETRY_MIN_MS = 500;
const RETRY_MAX_MS = 10_000;
const SILENCE_MS = 45_000;
const STORE_UNAVAILABLE = "urn:jobs:problem:store-unavailable"; // keep-alives come at least every 15 s: this much silence is a dead link

/** Parses a text/event-stream body chunk by chunk (the WHATWG rules: fields, blank line ends an
 * event, comments start with ":"). */
export class EventParser {
  constructor(onEvent) {
    this.onEvent = onEvent;
    this.buffer = "";
    this.id = null; // the last event id: it carries over to the events after it (as in the spec)
    this.reset();
  }

  reset() {
    this.type = "";
    this.data = [];
  }

  push(text) {
    this.buffer += text;
    let index;
    while ((index = this.buffer.search(/\r\n|\r|\n/)) >= 0) {
      const line = this.buffer.slice(0, index);
      const newline = this.buffer.startsWith("\r\n", index) ? 2 : 1;
      if (this.buffer[index] === "\r" && index + 1 === this.buffer.length) break; // \r\n split
      this.buffer = this.buffer.slice(index + newline);
      this.line(line);
    }
  }

  line(line) {
    if (line === "") {
      if (this.data.length) {
        this.onEvent({ type: this.type || "message", data: this.data.join("\n"), id: this.id });
      }
      this.reset();
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.type = value;
    else if (field === "data") this.data.push(value);
    else if (field === "id" && !value.includes("\0")) this.id = value;
  }
}

/** Follows the stream until stop(): onEvent(type, data, id) for each event, onState(state) with
 * "connecting" | "live" | "reconnecting" | "unreachable" (the server says its database is
 * away: a `store` event, or a 503 `store-unavailable` when reconnecting), onUnauthorized() on
 * a 401. */
export class LiveStream {
  constructor({ url, onEvent, onState, onUnauthorized }) {
    this.url = url;
    this.onEvent = onEvent;
    this.onState = onState;
    this.onUnauthorized = onUnauthorized;
    this.lastEventId = null;
    this.retryMs = RETRY_MIN_MS;
    this.controller = null;
    this.stopped = false;
  }

  start() {
    this.stopped = false;
    this.loop();
  }

  stop() {
    this.stopped = true;
    this.controller?.abort();
  }

  async loop() {
    while (!this.stopped) {
      this.onState(this.lastEventId === null ? "connecting" : "reconnecting");
      const outcome = await this.connectOnce();
      if (outcome === "unauthorized") {
        this.stopped = true;
        this.onUnauthorized();
        return;
      }
      if (this.stopped) return;
      this.onState(outcome === "unreachable" ? "unreachable" : "reconnecting");
      const jitter = Math.random() * this.retryMs * 0.3;
      await new Promise((resolve) => setTimeout(resolve, this.retryMs + jitter));
      this.retryMs = Math.min(RETRY_MAX_MS, this.retryMs * 2);
    }
  }

  async connectOnce() {
    const controller = new AbortController();
    this.controller = controller;
    const headers = { Accept: "text/event-stream" };
    if (this.lastEventId !== null) headers["Last-Event-ID"] = this.lastEventId;
    let watchdog = null;
    const feed = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => controller.abort(), SILENCE_MS);
    };
    try {
      const response = await fetch(this.url, {
        headers,
        credentials: "same-origin",
        cache: "no-store",
        signal: controller.signal,
      });
      if (response.status === 401) return "unauthorized";
      if (response.status === 503 && (await problemType(response)) === STORE_UNAVAILABLE) {
        return "unreachable";
      }
      if (!response.ok || !response.body) return "error";
      this.onState("live");
      this.retryMs = RETRY_MIN_MS;
      let unreachable = false;
      feed();
      const parser = new EventParser((event) => {
        if (event.id !== null) this.lastEventId = event.id;
        if (event.type === "retry") return;
        if (event.type === "store") {
          unreachable = safeJson(event.data)?.reachable === false;
          this.onState(unreachable ? "unreachable" : "live");
          return;
        }
        this.onEvent(event.type, event.data, event.id);
      });
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return unreachable ? "unreachable" : "closed";
        feed();
        parser.push(value);
      }
    } catch {
      return "error";
    } finally {
      clearTimeout(watchdog);
    }
  }
}

async function problemType(response) {
  try {
    return (await response.json())?.type ?? null;
  } catch {
    return null;
  }
}

function safeJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
