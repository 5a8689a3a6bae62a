// read_sum.wgsl through the sampler instead of a storage binding: sums the rgba32uint texels of a
// texture, one total per lane. On llvmpipe a storage load is a loop over the 8 lanes of a SIMD
// group that inserts each lane's word through the stack (a stalled store-to-load forward per
// 4 bytes), while a texel fetch is vectorized; this kernel reads the same bytes about 10x faster,
// so it is the adapter's read roofline for kernels that could keep their weights in textures.
//
// Texels are numbered row-major (WIDTH per row, a multiple of LANES * PER_LANE, so a workgroup
// never straddles rows); workgroup g reads texels [g·LANES·PER_LANE, (g+1)·LANES·PER_LANE), in
// steps of LANES adjacent texels, four fetches per step. Every workgroup is full.

@group(0) @binding(0) var src: texture_2d<u32>;
@group(0) @binding(1) var<storage, read_write> totals: array<u32>;

const LANES: u32 = 256u;

@compute @workgroup_size(LANES)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
  let first = wg.x * LANES * PER_LANE;
  let row = first / WIDTH;
  let col = first % WIDTH + lid.x;
  var sum = vec4<u32>(0u);
  for (var k = 0u; k < PER_LANE; k += 4u) {
    let c = col + k * LANES;
    sum += (textureLoad(src, vec2<u32>(c, row), 0) + textureLoad(src, vec2<u32>(c + LANES, row), 0))
      + (textureLoad(src, vec2<u32>(c + 2u * LANES, row), 0) + textureLoad(src, vec2<u32>(c + 3u * LANES, row), 0));
  }
  totals[wg.x * LANES + lid.x] = sum.x + sum.y + sum.z + sum.w;
}
