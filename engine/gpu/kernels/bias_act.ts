// Binds shaders/bias_act.wgsl: a bias and an activation in place on every row (an encoder's GELU
// after its up projection, tanh after its pooler's dense, Gemma 2's soft cap of its logits). The
// bias may be absent.

import type { Gpu } from "../device.ts";
import { type BoundKernel, type BufferArg, type KernelKind, ParamsUniform } from "../kernel.ts";
import { bindBuffers, getPipeline } from "../shader.ts";
import { createStorage } from "../buffers.ts";
import source from "../../../shaders/bias_act.wgsl" with { type: "text" };
import activations from "../../../shaders/activations.wgsl" with { type: "text" };

/**
 * gelu: erf form (Hugging Face's "gelu"); gelu_tanh: its tanh approximation ("gelu_new");
 * softcap: cap·tanh(v / cap).
 */
export type Activation = "gelu" | "gelu_tanh" | "tanh" | "softcap";

const ACT_CODES: Record<Activation, number> = { gelu: 0, gelu_tanh: 1, tanh: 2, softcap: 3 };

export interface BiasActArgs {
  /** f32 [rows, width], updated in place. */
  x: BufferArg;
  /** W [width], or null: no bias. */
  b: BufferArg | null;
  width: number;
  act: Activation;
  /** softcap's cap (> 0). */
  cap?: number;
  /** What the kernel counts as in a step's split (default weights). */
  kind?: KernelKind;
}

const LANES = 64;
const MAX_WORKGROUPS = 65535;

/** A bound kernel that also holds the placeholder buffer it made for a missing bias. */
export function bindBiasAct(gpu: Gpu, args: BiasActArgs): BoundKernel {
  const { width, act } = args;
  if (!Number.isInteger(width) || width < 1) throw new RangeError(`biasAct: bad width ${width}`);
  if (!(act in ACT_CODES)) throw new RangeError(`biasAct: unknown activation ${act}`);
  const pipeline = getPipeline(gpu, source + activations, "main", {
    ACT: ACT_CODES[act],
    HAS_BIAS: args.b ? 1 : 0,
  });
  const cap = args.cap ?? 0;
  if (act === "softcap" && !(cap > 0)) throw new RangeError(`biasAct: bad soft cap ${cap}`);
  const params = new ParamsUniform(gpu, [width, { f32: cap }]);
  // The binding exists either way; a 16-byte placeholder stands in for a missing bias.
  const b = args.b ?? createStorage(gpu, 16, "no bias");
  const bindGroup = bindBuffers(gpu, pipeline, [params.buffer, args.x, b]);
  const groups = Math.ceil(width / LANES);
  return {
    kind: args.kind ?? "weights",
    encode(pass, rows) {
      if (rows <= 0) return;
      if (rows > MAX_WORKGROUPS) throw new RangeError(`biasAct: ${rows} rows exceed one dispatch`);
      params.setRows(rows);
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(groups, rows);
    },
  };
}
