// The multi-instance recipe (deploy/cluster.sh: Sluice instances behind nginx on loopback), driven
// as clients would: streams pass through unbuffered and spread over the instances (least_conn),
// request bodies pass through whole, and when one instance is SIGKILLed mid-run its streams end
// promptly at the client while new requests go to the others. Needs Debian's nginx
// (`apt-get install -y nginx`; .ci/run installs it); SLUICE_SKIP_NGINX=1 skips it where it cannot.

import { join } from "node:path";
import { writeTinyModel } from "../../engine/sources/tiny_model.ts";
import { parsePrometheusText, sampleValue } from "../../server/metrics/parse.ts";
import { assert, assertEquals } from "../helpers/testing.ts";
import { TINY_SPEC } from "../server/harness.ts";
import { type Cluster, findNginx, type Instance, startCluster } from "./cluster_fixture.ts";
import { answeredBy, deliveries, startStream, type StreamResult } from "./sse_stream.ts";

const NGINX = findNginx();
const SKIP = NGINX === null && Deno.env.get("SLUICE_SKIP_NGINX") === "1";

/** A chat stream that lasts `maxTokens / rate` seconds whatever the model says (paced, no EOS). */
const pacedChat = (maxTokens: number, rate: number) => ({
  model: "default",
  messages: [{ role: "user", content: "Tell me about the river." }],
  stream: true,
  max_tokens: maxTokens,
  ignore_eos: true,
  reading_rate: rate,
});

async function requestCounts(instances: Instance[]): Promise<number[]> {
  return await Promise.all(instances.map(async (i) => {
    const text = await (await fetch(`http://${i.addr}/metrics`)).text();
    return sampleValue(parsePrometheusText(text), "sluice_requests_total") ?? 0;
  }));
}

/** Rejects when `promise` has not settled within `ms`: every wait in this test is bounded. */
async function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** The script's lines and the tails of every log it keeps, for a failure's report. */
async function diagnostics(cluster: Cluster, stateDir: string): Promise<string> {
  const parts = [cluster.lines.join("\n")];
  const logs = [...cluster.instances.map((_, i) => `instance-${i}.log`), "nginx/error.log"];
  for (const name of logs) {
    const text = await Deno.readTextFile(join(stateDir, name)).catch(() => "(none)");
    parts.push(`--- ${name}\n${text.split("\n").slice(-15).join("\n")}`);
  }
  return parts.join("\n");
}

function describe(r: StreamResult): string {
  return `${r.status} via ${r.upstream}: ${r.contentTimes.length} content events, ` +
    `done ${r.done}, finish ${r.finishReason}, error ${r.error}`;
}

