#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <vector>

#include "backend/cpu/cpu_kv_storage.h"
#include "core/large_buffer.h"
#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "kernels/cpu/kernels.h"

namespace kipp {
namespace {

using kernels::WeightMatrix;

// Logit rows computed together: each pass over the output head serves this many positions.
constexpr size_t kLogitRowsPerPass = 16;
// Query rows of one sequence that share one widening of each K/V block in attention.
constexpr size_t kAttentionTileRows = 32;
// Output rows are shared among threads in whole units of this many (the panels of packed
// weights, KernelTable::pack_weights, are sliced only between panels).
constexpr size_t kOutputRowsPerUnit = 16;
// Weight rows packed at a time at load (a multiple of the panels' 16 rows).
constexpr size_t kPackRowsPerPiece = 4096;

// A layer's seven projections, declared once: indices into PreparedLayer::projections, each
// with the model tensor it is prepared from.
enum Projection : size_t { kQ, kK, kV, kO, kGate, kUp, kDown, kNumProjections };
constexpr TensorView LayerWeights::*kProjectionTensors[kNumProjections] = {
    &LayerWeights::attn_q,   &LayerWeights::attn_k, &LayerWeights::attn_v,  &LayerWeights::attn_output,
    &LayerWeights::ffn_gate, &LayerWeights::ffn_up, &LayerWeights::ffn_down};

struct PreparedLayer {
  std::array<WeightMatrix, kNumProjections> projections;
  std::vector<float> attn_norm, ffn_norm, q_norm, k_norm;
};

const kernels::KernelTable& select_kernels(const std::string& name) {
  if (name.empty()) return kernels::cpu_kernels();
  const kernels::KernelTable* table = kernels::find_kernel_table(name);
  return table != nullptr ? *table : kernels::cpu_kernels();
}

Expected<WeightMatrix> prepare_matrix(const TensorView& view) {
  WeightMatrix w = kernels::make_weight_matrix(view.type, view.data, view.rows, view.cols);
  if (w.row_bytes == 0)
    return make_error("tensor " + std::string(view.name) + ": element type " + std::string(ggml_type_name(view.type)) +
                      " is not supported by the cpu backend");
  return w;
}

Expected<std::vector<float>> prepare_vector(const TensorView& view) {
  KIPP_ASSIGN_OR_RETURN(WeightMatrix w, prepare_matrix(view));
  std::vector<float> values(view.cols * view.rows);
  for (size_t r = 0; r < w.rows; ++r) kernels::cpu_kernels().dequantize_row(w, r, values.data() + r * w.cols);
  return values;
}

class CpuBackend final : public Backend {
 public:
  CpuBackend(const Model& model, const BackendOptions& options)
      : config_(model.config()),
        kernels_(select_kernels(options.kernels)),
        kv_layout_{config_.num_layers, config_.num_kv_heads, config_.head_dim},
        step_rows_(std::max<uint32_t>(1, options.max_step_tokens)),
        pool_(options.threads) {}

  Status prepare(const Model& model) {
    const Qwen3Weights& weights = model.weights();
    KIPP_ASSIGN_OR_RETURN(embedding_, prepare_matrix(weights.token_embedding));
    KIPP_ASSIGN_OR_RETURN(head_, prepare_matrix(weights.output));
    KIPP_ASSIGN_OR_RETURN(output_norm_, prepare_vector(weights.output_norm));
    for (const LayerWeights& lw : weights.layers) {
      PreparedLayer layer;
      for (size_t p = 0; p < kNumProjections; ++p) {
        KIPP_ASSIGN_OR_RETURN(layer.projections[p], prepare_matrix(lw.*kProjectionTensors[p]));
      }
      KIPP_ASSIGN_OR_RETURN(layer.attn_norm, prepare_vector(lw.attn_norm));
      KIPP_ASSIGN_OR_RETURN(layer.ffn_norm, prepare_vector(lw.ffn_norm));
      KIPP_ASSIGN_OR_RETURN(layer.q_norm, prepare_vector(lw.attn_q_norm));
      KIPP_ASSIGN_OR_RETURN(layer.k_norm, prepare_vector(lw.attn_k_norm));
      layers_.push_back(std::move(layer));
    }
    KIPP_RETURN_IF_ERROR(pack_weights());
    allocate_scratch();
    return ok_status();
  }

