// Loads a model's weights onto the GPU: the same walk over the tensor list for either format and
// every family (a family's optional tensors where its config has them), each tensor streamed by that format's uploader (safetensors_upload.ts, gguf_upload.ts).

import type { Gpu } from "../gpu/device.ts";
import type { WeightLayout } from "../gpu/weight_texture.ts";
import type { ModelFiles } from "../formats/model_files.ts";
import { EMBED, FINAL_NORM, type LayerTensor, layerTensor, LM_HEAD } from "../model/tensors.ts";
import { GgufUpload } from "./gguf_upload.ts";
import type { LayerWeights, ModelWeights } from "./model_weights.ts";
import { weightsToTextures } from "./texture_parts.ts";
import { SafetensorsUpload } from "./safetensors_upload.ts";
import type { LoadProgress, WeightUpload } from "./upload.ts";

export async function loadWeights(
  gpu: Gpu,
  files: ModelFiles,
  onProgress?: LoadProgress,
  /**
   * Where matrices go (engine/forward/matmul_choice.ts): safetensors float matrices straight into
   * textures; a GGUF file's matrices, quantized or not, are moved into them part by part once all
   * are loaded (texture_parts.ts). A matrix the texture kernels cannot read stays in storage.
   */
  layout: WeightLayout = "storage",
): Promise<ModelWeights> {
  const cfg = files.config;
  const upload: WeightUpload = files.gguf
    ? new GgufUpload(gpu, files, onProgress)
    : new SafetensorsUpload(gpu, files, onProgress, layout);

  // Gemma's safetensors hold w of 1 + w (its GGUF files 1 + w: gguf_config.ts says 0).
  const normAdd = cfg.normOffset;
  const embed = await upload.matrix([EMBED]);
  const layers: LayerWeights[] = [];
  for (let i = 0; i < cfg.numLayers; i++) {
    const t = (tensor: LayerTensor) => layerTensor(i, tensor, cfg);
    // Gemma's norms scale by 1 + w: its safetensors hold w, and the 1 is added here, once.
    const norm = (...tensors: LayerTensor[]) => upload.vector(tensors.map(t), normAdd);
    layers.push({
      inputNorm: await norm("inputNorm"),
      qkv: await upload.matrix([t("q"), t("k"), t("v")]),
      ...(cfg.qkvBias
        ? { qkvBias: await upload.vector([t("qBias"), t("kBias"), t("vBias")]) }
        : {}),
      ...(cfg.qkNorm ? { qkNorm: await norm("qNorm", "kNorm") } : {}),
      o: await upload.matrix([t("o")]),
      ...(cfg.sandwichNorms ? { attnOutNorm: await norm("attnOutNorm") } : {}),
      mlpNorm: await norm("mlpNorm"),
      gateUp: await upload.glu(t("gate"), t("up")),
      down: await upload.matrix([t("down")]),
      ...(cfg.sandwichNorms ? { mlpOutNorm: await norm("mlpOutNorm") } : {}),
    });
  }
  const finalNorm = await upload.vector([FINAL_NORM], normAdd);
  const lmHead = cfg.tieWordEmbeddings ? embed : await upload.matrix([LM_HEAD]);
  const weights = { embed, layers, finalNorm, lmHead, bytes: upload.gpuBytes };
  return files.gguf && layout === "texture" ? weightsToTextures(gpu, weights) : weights;
}
