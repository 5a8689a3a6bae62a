// Incremental Server-Sent Events parser: feed it bytes as they arrive, get back the `data` payload of
// every event completed by those bytes. Handles LF, CRLF and CR line ends, multi-line data, comment
// lines and events split anywhere across reads (including inside a UTF-8 sequence).

export class SseParser {
  private decoder = new TextDecoder();
  private pending = "";
  private data: string[] = [];
  private sawData = false;

  /** Events completed by this piece of the stream, as their data strings. */
  push(bytes: Uint8Array): string[] {
    this.pending += this.decoder.decode(bytes, { stream: true });
    const out: string[] = [];
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.pending);
      if (!m) break;
      // A lone CR at the very end may be the first half of CRLF: wait for the next byte.
      if (m[0] === "\r" && m.index === this.pending.length - 1) break;
      const line = this.pending.slice(0, m.index);
      this.pending = this.pending.slice(m.index + m[0].length);
      this.line(line, out);
    }
    return out;
  }

  /** Flushes a final event not followed by a blank line (a server that closed mid-event). */
  end(): string[] {
    const out: string[] = [];
    this.pending += this.decoder.decode();
    if (this.pending !== "") this.line(this.pending, out);
    this.pending = "";
    this.line("", out);
    return out;
  }

  private line(line: string, out: string[]) {
    if (line === "") {
      if (this.sawData) out.push(this.data.join("\n"));
      this.data = [];
      this.sawData = false;
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") {
      this.data.push(value);
      this.sawData = true;
    }
  }
}