  const char* name() const override { return "cpu"; }

  Expected<std::unique_ptr<KvStorage>> create_kv_storage(uint32_t num_blocks) override {
    return std::unique_ptr<KvStorage>(
        std::make_unique<CpuKvStorage>(num_blocks, kv_layout_.block_elements(), live_kv_bytes_));
  }

  BackendMemory memory() const override {
    BackendMemory memory;
    memory.device = "cpu";
    memory.weight_bytes = packed_weights_bytes_ + output_norm_.size() * sizeof(float);
    for (const PreparedLayer& layer : layers_)
      memory.weight_bytes +=
          (layer.attn_norm.size() + layer.ffn_norm.size() + layer.q_norm.size() + layer.k_norm.size()) * sizeof(float);
    memory.kv_bytes = live_kv_bytes_->load();
    memory.scratch_bytes = (scratch_.size() + prepared_.size()) * sizeof(float);
    return memory;
  }
  void set_activation_observer(ActivationObserver* observer) override { observer_ = observer; }

  Status eval(std::span<const EvalItem> items) override {
    // Block pointers per item, then the items' rows flattened and run in steps of step_rows_.
    ItemBlocks item_blocks(items.size());
    std::vector<Row> rows;
    for (size_t i = 0; i < items.size(); ++i) {
      auto* storage = static_cast<CpuKvStorage*>(items[i].kv);
      for (uint32_t physical : items[i].block_table) item_blocks[i].push_back(storage->block(physical));
      const size_t count = items[i].tokens.size();
      for (size_t t = 0; t < count; ++t) {
        const size_t logit_row = t + items[i].logits_count >= count ? t + items[i].logits_count - count : kNoLogits;
        rows.push_back(Row{i, items[i].start + static_cast<uint32_t>(t), items[i].tokens[t], logit_row});
      }
    }
    for (size_t begin = 0; begin < rows.size(); begin += step_rows_) {
      const size_t end = std::min(rows.size(), begin + step_rows_);
      run_step(items, item_blocks, std::span<const Row>(rows).subspan(begin, end - begin));
    }
    return ok_status();
  }

 private:
  static constexpr size_t kNoLogits = SIZE_MAX;
  struct Row {
    size_t item;
    uint32_t position;
    uint32_t token;
    size_t logit_row;  // row of the item's logits output, or kNoLogits
  };
  // Per item, its logical K/V blocks' storage.
  using ItemBlocks = std::vector<std::vector<const uint16_t*>>;

  // Consecutive rows of one sequence whose attention runs as one kernel call.
  struct AttentionTile {
    size_t first_row;
    size_t rows;
  };

  // ---- The forward pass of one step: the rows' tokens through every layer, in the order of
  // the math; each row's values live at row * width in the scratch arrays.

  void run_step(std::span<const EvalItem> items, const ItemBlocks& item_blocks, std::span<const Row> rows) {
    form_attention_tiles(rows);
    embed(rows);
    observe("embedding", 0, rows, x_, config_.hidden_size);
    for (size_t l = 0; l < layers_.size(); ++l) {
      attention_block(l, item_blocks, rows);
      feed_forward_block(l, rows);
    }
    write_logits(items, rows);
  }

  // x = the tokens' embeddings; cos/sin = the rotary angles of their positions.
  void embed(std::span<const Row> rows) {
    const size_t hidden = config_.hidden_size, half = config_.head_dim / 2;
    for_each_row(rows.size(), [&](size_t r) {
      kernels_.dequantize_row(embedding_, static_cast<size_t>(rows[r].token), x_ + r * hidden);
      kernels_.rope_angles(rows[r].position, config_.head_dim, config_.rope_theta, cos_ + r * half, sin_ + r * half);
    });
  }

