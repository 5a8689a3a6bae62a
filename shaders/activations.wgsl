// Activations several kernels share, appended to their source (WGSL has no includes): one formula
// each, in scalar and vec4 forms (WGSL has no overloading of user functions).

fn silu(v: f32) -> f32 {
  return v / (1.0 + exp(-v));
}

fn silu4(v: vec4<f32>) -> vec4<f32> {
  return v / (1.0 + exp(-v));
}

// GELU's tanh approximation 0.5·v·(1 + tanh(c·(v + 0.044715·v³))), c = √(2/π), written as
// v / (1 + exp(-2c·(...))): the same function, without tanh's inf/inf for large arguments.
fn geluTanh(v: f32) -> f32 {
  return v / (1.0 + exp(-1.5957691216057308 * (v + 0.044715 * v * v * v)));
}

fn geluTanh4(v: vec4<f32>) -> vec4<f32> {
  return v / (1.0 + exp(-1.5957691216057308 * (v + 0.044715 * v * v * v)));
}

// tanh through exp of a non-positive argument, so large |z| saturates instead of overflowing.
fn tanhStable(z: f32) -> f32 {
  let e = exp(-2.0 * abs(z));
  let r = (1.0 - e) / (1.0 + e);
  return select(-r, r, z >= 0.0);
}

fn tanhStable4(z: vec4<f32>) -> vec4<f32> {
  let e = exp(-2.0 * abs(z));
  return sign(z) * (1.0 - e) / (1.0 + e);
}
