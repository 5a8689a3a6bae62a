// llama-quantize's choices as gguf_recipes.ts reproduces them, on SmolLM2-135M's shape (30 layers,
// hidden 576, intermediate 1536, 9 heads over 3 KV heads, tied): the types its published GGUF files
// hold, including the fallbacks for 576-wide rows.

import { recipeType } from "../../../engine/formats/gguf_recipes.ts";
import { assertEquals } from "../../helpers/testing.ts";

const SMOL = { numLayers: 30, gqa: 3, tied: true };
const H = 576, FF = 1536;

/** The type of `role` in `layer` under the recipe (cols: the row width). */
const typeIn = (recipe: Parameters<typeof recipeType>[0], role: string, layer: number, cols = H) =>
  recipeType(recipe, SMOL, `blk.${layer}.${role}.weight`, [cols, 64]);

Deno.test("Q4_K_M: K-quants where rows fit, Q5_0 and Q8_0 where 576-wide rows do not", () => {
  assertEquals(recipeType("q4_k_m", SMOL, "token_embd.weight", [H, 49152]), "Q8_0");
  assertEquals(typeIn("q4_k_m", "attn_q", 5), "Q5_0");
  assertEquals(typeIn("q4_k_m", "attn_output", 5), "Q5_0");
  // use_more_bits: layers 0..2 (first eighth), 26..29 (last eighth) and every third between.
  const more = [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29];
  for (let layer = 0; layer < 30; layer++) {
    const wide = more.includes(layer);
    assertEquals(typeIn("q4_k_m", "attn_v", layer), wide ? "Q8_0" : "Q5_0", `attn_v ${layer}`);
    assertEquals(typeIn("q4_k_m", "ffn_down", layer, FF), wide ? "Q6_K" : "Q4_K", `down ${layer}`);
  }
});

Deno.test("the other mixes and --pure, with llama.cpp's fallback types", () => {
  assertEquals(typeIn("q5_k_m", "ffn_up", 4), "Q5_1");
  assertEquals(typeIn("q5_k_m", "ffn_down", 4, FF), "Q5_K");
  assertEquals(typeIn("q3_k_m", "attn_k", 4), "IQ4_NL");
  assertEquals(typeIn("q3_k_m", "attn_v", 1), "Q5_1"); // Q5_K for the first two attn_v
  assertEquals(typeIn("q3_k_m", "ffn_down", 0, FF), "Q5_K"); // layers below n/16
  assertEquals(typeIn("q3_k_m", "ffn_down", 9, FF), "Q4_K");
  assertEquals(typeIn("q3_k_m", "attn_output", 9), "Q5_0");
  assertEquals(typeIn("iq4_xs", "ffn_gate", 9), "IQ4_NL");
  assertEquals(typeIn("iq4_xs", "ffn_down", 9, FF), "IQ4_XS");
  assertEquals(typeIn("iq4_xs", "ffn_down", 2, FF), "Q5_K"); // first eighth, no importance matrix
  assertEquals(typeIn("q6_k", "attn_q", 3), "Q8_0");
  assertEquals(typeIn("q6_k", "ffn_down", 3, FF), "Q6_K");
  assertEquals(typeIn({ pure: "Q4_1" }, "attn_q", 3), "Q4_1");
  assertEquals(typeIn({ pure: "Q5_K" }, "attn_q", 3), "Q5_1");
  assertEquals(typeIn({ pure: "Q5_K" }, "attn_q", 3, 40), "F16"); // not whole 32-value blocks
});
