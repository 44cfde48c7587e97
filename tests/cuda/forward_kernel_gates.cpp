// The CUDA forward kernels (kernels/cuda/forward_kernels.h) against the CPU reference
// (kernels/ref/ops.h) on random inputs: embedding rows of every type, RMS norm, q/k norm + RoPE +
// K/V store, and paged attention (decode rows over short and long contexts, prefill tiles),
// including a scrambled block table that must give bitwise the same output as the identity one.
// Needs a GPU: without one it prints SKIPPED and the reason and exits 77.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/rope_table.h"
#include "backend/cuda/step_plan.h"
#include "core/half.h"
#include "format/quant.h"
#include "kernels/cuda/forward_kernels.h"
#include "kernels/kv_block_layout.h"
#include "kernels/ref/ops.h"
#include "kernels/weights.h"

namespace kipp {
namespace {

int failures = 0;

void report(bool pass, const std::string& what, const std::string& detail) {
  std::printf("%-4s %-44s %s\n", pass ? "PASS" : "FAIL", what.c_str(), detail.c_str());
  if (!pass) ++failures;
}

// A CUDA call that must succeed for the gates to go on.
void must(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return;
  std::printf("FAIL %s: %s\n", what, cudaGetErrorString(error));
  std::exit(1);
}
void must(const Status& status, const char* what) {
  if (status.ok()) return;
  std::printf("FAIL %s: %s\n", what, status.message().c_str());
  std::exit(1);
}

template <typename T>
T* upload(const std::vector<T>& values) {
  void* p = nullptr;
  must(cudaMalloc(&p, std::max<size_t>(1, values.size() * sizeof(T))), "cudaMalloc");
  must(cudaMemcpy(p, values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy to the GPU");
  return static_cast<T*>(p);
}

template <typename T>
std::vector<T> download(const T* device, size_t count) {
  must(cudaDeviceSynchronize(), "running the kernels");
  std::vector<T> values(count);
  must(cudaMemcpy(values.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
  return values;
}

std::vector<float> random_floats(std::mt19937& rng, size_t n, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(n);
  for (float& v : values) v = normal(rng);
  return values;
}

double nmse(const std::vector<float>& actual, const std::vector<float>& expected) {
  double error = 0, energy = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double d = double(actual[i]) - double(expected[i]);
    error += d * d;
    energy += double(expected[i]) * double(expected[i]);
  }
  return energy > 0 ? error / energy : error;
}

size_t bitwise_differences(const void* a, const void* b, size_t count, size_t width) {
  size_t differences = 0;
  for (size_t i = 0; i < count; ++i)
    differences +=
        std::memcmp(static_cast<const uint8_t*>(a) + i * width, static_cast<const uint8_t*>(b) + i * width, width) != 0;
  return differences;
}

std::string figure(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2e", value);
  return text;
}

// ---- Embedding: each type's rows as ref::dequantize_row gives them, bit for bit.

void gate_embedding(std::mt19937& rng) {
  const uint32_t rows = 50, cols = 256;
  const std::vector<uint32_t> tokens = {0, 49, 7, 7, 23};
  const std::vector<float> source = random_floats(rng, size_t{rows} * cols);
  for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_1}) {
    const size_t row_bytes = kernels::make_weight_matrix(type, nullptr, rows, cols).row_bytes;
    std::vector<uint8_t> bytes(rows * row_bytes);
    for (uint32_t r = 0; r < rows; ++r) {
      const float* in = source.data() + size_t{r} * cols;
      uint8_t* out = bytes.data() + r * row_bytes;
      switch (type) {
        case GgmlType::F32: std::memcpy(out, in, cols * sizeof(float)); break;
        case GgmlType::F16:
          for (uint32_t c = 0; c < cols; ++c) reinterpret_cast<uint16_t*>(out)[c] = f32_to_f16(in[c]);
          break;
        case GgmlType::BF16: f32_to_bf16_row(in, reinterpret_cast<uint16_t*>(out), cols); break;
        case GgmlType::Q8_0: quantize_q8_0(in, reinterpret_cast<BlockQ8_0*>(out), cols); break;
        default: quantize_affine4(in, reinterpret_cast<BlockAffine4*>(out), cols); break;
      }
    }
    const kernels::WeightMatrix w = kernels::make_weight_matrix(type, bytes.data(), rows, cols);
    std::vector<float> expected(tokens.size() * cols);
    for (size_t i = 0; i < tokens.size(); ++i) kernels::ref::dequantize_row(w, tokens[i], expected.data() + i * cols);
    uint8_t* table = upload(bytes);
    uint32_t* device_tokens = upload(tokens);
    float* x = upload(std::vector<float>(expected.size()));
    const cuda::DeviceMatrix matrix{type, table, rows, cols, row_bytes};
    must(cuda::embed_rows(matrix, device_tokens, static_cast<uint32_t>(tokens.size()), x, nullptr), "embed_rows");
    const std::vector<float> actual = download(x, expected.size());
    const size_t differences = bitwise_differences(actual.data(), expected.data(), actual.size(), sizeof(float));
    report(differences == 0, std::string("embedding ") + std::string(ggml_type_name(type)),
           std::to_string(differences) + " of " + std::to_string(actual.size()) + " values differ from the reference");
    cudaFree(table), cudaFree(device_tokens), cudaFree(x);
  }
}

// ---- RMS norm: the rows, and a gather of some of them (the logit rows' final norm).

void gate_rms_norm(std::mt19937& rng) {
  const uint32_t rows = 9, width = 1024;
  const float eps = 1e-6f;
  const std::vector<float> x = random_floats(rng, size_t{rows} * width, 3.0f);
  const std::vector<float> weight = random_floats(rng, width);
  const std::vector<uint32_t> gather = {8, 0, 3};
  float* device_x = upload(x);
  float* device_weight = upload(weight);
  uint32_t* device_gather = upload(gather);
  float* out = upload(std::vector<float>(x.size()));
  for (bool gathered : {false, true}) {
    const uint32_t n = gathered ? static_cast<uint32_t>(gather.size()) : rows;
    must(cuda::rms_norm_rows(device_x, width, gathered ? device_gather : nullptr, n, device_weight, width, eps, out,
                             width, nullptr),
         "rms_norm_rows");
    const std::vector<float> actual = download(out, size_t{n} * width);
    std::vector<float> expected(actual.size());
    for (uint32_t r = 0; r < n; ++r)
      kernels::ref::rms_norm(x.data() + size_t{gathered ? gather[r] : r} * width, weight.data(),
                             expected.data() + size_t{r} * width, width, eps);
    const size_t differences = bitwise_differences(actual.data(), expected.data(), actual.size(), sizeof(float));
    const double error = nmse(actual, expected);
    report(error <= 1e-12, gathered ? "rms norm (gathered rows)" : "rms norm",
           "nmse " + figure(error) + ", " + std::to_string(differences) + " of " + std::to_string(actual.size()) +
               " not bitwise");
  }
  cudaFree(device_x), cudaFree(device_weight), cudaFree(device_gather), cudaFree(out);
}

// ---- A paged K/V cache on the GPU for one item, and the step metadata of its rows.

struct Shape {
  uint32_t layers = 2, num_heads = 16, kv_heads = 8, head_dim = 128;
  uint32_t group() const { return num_heads / kv_heads; }
  uint32_t q_width() const { return num_heads * head_dim; }
  uint32_t kv_width() const { return kv_heads * head_dim; }
  uint32_t qkv_width() const { return q_width() + 2 * kv_width(); }
  KvBlockLayout layout() const { return KvBlockLayout{layers, kv_heads, head_dim}; }
};

// The step of one item appending `rows` tokens at `start`, its metadata uploaded.
struct DeviceStep {
  cuda::StepPlan plan;
  cuda::StepMetadataLayout layout;
  uint8_t* metadata = nullptr;

  DeviceStep(const std::vector<uint32_t>& table, uint32_t start, uint32_t rows, uint64_t kv_base,
             const cuda::StepPlanOptions& options) {
    const std::vector<uint32_t> tokens(rows, 1);
    EvalItem item;
    item.block_table = table;
    item.start = start;
    item.tokens = tokens;
    const std::vector<cuda::StepPlan> steps = cuda::plan_steps(std::span<const EvalItem>(&item, 1), options);
    if (steps.size() != 1) {
      std::printf("FAIL a gate's rows do not fit one step\n");
      std::exit(1);
    }
    plan = steps[0];
    layout = cuda::StepMetadataLayout::make(options.step_rows, plan.tables.size());
    std::vector<uint64_t> host(layout.bytes / 8 + 1);
    const uint64_t bases[] = {kv_base};
    cuda::pack_step_metadata(plan, layout, bases, reinterpret_cast<uint8_t*>(host.data()));
    metadata = reinterpret_cast<uint8_t*>(upload(host));
  }
  ~DeviceStep() { cudaFree(metadata); }
  DeviceStep(const DeviceStep&) = delete;
  DeviceStep& operator=(const DeviceStep&) = delete;

  template <typename T>
  const T* at(uint64_t offset) const {
    return reinterpret_cast<const T*>(metadata + offset);
  }
  cuda::KvPages pages(const KvBlockLayout& kv_layout) const {
    cuda::KvPages p;
    p.positions = at<uint32_t>(layout.positions);
    p.row_items = at<uint32_t>(layout.row_items);
    p.item_table_offsets = at<uint32_t>(layout.item_table_offsets);
    p.tables = at<uint32_t>(layout.tables);
    p.kv_bases = at<uint64_t>(layout.kv_bases);
    p.layout = kv_layout;
    return p;
  }
};

cuda::StepPlanOptions plan_options(const Shape& shape, uint32_t max_splits, uint32_t target_blocks) {
  cuda::StepPlanOptions options;
  options.step_rows = 1024;
  options.tile_rows = std::max<uint32_t>(1, 64 / shape.group());
  options.num_heads = shape.num_heads;
  options.kv_heads = shape.kv_heads;
  options.max_splits = max_splits;
  options.target_blocks = target_blocks;
  options.partial_capacity = uint64_t{1} << 16;
  return options;
}

// ---- q/k norm + RoPE + K/V store, against ref::rms_norm, ref::rope and ref::store_bf16.

void gate_rope_store(std::mt19937& rng) {
  const Shape shape;
  const KvBlockLayout layout = shape.layout();
  const uint32_t layer = 1, hd = shape.head_dim, half = hd / 2, context = 2048;
  const float eps = 1e-6f;
  const double theta = 1000000.0;
  const uint32_t start = 1000, rows = 70;  // positions 1000..1069, across three blocks
  const uint32_t blocks = (start + rows) / kKvBlockPositions + 1, physical = 2 * blocks;
  std::vector<uint32_t> table(blocks);
  std::vector<uint32_t> order(physical);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), rng);
  std::copy_n(order.begin(), blocks, table.begin());

