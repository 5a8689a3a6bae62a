// `serve` logs nothing a user must learn to ignore: no "XDG_RUNTIME_DIR is invalid" from Mesa (the
// CLI points an unset one at a private directory before the GPU opens), no Deno notice about
// request.signal's legacy abort (deno.json opts in to the new behaviour), and no npm build-script
// warning (deno.json denies the scripts nobody needs).

import { assert, assertEquals } from "../helpers/testing.ts";
import { chatDemo, DEAD_HUB, sharedCache, startServe } from "./sluice_process.ts";

const NOISE = /XDG_RUNTIME_DIR|legacy behavior|unstable-no-legacy-abort|Ignored build scripts/;

Deno.test("serve --model demo without XDG_RUNTIME_DIR: a request served, and no start-up noise", async () => {
  const cache = await sharedCache();
  const server = startServe(["--model", "demo"], {
    env: { SLUICE_CACHE: cache, HF_ENDPOINT: DEAD_HUB, XDG_RUNTIME_DIR: null },
  });
  try {
    const port = await server.ready();
    // Deno prints its legacy-abort notice when a response completes: send a whole and a streamed one.
    for (const stream of [false, true]) {
      const res = await chatDemo(port, { max_tokens: 4, stream });
      assertEquals(res.status, 200);
      await res.text();
    }
    const health = await fetch(`http://127.0.0.1:${port}/health`);
    assertEquals(health.status, 200);
    await health.body?.cancel();
  } finally {
    assertEquals(await server.stop(), 0, server.stderr());
  }
  const noise = server.stderr().split("\n").filter((line) => NOISE.test(line));
  assertEquals(noise, [], server.stderr());
  assert(server.stderr().includes("sluice: ready at"), server.stderr());
});
