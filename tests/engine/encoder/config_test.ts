// config.json of each encoder family read as the engine runs it: BERT's defaults, XLM-R's position
// offset (padding_idx + 1, so 514 positions read 512 tokens), NomicBERT's own keys (rotary dims
// from rotary_emb_fraction, SwiGLU, its bias switches), the classification heads, which configs
// the routing predicate takes, and the refusals that name what is not supported.

import { isEncoderConfig, parseEncoderConfig } from "../../../engine/encoder/config.ts";
import { ModelLoadError } from "../../../engine/model/errors.ts";
import { assert, assertEquals, assertThrows } from "../../helpers/testing.ts";

const BERT = {
  architectures: ["BertModel"],
  model_type: "bert",
  hidden_size: 384,
  num_hidden_layers: 6,
  num_attention_heads: 12,
  intermediate_size: 1536,
  max_position_embeddings: 512,
  vocab_size: 30522,
  type_vocab_size: 2,
  layer_norm_eps: 1e-12,
  hidden_act: "gelu",
};

Deno.test("encoder config: BERT, XLM-R and NomicBERT as the engine runs them", () => {
  const bert = parseEncoderConfig(BERT, "config.json");
  assertEquals(
    [bert.family, bert.headDim, bert.positionOffset, bert.maxInputTokens, bert.activation],
    ["bert", 32, 0, 512, "gelu"],
  );
  assertEquals(bert.classifier, null);
  const xlmr = parseEncoderConfig({
    ...BERT,
    architectures: ["XLMRobertaForSequenceClassification"],
    model_type: "xlm-roberta",
    max_position_embeddings: 514,
    pad_token_id: 1,
    type_vocab_size: 1,
    num_labels: 1,
  }, "config.json");
  assertEquals([xlmr.family, xlmr.positionOffset, xlmr.maxInputTokens], ["xlm-roberta", 2, 512]);
  assertEquals(xlmr.classifier, { numLabels: 1, head: "roberta" });
  const cls = parseEncoderConfig(
    { ...BERT, architectures: ["BertForSequenceClassification"], id2label: { 0: "a", 1: "b" } },
    "config.json",
  );
  assertEquals(cls.classifier, { numLabels: 2, head: "bert" });
  assertEquals(
    parseEncoderConfig({ ...BERT, hidden_act: "gelu_new" }, "c").activation,
    "gelu_tanh",
  );
  const nomic = parseEncoderConfig({
    architectures: ["NomicBertModel"],
    model_type: "nomic_bert",
    n_embd: 768,
    n_layer: 12,
    n_head: 12,
    n_inner: 3072,
    n_positions: 8192,
    vocab_size: 30528,
    type_vocab_size: 2,
    layer_norm_epsilon: 1e-12,
    activation_function: "swiglu",
    rotary_emb_fraction: 0.5,
    rotary_emb_base: 1000,
    qkv_proj_bias: false,
    mlp_fc1_bias: false,
    mlp_fc2_bias: false,
  }, "config.json");
  assertEquals(
    [nomic.rotaryDim, nomic.rotaryBase, nomic.positionRows, nomic.maxInputTokens, nomic.activation],
    [32, 1000, 0, 8192, "swiglu"],
  );
  assertEquals([nomic.attentionBias, nomic.mlpUpBias, nomic.mlpDownBias], [false, false, false]);
});

Deno.test("encoder config: the routing predicate and the refusals", () => {
  assert(isEncoderConfig(BERT));
  assert(isEncoderConfig({ model_type: "nomic_bert" }));
  assert(!isEncoderConfig({ architectures: ["LlamaForCausalLM"], model_type: "llama" }));
  assert(!isEncoderConfig({ architectures: ["BertForMaskedLM"], model_type: "bert" }));
  for (
    const bad of [
      { ...BERT, hidden_act: "relu" },
      { ...BERT, position_embedding_type: "relative_key" },
      { ...BERT, hidden_size: undefined },
      { architectures: ["LlamaForCausalLM"], model_type: "llama" },
      { model_type: "nomic_bert", n_embd: 64, n_head: 2, n_layer: 1, vocab_size: 9, prenorm: true },
    ]
  ) {
    assertThrows(() => parseEncoderConfig(bad, "config.json"), ModelLoadError, JSON.stringify(bad));
  }
});
