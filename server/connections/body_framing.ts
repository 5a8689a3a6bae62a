// Finds where a request body ends in the bytes after its head, so the front door knows when the
// next request head begins (and can check it too). A Content-Length body is counted down; a
// chunked one is followed through its chunk-size lines, data, and trailer (RFC 9112 §7.1). Bytes
// are only measured, never changed: the HTTP server reads the body itself.

export type BodyFraming = { kind: "length"; bytes: number } | { kind: "chunked" };

type ChunkState =
  | "size" // reading a chunk-size line up to its LF
  | "data" // `left` data bytes to go
  | "data-crlf" // the CRLF after a chunk's data
  | "trailer"; // trailer lines up to an empty one

/** Longest chunk-size or trailer line accepted: they are hex digits and short extensions. */
const MAX_LINE = 4096;

export class BodyTracker {
  #left: number;
  #chunked: boolean;
  #state: ChunkState = "size";
  #line = "";
  /** The body ended. */
  done: boolean;
  /** The chunked framing was broken: where the body ends is unknown from here on. */
  broken = false;

  constructor(framing: BodyFraming) {
    this.#chunked = framing.kind === "chunked";
    this.#left = framing.kind === "length" ? framing.bytes : 0;
    this.done = framing.kind === "length" && framing.bytes === 0;
  }

  /** How many of `bytes` (from `from` on) belong to this body; sets `done` at its end. */
  consume(bytes: Uint8Array, from = 0): number {
    if (!this.#chunked) {
      const n = Math.min(this.#left, bytes.length - from);
      this.#left -= n;
      this.done = this.#left === 0;
      return n;
    }
    let i = from;
    while (i < bytes.length && !this.done && !this.broken) {
      if (this.#state === "data") {
        const n = Math.min(this.#left, bytes.length - i);
        this.#left -= n;
        i += n;
        if (this.#left === 0) this.#state = "data-crlf", this.#line = "";
        continue;
      }
      const byte = bytes[i++];
      if (byte !== 0x0a) {
        this.#line += String.fromCharCode(byte);
        if (this.#line.length > MAX_LINE) this.broken = true;
        continue;
      }
      const line = this.#line.endsWith("\r") ? this.#line.slice(0, -1) : this.#line;
      this.#line = "";
      this.#endLine(line);
    }
    return i - from;
  }

  #endLine(line: string): void {
    switch (this.#state) {
      case "size": {
        const size = /^([0-9a-fA-F]{1,12})(?:[ \t]*;.*)?$/.exec(line);
        if (!size) return void (this.broken = true);
        this.#left = parseInt(size[1], 16);
        this.#state = this.#left === 0 ? "trailer" : "data";
        return;
      }
      case "data-crlf":
        if (line !== "") return void (this.broken = true);
        this.#state = "size";
        return;
      case "trailer":
        if (line === "") this.done = true;
        return;
    }
  }
}