  const std::vector<float> qkv = random_floats(rng, size_t{rows} * shape.qkv_width(), 2.0f);
  const std::vector<float> q_norm = random_floats(rng, hd), k_norm = random_floats(rng, hd);
  const std::vector<float> rope = cuda::rope_table(context, hd, theta);
  float* device_qkv = upload(qkv);
  float* device_q_norm = upload(q_norm);
  float* device_k_norm = upload(k_norm);
  float* device_rope = upload(rope);
  const size_t cache_elements = size_t{physical} * layout.block_elements();
  uint16_t* cache = upload(std::vector<uint16_t>(cache_elements, 0));
  const DeviceStep step(table, start, rows, reinterpret_cast<uint64_t>(cache), plan_options(shape, 1, 1));

  cuda::QkRopeStore args;
  args.qkv = device_qkv;
  args.qkv_stride = shape.qkv_width();
  args.rows = rows;
  args.q_norm = device_q_norm;
  args.k_norm = device_k_norm;
  args.rope = device_rope;
  args.num_heads = shape.num_heads;
  args.kv_heads = shape.kv_heads;
  args.head_dim = hd;
  args.layer = layer;
  args.eps = eps;
  args.pages = step.pages(layout);
  must(cuda::qk_norm_rope_store(args, nullptr), "qk_norm_rope_store");
  const std::vector<float> actual_qkv = download(device_qkv, qkv.size());
  const std::vector<uint16_t> actual_cache = download(cache, cache_elements);