  // proj = o(attention(rope(norm(q(xn))), rope(norm(k(xn))), v(xn))) with xn = rms_norm(x),
  // the rows' K and V joining their sequences' cache first. The residual add follows in
  // feed_forward_block.
  void attention_block(size_t l, const ItemBlocks& item_blocks, std::span<const Row> rows) {
    const PreparedLayer& layer = layers_[l];
    const size_t n = rows.size(), hidden = config_.hidden_size;
    for_each_row(n, [&](size_t r) { rms_norm_row(x_, layer.attn_norm, xn_, hidden, r); });
    matmuls(xn_, n, hidden, {{&layer.projections[kQ], q_}, {&layer.projections[kK], k_}, {&layer.projections[kV], v_}});
    for_each_row(n, [&](size_t r) {
      norm_and_rope_qk(layer, r);
      store_kv(l, item_blocks[rows[r].item], rows[r].position, r);
    });
    attend(l, item_blocks, rows);
    matmuls(attn_, n, config_.q_width(), {{&layer.projections[kO], proj_}});
    observe("attention", l, rows, proj_, hidden);
  }

  // x += proj (the attention's output); then x += down(swiglu(gate(xn), up(xn))) with
  // xn = rms_norm(x). The attention's residual and the norm after it share one pass.
  void feed_forward_block(size_t l, std::span<const Row> rows) {
    const PreparedLayer& layer = layers_[l];
    const size_t n = rows.size(), hidden = config_.hidden_size, ffn = config_.ffn_size;
    for_each_row(n, [&](size_t r) {
      kernels_.add(x_ + r * hidden, proj_ + r * hidden, hidden);
      rms_norm_row(x_, layer.ffn_norm, xn_, hidden, r);
    });
    matmuls(xn_, n, hidden, {{&layer.projections[kGate], gate_}, {&layer.projections[kUp], up_}});
    for_each_row(n, [&](size_t r) { kernels_.swiglu(gate_ + r * ffn, up_ + r * ffn, gate_ + r * ffn, ffn); });
    matmuls(gate_, n, ffn, {{&layer.projections[kDown], proj_}});
    for_each_row(n, [&](size_t r) { kernels_.add(x_ + r * hidden, proj_ + r * hidden, hidden); });
    observe("layer_output", l, rows, x_, hidden);
  }

  void rms_norm_row(const float* in, const std::vector<float>& weight, float* out, size_t width, size_t r) {
    kernels_.rms_norm(in + r * width, weight.data(), out + r * width, width, static_cast<float>(config_.rms_norm_eps));
  }

  // Row r's q and k heads: each normalized on its own (Qwen3's q/k norm), then rotated.
  void norm_and_rope_qk(const PreparedLayer& layer, size_t r) {
    const size_t hd = config_.head_dim, half = hd / 2;
    const auto eps = static_cast<float>(config_.rms_norm_eps);
    float* q = q_ + r * config_.q_width();
    float* key = k_ + r * config_.kv_width();
    for (size_t h = 0; h < config_.num_heads; ++h)
      kernels_.rms_norm(q + h * hd, layer.q_norm.data(), q + h * hd, hd, eps);
    for (size_t h = 0; h < config_.num_kv_heads; ++h)
      kernels_.rms_norm(key + h * hd, layer.k_norm.data(), key + h * hd, hd, eps);
    kernels_.rope(q, config_.num_heads, hd, cos_ + r * half, sin_ + r * half);
    kernels_.rope(key, config_.num_kv_heads, hd, cos_ + r * half, sin_ + r * half);
  }

  // Row r's K and V of layer l, as BF16, at its position in its sequence's blocks.
  void store_kv(size_t l, const std::vector<const uint16_t*>& blocks, uint32_t position, size_t r) {
    const size_t hd = config_.head_dim, kvw = config_.kv_width();
    auto* block = const_cast<uint16_t*>(blocks[KvBlockLayout::block_of(position)]);
    const size_t slot = kv_layout_.slot(position);
    for (size_t h = 0; h < config_.num_kv_heads; ++h) {
      kernels_.store_bf16(k_ + r * kvw + h * hd, block + kv_layout_.k(l, h) + slot, hd);
      kernels_.store_bf16(v_ + r * kvw + h * hd, block + kv_layout_.v(l, h) + slot, hd);
    }
  }