Deno.test({
  name: "nginx in front of three instances: unbuffered streams, least_conn, one instance killed",
  ignore: SKIP,
  async fn(t) {
    if (NGINX === null) {
      throw new Error(
        "nginx not found: install Debian's package (apt-get install -y nginx; .ci/run does), " +
          "or set SLUICE_SKIP_NGINX=1 to skip this test",
      );
    }
    const dir = await Deno.makeTempDir({ prefix: "sluice-deploy-" });
    let cluster: Cluster | null = null;
    try {
      await writeTinyModel(join(dir, "model"), TINY_SPEC);
      cluster = await startCluster({
        nginx: NGINX,
        instances: 3,
        model: join(dir, "model"),
        serveFlags: ["--shutdown-grace-s", "1", "--gpu-kv-mb", "8", "--max-batch", "16"],
        readyTimeoutMs: 150_000,
        stateDir: join(dir, "state"),
      });
      const c = cluster;
      assertEquals(c.instances.length, 3);
      const chatUrl = `${c.url}/v1/chat/completions`;

      await t.step("streams pass through unbuffered and spread over the instances", async () => {
        const before = await requestCounts(c.instances);
        // 6 concurrent streams of 30 tokens at 15 tokens/s: each lasts about 2 s.
        const results = await within(
          60_000,
          "6 streams",
          Promise.all(
            Array.from({ length: 6 }, () => startStream(chatUrl, pacedChat(30, 15), 50_000).result),
          ),
        );
        for (const r of results) {
          assertEquals(r.status, 200, describe(r));
          assert(r.headers.get("content-type")?.startsWith("text/event-stream"), describe(r));
          assertEquals(r.headers.get("content-encoding"), null, "event streams are not gzipped");
          assert(r.done && r.finishReason === "length", describe(r));
          // Passed through as made: content arrives over the stream's length in many deliveries,
          // not in the few bursts a buffering or compressing proxy sends.
          const n = r.contentTimes.length;
          assert(n >= 10, describe(r));
          assert(deliveries(r.contentTimes, 15) >= n / 2, `bursty: ${describe(r)}`);
          assert(r.contentTimes[n - 1] - r.contentTimes[0] >= 1000, describe(r));
        }
        // least_conn with 6 open streams on 3 idle instances: 2 each, by the instances' own count
        // and by nginx's header.
        const after = await requestCounts(c.instances);
        assertEquals(after.map((a, i) => a - before[i]), [2, 2, 2]);
        for (const i of c.instances) {
          assertEquals(results.filter((r) => answeredBy(r.upstream) === i.addr).length, 2);
        }
      });

      await t.step("least_conn: new work goes to the instance with no open stream", async () => {
        // Two long streams (60 tokens at 10 tokens/s) hold two instances; then short requests,
        // one at a time, all go to the third (round robin would send them to all three).
        const long = [0, 1].map(() => startStream(chatUrl, pacedChat(60, 10), 50_000));
        await within(30_000, "long streams begun", Promise.all(long.map((s) => s.received(1))));
        const busy = await Promise.all(
          long.map(async (s) => answeredBy((await s.response).headers.get("x-sluice-upstream")!)),
        );
        const idle = c.instances.map((i) => i.addr).filter((a) => !busy.includes(a));
        assertEquals(idle.length, 1, `long streams on ${busy}`);
        for (let k = 0; k < 4; k++) {
          const res = await fetch(chatUrl, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ ...pacedChat(2, 0), stream: false }),
            signal: AbortSignal.timeout(30_000),
          });
          await res.body?.cancel();
          assertEquals(res.status, 200);
          assertEquals(answeredBy(res.headers.get("x-sluice-upstream") ?? ""), idle[0]);
        }
        const results = await within(
          60_000,
          "long streams",
          Promise.all(long.map((s) => s.result)),
        );
        for (const r of results) assert(r.done, describe(r));
      });

      await t.step("Host passes through: the page on nginx's origin may call the API", async () => {
        const page = await fetch(`${c.url}/`, { signal: AbortSignal.timeout(30_000) });
        await page.body?.cancel();
        assertEquals(page.status, 200);
        assert(page.headers.get("content-type")?.startsWith("text/html"));
        const call = (origin: string) =>
          fetch(chatUrl, {
            method: "POST",
            headers: { "content-type": "application/json", origin },
            body: JSON.stringify({ ...pacedChat(2, 0), stream: false }),
            signal: AbortSignal.timeout(30_000),
          });
        const own = await call(c.url);
        assertEquals(own.status, 200, await own.text());
        const foreign = await call("http://evil.example");
        assertEquals(foreign.status, 403);
        assertEquals((await foreign.json()).error.code, "origin_not_allowed");
      });

      await t.step(
        "request bodies pass through whole; oversized ones get Sluice's 413",
        async () => {
          // 1000 prompt ids and 200 KB of JSON whitespace: the instance must see every byte.
          const ids = Array.from({ length: 1000 }, (_, i) => 3 + (i * 7) % 500);
          const body = `{"model":"default","max_tokens":1,"prompt":[${ids.join(",")}]` +
            " ".repeat(200_000) + "}";
          const res = await fetch(`${c.url}/v1/completions`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body,
            signal: AbortSignal.timeout(60_000),
          });
          const json = await res.json();
          assertEquals(res.status, 200, JSON.stringify(json));
          assertEquals(json.usage.prompt_tokens, 1000);

          // Past Sluice's --max-body-kb (1024) but within nginx's limit: Sluice's envelope answers.
          const big = await fetch(`${c.url}/v1/completions`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: `{"model":"default","prompt":"x"}` + " ".repeat(1536 * 1024),
            signal: AbortSignal.timeout(60_000),
          });
          assertEquals(big.status, 413);
          assertEquals((await big.json()).error.code, "request_too_large");
        },
      );

      await t.step("an instance killed mid-run: its streams end, the rest carry on", async () => {
        // 6 streams of 100 tokens at 20 tokens/s (5 s each); kill instance 0 once all have begun.
        const streams = Array.from(
          { length: 6 },
          () => startStream(chatUrl, pacedChat(100, 20), 60_000),
        );
        await within(30_000, "every stream begun", Promise.all(streams.map((s) => s.received(3))));
        const victim = c.instances[0];
        Deno.kill(victim.pid, "SIGKILL");
        const killedAt = performance.now();

        const results = await within(70_000, "streams", Promise.all(streams.map((s) => s.result)));
        const onVictim = results.filter((r) => answeredBy(r.upstream) === victim.addr);
        assertEquals(onVictim.length, 2, results.map(describe).join("\n"));
        const others = results.filter((r) => !onVictim.includes(r));
        // Paced at 20 tokens/s, the others still had ~4.8 s to play out when the victim died.
        const firstOtherEnd = Math.min(...others.map((r) => r.endedAt));
        for (const r of onVictim) {
          // Cut, not finished, and promptly: nginx closes the client's connection, before any
          // stream on a live instance has played out.
          assert(!r.done && r.error !== null, describe(r));
          assert(!r.error.includes("deadline"), describe(r));
          assert(
            r.endedAt < firstOtherEnd,
            `ended ${r.endedAt - killedAt} ms after the kill, after a live stream's end`,
          );
        }
        for (const r of others) {
          assert(r.done && r.finishReason === "length", describe(r));
        }
        assert(await c.waitForLine(/instance 0 .*exited/, 5_000), "the script reports the death");

        // New requests: every one succeeds, on the instances still alive.
        const survivors = c.instances.slice(1);
        const before = await requestCounts(survivors);
        const fresh = await within(
          60_000,
          "new requests",
          Promise.all(Array.from({ length: 6 }, async () => {
            const res = await fetch(chatUrl, {
              method: "POST",
              headers: { "content-type": "application/json" },
              body: JSON.stringify({ ...pacedChat(4, 0), stream: false }),
            });
            return {
              status: res.status,
              upstream: res.headers.get("x-sluice-upstream") ?? "",
              body: await res.json(),
            };
          })),
        );
        for (const r of fresh) {
          assertEquals(r.status, 200, JSON.stringify(r));
          assert(answeredBy(r.upstream) !== victim.addr, r.upstream);
        }
        const after = await requestCounts(survivors);
        assertEquals(after[0] - before[0] + after[1] - before[1], 6);
      });

      await t.step("stopping the cluster stops every process it started", async () => {
        const { leaked, code } = await c.stop();
        assertEquals(leaked, []);
        assertEquals(code, 143); // the script's exit on SIGTERM, after its cleanup
        assert(c.lines.some((l) => l.endsWith("stopped")), c.lines.join("\n"));
      });
    } catch (err) {
      if (cluster) console.error(await diagnostics(cluster, join(dir, "state")));
      throw err;
    } finally {
      const stopped = cluster === null ? null : await cluster.stop();
      await Deno.remove(dir, { recursive: true });
      assertEquals(stopped?.leaked ?? [], [], "processes left running");
    }
  },
});
