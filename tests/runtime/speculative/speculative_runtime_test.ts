// Speculative decoding through the whole runtime on the fake engine (no GPU): whatever the drafts,
// each request gets exactly the tokens its prompt alone determines, when it is preempted or swapped
// while a verification is in flight, cancelled, or ends by max_tokens or a stop id inside an
// accepted run; and every block goes back. The toy model's next token is a hash of its whole
// context read back through the KV the runtime laid out, so a draft row at a wrong position, a
// rejected draft's KV taken as computed, or an accepted token's KV lost changes what follows.
//
// Random models accept almost nothing, so the drafter here is an oracle of controlled acceptance:
// each draft is the toy model's own next token with probability p, else another.

import {
  FakeEngine,
  type FakeEngineShape,
  toyGeneration,
  toyNextToken,
} from "../../../sim/fake_engine.ts";
import { Runtime } from "../../../runtime/service.ts";
import type { RuntimeOptions } from "../../../runtime/options.ts";
import type { Drafter } from "../../../runtime/speculative/speculation.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";
import { greedy } from "../../helpers/requests.ts";
import { rng } from "../../helpers/random.ts";

/** Drafts that are the toy model's next tokens with probability `p` (seeded), else off by one. */
function oracle(vocab: number, p: number, seed = 7): Drafter {
  const random = rng(seed);
  return {
    propose(req, k) {
      const context = req.tokens(0, req.prefillTarget);
      const drafts: number[] = [];
      for (let i = 0; i < k; i++) {
        const right = toyNextToken(context, req.spec.sampling.seed, vocab);
        const token = random() < p ? right : (right + 1) % vocab;
        drafts.push(token);
        context.push(token);
      }
      return drafts;
    },
  };
}

function speculating(
  shape: FakeEngineShape,
  p: number,
  options: Partial<RuntimeOptions> = {},
  delay?: () => Promise<void>,
) {
  const fake = new FakeEngine(shape, delay);
  const runtime = new Runtime(fake, {
    policy: "fcfs",
    maxQueue: 100,
    maxTokensLimit: 10_000,
    eosIds: [],
    speculative: "ngram",
    speculativeTokens: 4,
    ...options,
  }, { drafter: oracle(fake.info.vocabSize, p) });
  return { runtime, fake, V: fake.info.vocabSize };
}

async function collect(h: { tokens: AsyncIterable<{ id: number }> }): Promise<number[]> {
  const ids: number[] = [];
  for await (const ev of h.tokens) ids.push(ev.id);
  return ids;
}

Deno.test("speculating requests preempted for blocks get the tokens their prompts alone give, in fewer steps", async () => {
  // 24 blocks of 4 positions per layer for 4 requests of up to 12 + 30 positions.
  const { runtime, fake, V } = speculating(
    { maxSlots: 4, blocksPerArena: [48], numLayers: 2, blockSize: 4 },
    0.8,
  );
  const reqs = [[5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16], [1, 2], [3, 3, 3, 3, 3, 3], [8]];
  const out = await Promise.all(
    reqs.map((ids, i) => collect(runtime.submit({ ids, maxTokens: 30, sampling: greedy(10 + i) }))),
  );
  out.forEach((ids, i) => assertEquals(ids, toyGeneration(reqs[i], 30, 10 + i, V)));
  const s = runtime.stats();
  assert(s.preemptions > 0, "nothing was preempted");
  const spec = s.speculation!;
  assert(spec.acceptedTokens > spec.draftTokens / 2, JSON.stringify(spec));
  assertEquals(spec.acceptedPerPos.length, 4);
  assert(spec.acceptedPerPos.every((n, i) => i === 0 || n <= spec.acceptedPerPos[i - 1]));
  assert(fake.steps < 120 * 0.6, `${fake.steps} steps for 120 tokens`);
  assertEquals(s.kvBlocksUsed, 0);
  await runtime.close();
});

Deno.test("swapped out while a verification is in flight, a speculating request resumes with its own tokens", async () => {
  const { runtime, V } = speculating(
    { maxSlots: 4, blocksPerArena: [40], numLayers: 2, blockSize: 4, hostBlocks: 256 },
    0.6,
    { preempt: "swap" },
    () => new Promise((r) => setTimeout(r, 1)),
  );
  const reqs = [[5, 6, 7, 8, 9, 10, 11], [1, 2], [3, 3, 3, 3, 3, 3], [8, 1]];
  const out = await Promise.all(
    reqs.map((ids, i) => collect(runtime.submit({ ids, maxTokens: 30, sampling: greedy(20 + i) }))),
  );
  out.forEach((ids, i) => assertEquals(ids, toyGeneration(reqs[i], 30, 20 + i, V)));
  const s = runtime.stats();
  assert((s.swaps?.swapsOut ?? 0) > 0, `nothing was swapped: ${JSON.stringify(s.swaps)}`);
  assert(s.speculation!.acceptedTokens > 0);
  assertEquals([s.kvBlocksUsed, s.hostBlocksUsed], [0, 0]);
  await runtime.close();
});