  // attn = each query head's attention over its sequence's K/V of layer l up to its position,
  // one work item per (tile, kv head): a group's query heads over their shared K/V.
  void attend(size_t l, const ItemBlocks& item_blocks, std::span<const Row> rows) {
    const size_t hd = config_.head_dim, qw = config_.q_width(), kv_heads = config_.num_kv_heads;
    const size_t group = config_.num_heads / kv_heads;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const auto tile_of = [&](size_t item) -> const AttentionTile& { return tiles_[item / kv_heads]; };
    const auto view_of = [&](size_t item) {
      const size_t g = item % kv_heads;
      return kernels::KvLayerView{
          item_blocks[rows[tile_of(item).first_row].item].data(), kv_layout_.k(l, g), kv_layout_.v(l, g), 1, hd, hd};
    };
    deal_round_robin(
        tiles_.size() * kv_heads,
        [&](size_t item) {
          const AttentionTile& tile = tile_of(item);
          kernels::fetch_kv_rows(view_of(item), rows[tile.first_row].position + tile.rows);
        },
        [&](float* scratch, size_t item) {
          const AttentionTile& tile = tile_of(item);
          const size_t g = item % kv_heads, r = tile.first_row;
          kernels_.attention_rows(q_ + r * qw + g * group * hd, qw, tile.rows, rows[r].position, group, view_of(item),
                                  scale, scratch, attn_ + r * qw + g * group * hd, qw);
        });
  }

  // The final norm and the output head for the rows whose logits were asked for, in passes of
  // kLogitRowsPerPass rows that each read the head once.
  void write_logits(std::span<const EvalItem> items, std::span<const Row> rows) {
    const size_t hidden = config_.hidden_size, vocab = config_.vocab_size;
    std::vector<const Row*> pending;
    for (const Row& row : rows)
      if (row.logit_row != kNoLogits) pending.push_back(&row);
    for (size_t begin = 0; begin < pending.size(); begin += kLogitRowsPerPass) {
      const size_t count = std::min(kLogitRowsPerPass, pending.size() - begin);
      for (size_t i = 0; i < count; ++i) {
        const size_t r = static_cast<size_t>(pending[begin + i] - rows.data());
        kernels_.rms_norm(x_ + r * hidden, output_norm_.data(), logit_inputs_ + i * hidden, hidden,
                          static_cast<float>(config_.rms_norm_eps));
        if (observer_ != nullptr)
          observer_->on_activation("final_norm", 0, rows[r].item, rows[r].position,
                                   std::span<const float>(logit_inputs_ + i * hidden, hidden));
      }
      matmuls(logit_inputs_, count, hidden, {{&head_, logits_}});
      for_each_row(count, [&](size_t i) {
        const Row& row = *pending[begin + i];
        std::copy_n(logits_ + i * vocab, vocab, items[row.item].logits + row.logit_row * vocab);
      });
    }
  }

  void observe(std::string_view name, size_t layer, std::span<const Row> rows, const float* values, size_t width) {
    if (observer_ == nullptr) return;
    for (size_t r = 0; r < rows.size(); ++r)
      observer_->on_activation(name, static_cast<uint32_t>(layer), rows[r].item, rows[r].position,
                               std::span<const float>(values + r * width, width));
  }

  // ---- Scheduling: how a step's work is shared among the pool's threads.

  // Splits the step's rows into attention tiles: runs of at most kAttentionTileRows consecutive
  // rows of one sequence.
  void form_attention_tiles(std::span<const Row> rows) {
    tiles_.clear();
    for (size_t r = 0; r < rows.size(); ++r) {
      const bool continues =
          !tiles_.empty() && rows[r].item == rows[r - 1].item && tiles_.back().rows < kAttentionTileRows;
      if (continues) {
        ++tiles_.back().rows;
      } else {
        tiles_.push_back(AttentionTile{r, 1});
      }
    }
  }

  // Runs body(i) for i in [0, count) over the pool, in one pass when there are rows enough
  // to share (a single row runs inline: the wake-up would cost more than the work).
  template <typename Body>
  void for_each_row(size_t count, const Body& body) {
    pool_.parallel_for(count, [&](size_t, size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) body(i);
    });
  }

  // Runs work(scratch, item) for item in [0, count), the items dealt out round-robin so every
  // thread gets short and long (later) rows of attention alike; a thread calls fetch(next) for
  // its next item before it works on the current one, so that item's data is on its way.
  // `scratch` is the thread's own attention scratch.
  template <typename Fetch, typename Work>
  void deal_round_robin(size_t count, const Fetch& fetch, const Work& work) {
    const size_t threads = std::min(pool_.size(), count);
    pool_.parallel_for(threads, [&](size_t thread, size_t first_slot, size_t end_slot) {
      float* scratch = attention_scratch_ + thread * attention_scratch_floats_;
      for (size_t slot = first_slot; slot < end_slot; ++slot) {
        for (size_t item = slot; item < count; item += threads) {
          if (const size_t next = item + threads; next < count) fetch(next);
          work(scratch, item);
        }
      }
    });
  }

