// Seeded random numbers so a failing test can be rerun with the same data.

/** mulberry32: small, fast, good enough for test data. Returns floats in [0, 1). */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Fresh seed per run (printed by the caller on failure) unless SLUICE_TEST_SEED pins it. */
export function testSeed(): number {
  const pinned = Deno.env.get("SLUICE_TEST_SEED");
  return pinned ? Number(pinned) : (Math.random() * 2 ** 31) >>> 0;
}

/** Uniform floats in [-scale, scale). */
export function randomArray(next: () => number, n: number, scale = 1): Float64Array {
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) out[i] = (next() * 2 - 1) * scale;
  return out;
}
