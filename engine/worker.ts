// The engine's Worker: loads the model on its own thread and runs the steps it is sent, in order.
// Deno's mapAsync polls the device on the thread that waits for it; here that is this thread, so
// HTTP, SSE and timers on the main thread never wait on the GPU.

/// <reference lib="deno.worker" />

import { Engine } from "./engine.ts";
import type { FromEngine, ToEngine } from "./worker_protocol.ts";

let engine: Engine | null = null;
/** The load, then the close: what a close must wait for. */
let queue: Promise<unknown> = Promise.resolve();

const post = (msg: FromEngine) => self.postMessage(msg);
const messageOf = (err: unknown) => err instanceof Error ? err.message : String(err);

self.onmessage = (event: MessageEvent<ToEngine>) => {
  const msg = event.data;
  switch (msg.type) {
    case "load":
      queue = Engine.load({
        ...msg.options,
        onLoadProgress: (loaded, total) => post({ type: "progress", loaded, total }),
      }).then(
        (e) => {
          engine = e;
          post({ type: "loaded", info: e.info });
        },
        (err) => post({ type: "load-failed", message: messageOf(err) }),
      );
      break;
    case "step":
      // Submitted at once (engine.step encodes synchronously), so steps run in arrival order.
      try {
        engine!.step(msg.plan).then(
          (records) =>
            post({
              type: "records",
              id: msg.id,
              records: [...records],
              ...(records.hidden ? { hidden: records.hidden } : {}),
              copyStats: engine!.copyStats(),
            }),
          (err) => post({ type: "step-failed", id: msg.id, message: messageOf(err) }),
        );
      } catch (err) {
        post({ type: "step-failed", id: msg.id, message: messageOf(err) });
      }
      break;
    case "close":
      queue = queue.then(() => engine?.close()).finally(() => {
        post({ type: "closed" });
        self.close();
      });
      break;
  }
};
