// The requests still running, by the id their response carries (chatcmpl-…, cmpl-…), so that a
// later call can reach one: POST /v1/requests/{id}/priority. A request leaves once it has ended and
// its stream is over; nothing else is kept.

import type { RequestHandle } from "../../runtime/service.ts";

export class LiveRequests {
  readonly #byId = new Map<string, RequestHandle>();

  /** Keeps `handle` under `id` until it is done. */
  add(id: string, handle: RequestHandle): void {
    this.#byId.set(id, handle);
    const leave = () => this.#byId.delete(id);
    handle.done.then(leave, leave);
  }

  get(id: string): RequestHandle | undefined {
    return this.#byId.get(id);
  }

  get size(): number {
    return this.#byId.size;
  }
}