  struct Product {
    const WeightMatrix* w;
    float* out;  // row r at out + r * w->rows
  };

  // The products of several matrices with one input (n_rows rows of w.cols floats, x_stride
  // apart): the input is prepared once and the output rows of all of them are split over the
  // threads in one pass; each element is computed exactly as a single-threaded product would,
  // so results do not depend on the thread count. Matrices whose weight types want different
  // input formats run one at a time.
  void matmuls(const float* x, size_t n_rows, size_t x_stride, std::initializer_list<Product> products) {
    const kernels::InputFormat format = kernels_.input_format(products.begin()->w->type);
    for (const Product& product : products)
      if (kernels_.input_format(product.w->type) != format) {
        for (const Product& single : products) matmuls(x, n_rows, x_stride, {single});
        return;
      }
    const kernels::PreparedInput in =
        kernels::input_layout(format, x, n_rows, x_stride, products.begin()->w->cols, prepared_.data());
    // Rows prepared by all threads: on one thread alone the preparation takes a visible share of
    // a batched step or a prefill (`kipp bench`) while the other threads wait.
    if (format != kernels::InputFormat::F32)
      pool_.parallel_for(n_rows, [&](size_t, size_t begin, size_t end) {
        if (begin < end) kernels_.prepare_rows(in, begin, end - begin);
      });
    const auto units = [](const WeightMatrix& w) { return (w.rows + kOutputRowsPerUnit - 1) / kOutputRowsPerUnit; };
    size_t total_units = 0;
    for (const Product& product : products) total_units += units(*product.w);
    pool_.parallel_for(total_units, [&](size_t, size_t begin, size_t end) {
      size_t first = 0;  // the first unit of `product` in the combined range
      for (const Product& product : products) {
        const WeightMatrix& w = *product.w;
        const size_t lo = std::max(begin, first), hi = std::min(end, first + units(w));
        if (lo < hi) {
          const size_t row = (lo - first) * kOutputRowsPerUnit;
          WeightMatrix part = w;
          part.data = w.data + row * w.row_bytes;
          part.rows = std::min(w.rows, (hi - first) * kOutputRowsPerUnit) - row;
          kernels_.matmul(part, in, product.out + row, w.rows);
        }
        first += units(w);
      }
    });
  }

  // ---- Preparation at load.

  // The layers' projections and the output head in the kernel table's own arrangement, made
  // once here so that no product rearranges them per call; the file's pages of those tensors are
  // dropped after (they are read again only if something else reads them), so resident memory
  // does not double. A tied BF16 head, packed, serves the embedding's lookups too.
  Status pack_weights() {
    if (kernels_.packs_weights == nullptr) return ok_status();
    const bool tied = embedding_.data == head_.data && embedding_.type == head_.type && embedding_.rows == head_.rows &&
                      embedding_.cols == head_.cols;
    std::vector<WeightMatrix*> matrices;
    if (kernels_.packs_weights(head_)) matrices.push_back(&head_);
    for (PreparedLayer& layer : layers_)
      for (WeightMatrix& w : layer.projections)
        if (kernels_.packs_weights(w)) matrices.push_back(&w);
    if (matrices.empty()) return ok_status();
    // One buffer for all of them, on huge pages (core/large_buffer.h).
    std::vector<size_t> offsets;
    size_t total = 0;
    for (const WeightMatrix* w : matrices) {
      offsets.push_back(total);
      total += (w->rows * w->row_bytes + 63) / 64 * 64;
    }
    packed_weights_ = allocate_large_buffer(total);
    packed_weights_bytes_ = total;
    if (packed_weights_ == nullptr)
      return make_error("cpu backend: out of memory while arranging the weights for the kernels");
    pool_.parallel_for(matrices.size(), [&](size_t, size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        WeightMatrix& w = *matrices[i];
        uint8_t* packed = packed_weights_.get() + offsets[i];
        // In pieces of whole panels, each piece's file pages dropped once it is packed, so a
        // large matrix (the output head) is never resident twice.
        for (size_t first = 0; first < w.rows; first += kPackRowsPerPiece) {
          WeightMatrix piece = w;
          piece.data = w.data + first * w.row_bytes;
          piece.rows = std::min(kPackRowsPerPiece, w.rows - first);
          kernels_.pack_weights(piece, packed + first * w.row_bytes);
          drop_mapped_pages({piece.data, piece.rows * w.row_bytes});
        }
        w.data = packed;
        w.panels = true;
      }
    });
    if (tied && head_.panels && head_.type == GgmlType::BF16) embedding_ = head_;
    return ok_status();
  }

