#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/forward_kernels.h"
#include "kernels/cuda/launch_status.h"

namespace kipp::cuda {
namespace {

// One thread block per (row, head) with one thread per rotated pair (i, i + head_dim / 2).
// Heads [0, num_heads) are q heads; the rest are kv heads, whose k is stored after rotation and
// whose v is stored as it is.
__global__ void qk_rope_store_kernel(QkRopeStore args) {
  __shared__ double partial[32];
  const uint32_t row = blockIdx.x, head = blockIdx.y, i = threadIdx.x;
  const uint32_t hd = args.head_dim, half = hd / 2;
  const bool is_q = head < args.num_heads;
  const uint32_t kv_head = head - args.num_heads;
  float* row_values = args.qkv + size_t{row} * args.qkv_stride;
  float* vec = is_q ? row_values + size_t{head} * hd : row_values + (size_t{args.num_heads} + kv_head) * hd;
  const float* weight = is_q ? args.q_norm : args.k_norm;

  const float first = vec[i], second = vec[i + half];
  const double squares = static_cast<double>(first) * first + static_cast<double>(second) * second;
  const float scale = inverse_rms(block_sum(squares, partial), hd, args.eps);
  const float a = __fmul_rn(__fmul_rn(first, scale), weight[i]);
  const float b = __fmul_rn(__fmul_rn(second, scale), weight[i + half]);

  const uint32_t position = args.pages.positions[row];
  const float* angles = args.rope + size_t{position} * hd;
  const float c = angles[i], s = angles[half + i];
  const float rotated_a = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
  const float rotated_b = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
  vec[i] = rotated_a;
  vec[i + half] = rotated_b;
  if (is_q) return;

  const KvPages& pages = args.pages;
  const uint32_t item = pages.row_items[row];
  const uint32_t physical = pages.tables[pages.item_table_offsets[item] + KvBlockLayout::block_of(position)];
  uint16_t* block =
      reinterpret_cast<uint16_t*>(pages.kv_bases[item]) + size_t{physical} * pages.layout.block_elements();
  const size_t slot = pages.layout.slot(position);
  uint16_t* k = block + pages.layout.k(args.layer, kv_head) + slot;
  uint16_t* v = block + pages.layout.v(args.layer, kv_head) + slot;
  const float* v_in = row_values + (size_t{args.num_heads} + args.kv_heads + kv_head) * hd;
  k[i] = float_to_bf16_bits(rotated_a);
  k[i + half] = float_to_bf16_bits(rotated_b);
  v[i] = float_to_bf16_bits(v_in[i]);
  v[i + half] = float_to_bf16_bits(v_in[i + half]);
}

}  // namespace

Status qk_norm_rope_store(const QkRopeStore& args, cudaStream_t stream) {
  if (args.head_dim % 64 != 0 || args.head_dim > 2048)
    return make_error("the cuda backend's q/k norm needs a head size that is a multiple of 64, at most 2048");
  if (args.rows == 0) return ok_status();
  const dim3 grid(args.rows, args.num_heads + args.kv_heads);
  qk_rope_store_kernel<<<grid, args.head_dim / 2, 0, stream>>>(args);
  return last_launch_status("q/k norm, rope and K/V store kernel");
}

}  // namespace kipp::cuda