Deno.test("max_tokens and a stop id inside an accepted run cut it where plain decoding stops", async () => {
  const { runtime, fake, V } = speculating({ maxSlots: 8 }, 1);
  const ids = [4, 4, 2];
  // Every draft is right: the prefill's token, then runs of up to 5.
  const seven = await collect(runtime.submit({ ids, maxTokens: 7, sampling: greedy(5) }));
  assertEquals(seven, toyGeneration(ids, 7, 5, V));
  // Nothing is computed past the last token's input position, and no draft past max_tokens.
  assertEquals(fake.highestPos[0], ids.length + 7 - 2);
  // Drafts never reach past max_tokens: one run of 4 (tokens 2-6), then the 7th is a row's own.
  assertEquals(runtime.stats().speculation!.acceptedTokens, 4);
  const full = toyGeneration([9, 1], 12, 6, V);
  const stop = full[3];
  const h = runtime.submit({ ids: [9, 1], maxTokens: 12, sampling: greedy(6), stopIds: [stop] });
  assertEquals(await collect(h), toyGeneration([9, 1], 12, 6, V, new Set([stop])));
  assertEquals((await h.done).reason, "stop");
  // The stop id was the 4th token of a run of 5 (2-6): the run ended there.
  assertEquals(runtime.stats().speculation!.acceptedTokens, 4 + 3);
  await runtime.close();
});

Deno.test("a speculating request cancelled mid-stream gets nothing after the cancel; its blocks are freed", async () => {
  const { runtime, V } = speculating(
    { maxSlots: 4, blocksPerArena: [256] },
    0.7,
    {},
    () => new Promise((r) => setTimeout(r, 2)),
  );
  const prompts = [[1, 2, 3], [4, 5], [6, 7, 8, 9]];
  const got = await Promise.all(prompts.map(async (ids, i) => {
    const ctrl = new AbortController();
    const h = runtime.submit({ ids, maxTokens: 200, sampling: greedy(i), signal: ctrl.signal });
    const out: number[] = [];
    let after = 0;
    for await (const ev of h.tokens) {
      if (ctrl.signal.aborted) after++;
      out.push(ev.id);
      if (out.length === 5 + 3 * i) ctrl.abort();
    }
    assertEquals(after, 0);
    assertEquals((await h.done).reason, "cancelled");
    return out;
  }));
  got.forEach((ids, i) => assertEquals(ids, toyGeneration(prompts[i], 5 + 3 * i, i, V)));
  await collect(runtime.submit({ ids: [1], maxTokens: 2, sampling: greedy() }));
  const s = runtime.stats();
  assertEquals([s.kvBlocksUsed, s.running + s.waiting + s.paused], [0, 0]);
  await runtime.close();
});

Deno.test("requests with penalties or that opt out do not speculate; failing drafts pause drafting", async () => {
  const { runtime, V } = speculating({ maxSlots: 2 }, 0);
  const penalised = { ...greedy(3), repetitionPenalty: 1.3 };
  await collect(runtime.submit({ ids: [1, 2], maxTokens: 20, sampling: penalised }));
  await collect(
    runtime.submit({ ids: [1, 2], maxTokens: 20, sampling: greedy(3), speculate: false }),
  );
  assertEquals(runtime.stats().speculation!.drafts, 0);
  // Every draft wrong: after a few, the request drafts only now and then.
  const out = await collect(runtime.submit({ ids: [3, 4], maxTokens: 100, sampling: greedy(4) }));
  assertEquals(out, toyGeneration([3, 4], 100, 4, V));
  const spec = runtime.stats().speculation!;
  assertEquals(spec.acceptedTokens, 0);
  assert(spec.drafts > 0 && spec.drafts < 15, `${spec.drafts} verifications for 100 tokens`);
  await runtime.close();
});

Deno.test("with the prefix cache, blocks a speculating request filled hold the KV of its own tokens, not of rejected drafts", async () => {
  const { runtime, V } = speculating(
    { maxSlots: 2, blocksPerArena: [256], blockSize: 4 },
    0.5,
    { prefixCache: true },
  );
  const prompt = [2, 7, 1, 8];
  const first = await collect(runtime.submit({ ids: prompt, maxTokens: 40, sampling: greedy(1) }));
  assertEquals(first, toyGeneration(prompt, 40, 1, V));
  // A second request whose prompt is the first's prompt and output shares the blocks it cached.
  const ids = [...prompt, ...first.slice(0, 33)];
  const second = await collect(runtime.submit({ ids, maxTokens: 10, sampling: greedy(1) }));
  assertEquals(second, toyGeneration(ids, 10, 1, V));
  assert(runtime.stats().prefix!.hitBlocks >= 8, JSON.stringify(runtime.stats().prefix));
  await runtime.close();
});

Deno.test("paced readers under tokenflow (held back, paused and resumed): speculating requests get their own tokens", async () => {
  const { runtime, V } = speculating(
    { maxSlots: 3, blocksPerArena: [64], numLayers: 2, blockSize: 4, hostBlocks: 128 },
    0.8,
    { policy: "tokenflow" },
    () => new Promise((r) => setTimeout(r, 1)),
  );
  const reqs = [[5, 6, 7], [1, 2, 3, 4], [9], [3, 1, 4, 1, 5]];
  const out = await Promise.all(
    reqs.map((ids, i) =>
      collect(runtime.submit({ ids, maxTokens: 24, sampling: greedy(40 + i), readingRate: 400 }))
    ),
  );
  out.forEach((ids, i) => assertEquals(ids, toyGeneration(reqs[i], 24, 40 + i, V)));
  const s = runtime.stats();
  assert(s.speculation!.acceptedTokens > 0);
  assertEquals(s.kvBlocksUsed, 0);
  await runtime.close();
});