  std::vector<float> expected_q, got_q;
  std::vector<uint16_t> expected_k, got_k, expected_v, got_v;
  std::vector<float> cos(half), sin(half), head(hd);
  std::vector<uint16_t> stored(hd);
  for (uint32_t r = 0; r < rows; ++r) {
    const uint32_t position = start + r;
    kernels::ref::rope_angles(position, hd, theta, cos.data(), sin.data());
    const float* row = qkv.data() + size_t{r} * shape.qkv_width();
    for (uint32_t h = 0; h < shape.num_heads + shape.kv_heads; ++h) {
      const bool is_q = h < shape.num_heads;
      kernels::ref::rms_norm(row + size_t{h} * hd, is_q ? q_norm.data() : k_norm.data(), head.data(), hd, eps);
      kernels::ref::rope(head.data(), 1, hd, cos.data(), sin.data());
      if (is_q) {
        expected_q.insert(expected_q.end(), head.begin(), head.end());
        const float* got = actual_qkv.data() + size_t{r} * shape.qkv_width() + size_t{h} * hd;
        got_q.insert(got_q.end(), got, got + hd);
        continue;
      }
      const uint32_t g = h - shape.num_heads;
      const uint16_t* block =
          actual_cache.data() + size_t{table[position / kKvBlockPositions]} * layout.block_elements();
      kernels::ref::store_bf16(head.data(), stored.data(), hd);
      expected_k.insert(expected_k.end(), stored.begin(), stored.end());
      const uint16_t* k = block + layout.k(layer, g) + layout.slot(position);
      got_k.insert(got_k.end(), k, k + hd);
      kernels::ref::store_bf16(row + size_t{shape.num_heads + shape.kv_heads + g} * hd, stored.data(), hd);
      expected_v.insert(expected_v.end(), stored.begin(), stored.end());
      const uint16_t* v = block + layout.v(layer, g) + layout.slot(position);
      got_v.insert(got_v.end(), v, v + hd);
    }
  }
  const double q_error = nmse(got_q, expected_q);
  report(q_error <= 1e-12, "q norm + rope", "nmse " + figure(q_error));
  // The sum of squares is added in another order than the reference's (both in double): a
  // stored K may round the other way in rare cases, never by more than one BF16 step.
  size_t k_exact = 0, k_far = 0;
  for (size_t i = 0; i < got_k.size(); ++i) {
    k_exact += got_k[i] == expected_k[i];
    k_far += std::abs(int(got_k[i]) - int(expected_k[i])) > 1;
  }
  report(k_far == 0 && k_exact * 1000 >= got_k.size() * 999, "k norm + rope, stored BF16",
         std::to_string(got_k.size() - k_exact) + " of " + std::to_string(got_k.size()) +
             " one BF16 step off the reference, " + std::to_string(k_far) + " further");
  const size_t v_differences = bitwise_differences(got_v.data(), expected_v.data(), got_v.size(), sizeof(uint16_t));
  report(v_differences == 0, "v stored BF16", std::to_string(v_differences) + " values differ from the reference");
  cudaFree(device_qkv), cudaFree(device_q_norm), cudaFree(device_k_norm), cudaFree(device_rope), cudaFree(cache);
}

// ---- Attention over a paged cache of random K/V.

struct AttentionCase {
  std::string name;
  uint32_t start, rows;
  uint32_t max_splits = 16;
};

void gate_attention(std::mt19937& rng, const AttentionCase& c, int multiprocessors) {
  const Shape shape;
  const KvBlockLayout layout = shape.layout();
  const uint32_t layer = 1, hd = shape.head_dim;
  const uint32_t length = c.start + c.rows, blocks = (length + kKvBlockPositions - 1) / kKvBlockPositions;
  const uint32_t physical = 2 * blocks + 1;
  // The logical blocks' contents; identity storage holds block b at b, scrambled at order[b].
  std::vector<uint16_t> logical(size_t{blocks} * layout.block_elements());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (uint16_t& v : logical) v = f32_to_bf16(normal(rng));
  // Positions past the context in its last block hold NaN: attention must not read them.
  uint16_t* last = logical.data() + size_t{blocks - 1} * layout.block_elements();
  for (uint32_t l = 0; l < shape.layers; ++l)
    for (uint32_t g = 0; g < shape.kv_heads; ++g)
      for (uint32_t p = length; p < blocks * kKvBlockPositions; ++p)
        for (uint32_t d = 0; d < hd; ++d) {
          last[layout.k(l, g) + layout.slot(p) + d] = 0xffff;
          last[layout.v(l, g) + layout.slot(p) + d] = 0xffff;
        }
  std::vector<uint32_t> identity(blocks), scrambled(blocks), order(physical);
  std::iota(identity.begin(), identity.end(), 0u);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), rng);
  std::copy_n(order.begin(), blocks, scrambled.begin());
  std::vector<uint16_t> identity_storage(size_t{physical} * layout.block_elements(), 0xffff);  // NaN past the data
  std::vector<uint16_t> scrambled_storage = identity_storage;
  for (uint32_t b = 0; b < blocks; ++b) {
    const uint16_t* from = logical.data() + size_t{b} * layout.block_elements();
    std::copy_n(from, layout.block_elements(), identity_storage.data() + size_t{b} * layout.block_elements());
    std::copy_n(from, layout.block_elements(),
                scrambled_storage.data() + size_t{scrambled[b]} * layout.block_elements());
  }

  const std::vector<float> qkv = random_floats(rng, size_t{c.rows} * shape.qkv_width());
  float* device_qkv = upload(qkv);
  const cuda::StepPlanOptions options = plan_options(shape, c.max_splits, 2 * static_cast<uint32_t>(multiprocessors));
  float* partials = upload(std::vector<float>(options.partial_capacity * (hd + 2)));
  const uint32_t tile_rows = options.tile_rows;
  must(cuda::reserve_attention_shared(tile_rows, shape.group(), hd), "reserve_attention_shared");

  std::vector<std::vector<float>> outputs;
  uint32_t splits = 0;
  for (const auto* storage : {&identity_storage, &scrambled_storage}) {
    uint16_t* cache = upload(*storage);
    const DeviceStep step(storage == &identity_storage ? identity : scrambled, c.start, c.rows,
                          reinterpret_cast<uint64_t>(cache), options);
    float* out = upload(std::vector<float>(size_t{c.rows} * shape.q_width()));
    cuda::AttentionArgs args;
    args.q = device_qkv;
    args.q_stride = shape.qkv_width();
    args.out = out;
    args.out_stride = shape.q_width();
    args.rows = c.rows;
    args.tiles = static_cast<uint32_t>(step.plan.tiles.size());
    args.tile_first_rows = step.at<uint32_t>(step.layout.tile_first_rows);
    args.tile_rows = step.at<uint32_t>(step.layout.tile_rows);
    args.tile_items = step.at<uint32_t>(step.layout.tile_items);
    args.max_tile_rows = 0;
    for (const cuda::StepPlan::Tile& tile : step.plan.tiles)
      args.max_tile_rows = std::max(args.max_tile_rows, tile.rows);
    args.num_heads = shape.num_heads;
    args.kv_heads = shape.kv_heads;
    args.head_dim = hd;
    args.layer = layer;
    args.splits = step.plan.splits;
    args.scale = 1.0f / std::sqrt(static_cast<float>(hd));
    args.pages = step.pages(layout);
    args.partials = partials;
    splits = args.splits;
    must(cuda::attention(args, nullptr), "attention");
    outputs.push_back(download(out, size_t{c.rows} * shape.q_width()));
    cudaFree(out), cudaFree(cache);
  }

  // The reference: each kv head's group over the identity blocks.
  std::vector<float> expected(size_t{c.rows} * shape.q_width());
  std::vector<const uint16_t*> block_pointers(blocks);
  for (uint32_t b = 0; b < blocks; ++b) block_pointers[b] = logical.data() + size_t{b} * layout.block_elements();
  std::vector<float> scratch(kernels::ref::attention_scratch_floats(length, 1, shape.group(), hd));
  for (uint32_t g = 0; g < shape.kv_heads; ++g) {
    const kernels::KvLayerView view{block_pointers.data(), layout.k(layer, g), layout.v(layer, g), 1, hd, hd};
    kernels::ref::attention_rows(qkv.data() + size_t{g} * shape.group() * hd, shape.qkv_width(), c.rows, c.start,
                                 shape.group(), view, 1.0f / std::sqrt(static_cast<float>(hd)), scratch.data(),
                                 expected.data() + size_t{g} * shape.group() * hd, shape.q_width());
  }
  const double error = nmse(outputs[0], expected);
  const size_t differences =
      bitwise_differences(outputs[0].data(), outputs[1].data(), outputs[0].size(), sizeof(float));
  report(error <= 1e-8, "attention " + c.name, "nmse " + figure(error) + " (" + std::to_string(splits) + " splits)");
  report(differences == 0, "attention " + c.name + ", scrambled blocks",
         std::to_string(differences) + " values differ from the identity table's");
  cudaFree(device_qkv), cudaFree(partials);
}

}  // namespace
}  // namespace kipp

int main() {
  using namespace kipp;
  const Expected<CudaDeviceInfo> device = cuda_device_info();
  if (!device.ok()) {
    std::printf("SKIPPED: %s\n", device.message().c_str());
    return 77;
  }
  std::printf("%s, compute capability %d.%d\n", device->name.c_str(), device->compute_major, device->compute_minor);
  std::mt19937 rng(1234);
  gate_embedding(rng);
  gate_rms_norm(rng);
  gate_rope_store(rng);
  for (uint32_t length : {1u, 31u, 32u, 33u, 1000u, 5000u})
    gate_attention(rng, {"decode, context " + std::to_string(length), length - 1, 1}, device->multiprocessors);
  gate_attention(rng, {"decode, context 1000, one split", 999, 1, 1}, device->multiprocessors);
  gate_attention(rng, {"prefill, 67 rows from 0", 0, 67}, device->multiprocessors);
  gate_attention(rng, {"prefill, 67 rows from 40, one split", 40, 67, 1}, device->multiprocessors);
  gate_attention(rng, {"prefill, 512 rows from 300", 300, 512}, device->multiprocessors);
  std::printf("%s: %d failed\n", failures == 0 ? "PASS" : "FAIL", failures);
  return failures == 0 ? 0 : 1;
}