  void allocate_scratch() {
    const size_t hidden = config_.hidden_size, qw = config_.q_width(), kvw = config_.kv_width();
    const size_t ffn = config_.ffn_size, half = config_.head_dim / 2, s = step_rows_;
    attention_scratch_floats_ = kernels::ref::attention_scratch_floats(
        config_.context_length, kAttentionTileRows, config_.num_heads / config_.num_kv_heads, config_.head_dim);
    tiles_.reserve(s);
    const size_t sizes[] = {s * hidden,
                            s * hidden,
                            s * qw,
                            s * kvw,
                            s * kvw,
                            s * qw,
                            s * hidden,
                            s * ffn,
                            s * ffn,
                            s * half,
                            s * half,
                            attention_scratch_floats_ * pool_.size(),
                            kLogitRowsPerPass * hidden,
                            kLogitRowsPerPass * size_t{config_.vocab_size}};
    size_t total = 0;
    for (size_t size : sizes) total += size;
    scratch_.assign(total, 0.0f);
    float* next = scratch_.data();
    float** targets[] = {
        &x_,     &xn_, &q_, &k_, &v_, &attn_, &proj_, &gate_, &up_, &cos_, &sin_, &attention_scratch_, &logit_inputs_,
        &logits_};
    for (size_t i = 0; i < std::size(sizes); ++i) {
      *targets[i] = next;
      next += sizes[i];
    }
    // One prepared-input buffer, the largest any product of a step needs.
    size_t prepared = 0;
    const auto grow = [&](GgmlType type, size_t rows, size_t cols) {
      prepared = std::max(prepared, kernels::prepared_input_bytes(kernels_.input_format(type), rows, cols));
    };
    for (const PreparedLayer& layer : layers_)
      for (const WeightMatrix& w : layer.projections) grow(w.type, s, w.cols);
    grow(head_.type, kLogitRowsPerPass, hidden);
    prepared_.assign(prepared / sizeof(float) + 1, 0.0f);
  }

  ModelConfig config_;
  const kernels::KernelTable& kernels_;
  KvBlockLayout kv_layout_;
  size_t step_rows_;
  ThreadPool pool_;
  WeightMatrix embedding_, head_;
  LargeBuffer packed_weights_;  // what the layers' packed matrices point into
  size_t packed_weights_bytes_ = 0;
  std::shared_ptr<std::atomic<uint64_t>> live_kv_bytes_ = std::make_shared<std::atomic<uint64_t>>(0);
  std::vector<float> output_norm_;
  std::vector<PreparedLayer> layers_;
  std::vector<float> scratch_;
  size_t attention_scratch_floats_ = 0;  // per thread
  std::vector<AttentionTile> tiles_;     // of the current step (capacity: one per row)
  std::vector<float> prepared_;          // the prepared input of the products being computed
  ActivationObserver* observer_ = nullptr;
  float *x_ = nullptr, *xn_ = nullptr, *q_ = nullptr, *k_ = nullptr, *v_ = nullptr, *attn_ = nullptr, *proj_ = nullptr,
        *gate_ = nullptr, *up_ = nullptr, *cos_ = nullptr, *sin_ = nullptr, *attention_scratch_ = nullptr,
        *logit_inputs_ = nullptr, *logits_ = nullptr;
};

}  // namespace

Expected<std::unique_ptr<Backend>> create_cpu_backend(const Model& model, const BackendOptions& options) {
  auto backend = std::make_unique<CpuBackend>(model, options);
  KIPP_RETURN_IF_ERROR(backend->prepare(model));
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace kipp
