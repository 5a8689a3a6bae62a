// The order the samplers rank logits in, and how they read them, prepended to sample.wgsl,
// argmax_partials.wgsl and sample_greedy.wgsl so that the greedy path and the full sampler pick the
// same id bit for bit. Each including shader binds the logits twice, as `logits4`
// (array<vec4<f32>>) and `logits1` (array<f32>).

// Order-preserving key: larger logit, larger key. NaN maps to 0, below -inf.
fn orderKey(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  if ((b & 0x7fffffffu) > 0x7f800000u) { return 0u; }
  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

fn keyValue(k: u32) -> f32 {
  return bitcast<f32>(select(~k, k & 0x7fffffffu, (k & 0x80000000u) != 0u));
}

fn orderKey4(x: vec4<f32>) -> vec4<u32> {
  return vec4<u32>(orderKey(x.x), orderKey(x.y), orderKey(x.z), orderKey(x.w));
}

// (ka, ia) comes before (kb, ib): larger key, then lower id.
fn before(ka: u32, ia: u32, kb: u32, ib: u32) -> bool {
  return ka > kb || (ka == kb && ia < ib);
}

// Aligned vec4 v of the logits; the buffer's last partial vec4 is read element by element.
fn load4(v: u32) -> vec4<f32> {
  let n = arrayLength(&logits1);
  if (4u * v + 3u < n) { return logits4[v]; }
  var r = vec4<f32>(0.0);
  if (4u * v < n) { r.x = logits1[4u * v]; }
  if (4u * v + 1u < n) { r.y = logits1[4u * v + 1u]; }
  if (4u * v + 2u < n) { r.z = logits1[4u * v + 2u]; }
  return r;
}
