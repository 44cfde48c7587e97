#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <vector>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_kv_storage.h"
#include "backend/cuda/rope_table.h"
#include "backend/cuda/step_plan.h"
#include "kernels/cuda/forward_kernels.h"
#include "kernels/cuda/launch_status.h"
#include "kernels/cuda/matmul.h"
#include "kernels/kv_block_layout.h"
#include "kernels/ref/ops.h"

namespace kipp {
namespace {

using cuda::cuda_status;
using cuda::DeviceInput;
using cuda::DeviceMatrix;
using cuda::Epilogue;
using cuda::StepPlan;

// Rows per step at least: large products keep the tensor cores busy, and a long prompt runs in
// few steps, so the attention of its later rows reads each K/V block for many rows at once.
constexpr uint32_t kMinStepRows = 1024;
// Logit rows per pass over the output head: the logits scratch is this many rows of the vocab.
constexpr uint32_t kLogitRowsPerPass = 128;
// Query heads an attention thread block serves at most: a tile is this many heads' worth of
// rows (at least one row), the shared memory of 64 queries of head size 128 being 82 KiB.
constexpr uint32_t kAttentionTileQueries = 64;
// Attention's context splits at most, and the partial results (query heads x splits) a step may
// leave for the combine step.
constexpr uint32_t kMaxAttentionSplits = 16;
constexpr uint64_t kPartialCapacity = uint64_t{1} << 16;
// Captured decode graphs kept at most (the oldest goes first).
constexpr size_t kMaxGraphs = 16;
// Step shapes remembered as run once outside a graph; the record starts over when it is full.
constexpr size_t kMaxSeenShapes = 1024;
// Device allocations are aligned to this many bytes (what vector loads and cuBLASLt want).
constexpr uint64_t kAlign = 256;

uint64_t align_up(uint64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

std::string gib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", static_cast<double>(bytes) / double(uint64_t{1} << 30));
  return text;
}

struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
struct HostFree {
  void operator()(void* p) const { cudaFreeHost(p); }
};
using DeviceBuffer = std::unique_ptr<uint8_t, DeviceFree>;
using PinnedBuffer = std::unique_ptr<uint8_t, HostFree>;

Expected<DeviceBuffer> device_alloc(uint64_t bytes, const char* what) {
  void* p = nullptr;
  if (const cudaError_t e = cudaMalloc(&p, std::max<uint64_t>(bytes, 1)); e != cudaSuccess) {
    cudaGetLastError();
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    return make_error(std::string(what) + " needs " + gib(bytes) + " GiB of GPU memory, " + gib(free_bytes) +
                      " GiB free");
  }
  return DeviceBuffer(static_cast<uint8_t*>(p));
}

Expected<PinnedBuffer> pinned_alloc(uint64_t bytes, const char* what) {
  void* p = nullptr;
  if (const cudaError_t e = cudaMallocHost(&p, std::max<uint64_t>(bytes, 1)); e != cudaSuccess) {
    cudaGetLastError();
    return make_error(std::string("cannot pin ") + std::to_string(bytes >> 20) + " MiB of host memory for " + what +
                      ": " + cudaGetErrorString(e));
  }
  return PinnedBuffer(static_cast<uint8_t*>(p));
}

// One product of a layer: a weight matrix and where its outputs go in the output row.
struct Projection {
  DeviceMatrix w;
  uint32_t out_offset = 0;
};

struct DeviceLayer {
  std::vector<Projection> qkv;  // one matrix when q, k and v share a type, else three
  DeviceMatrix o, gate, up, down;
  const float *attn_norm = nullptr, *ffn_norm = nullptr, *q_norm = nullptr, *k_norm = nullptr;
};

// What the weight upload copies where: bytes from the model's mapping (or a host vector) to an
// offset of the one weight buffer.
struct Upload {
  const void* source;
  uint64_t bytes;
  uint64_t offset;
};

// A captured decode step is valid for steps of the same shape: the metadata it reads lives at
// fixed device addresses, and everything else in its launches follows from these.
struct GraphKey {
  uint32_t rows, items, logits, max_tile_rows, splits;
  auto operator<=>(const GraphKey&) const = default;
};

struct Graph {
  cudaGraphExec_t exec = nullptr;
  uint64_t bytes = 0;  // estimated: device memory the instantiation and upload took
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(const Model& model, const BackendOptions& options, CudaDeviceInfo device)
      : config_(model.config()),
        device_(std::move(device)),
        layout_{config_.num_layers, config_.num_kv_heads, config_.head_dim},
        step_rows_(std::max(options.max_step_tokens, kMinStepRows)),
        qkv_width_(static_cast<uint32_t>(config_.q_width() + 2 * config_.kv_width())) {
    const uint32_t group = config_.num_heads / config_.num_kv_heads;
    plan_options_.step_rows = step_rows_;
    plan_options_.tile_rows = std::max<uint32_t>(1, kAttentionTileQueries / group);
    plan_options_.num_heads = config_.num_heads;
    plan_options_.kv_heads = config_.num_kv_heads;
    plan_options_.max_splits = kMaxAttentionSplits;
    plan_options_.target_blocks = 2 * static_cast<uint32_t>(std::max(device_.multiprocessors, 1));
    plan_options_.partial_capacity =
        std::min<uint64_t>(kPartialCapacity, uint64_t{step_rows_} * config_.num_heads * kMaxAttentionSplits);
  }

  ~CudaBackend() override {
    for (auto& [key, graph] : graphs_) cudaGraphExecDestroy(graph.exec);
    if (metadata_ready_ != nullptr) cudaEventDestroy(metadata_ready_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Status prepare(const Model& model) {
    KIPP_RETURN_IF_ERROR(check_shapes());
    KIPP_RETURN_IF_ERROR(cuda_status(cudaSetDevice(device_.index), "cudaSetDevice"));
    // Non-blocking: nothing on the legacy default stream may join a capture (K/V block copies
    // there finish before copy_block returns).
    KIPP_RETURN_IF_ERROR(
        cuda_status(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"));
    KIPP_RETURN_IF_ERROR(
        cuda_status(cudaEventCreateWithFlags(&metadata_ready_, cudaEventDisableTiming), "cudaEventCreate"));
    KIPP_RETURN_IF_ERROR(upload_weights(model));
    KIPP_RETURN_IF_ERROR(allocate_scratch());
    KIPP_RETURN_IF_ERROR(cuda::reserve_attention_shared(plan_options_.tile_rows,
                                                        config_.num_heads / config_.num_kv_heads, config_.head_dim));
    // The weights went up by cudaMemcpy on the legacy stream, whose last DMA may still be in flight
    // when it returns (pageable sources); the backend's non-blocking stream does not wait for it.
    return cuda_status(cudaDeviceSynchronize(), "uploading the weights (cudaDeviceSynchronize)");
  }

  const char* name() const override { return "cuda"; }

  Expected<std::unique_ptr<KvStorage>> create_kv_storage(uint32_t num_blocks) override {
    KIPP_ASSIGN_OR_RETURN(auto storage,
                          cuda::CudaKvStorage::create(num_blocks, layout_.block_elements(), live_kv_bytes_));
    return std::unique_ptr<KvStorage>(std::move(storage));
  }

  void set_activation_observer(ActivationObserver* observer) override { observer_ = observer; }

  BackendMemory memory() const override {
    BackendMemory memory;
    memory.device = device_.name;
    memory.weight_bytes = weight_bytes_;
    memory.kv_bytes = live_kv_bytes_->load();
    memory.scratch_bytes = scratch_bytes_ + metadata_layout_.bytes + matmul_->device_bytes();
    for (const auto& [key, graph] : graphs_) memory.graph_bytes += graph.bytes;
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
      memory.device_free_bytes = free_bytes;
      memory.device_total_bytes = total_bytes;
    }
    return memory;
  }

  Status eval(std::span<const EvalItem> items) override {
    KIPP_RETURN_IF_ERROR(cuda::check_eval_items(items, config_.context_length));
    std::vector<uint64_t> kv_bases(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      auto* storage = static_cast<cuda::CudaKvStorage*>(items[i].kv);
      if (storage == nullptr) continue;  // an item without tokens (check_eval_items) has no rows to run
      KIPP_RETURN_IF_ERROR(storage->take_error());
      kv_bases[i] = storage->device_address();
    }
    for (const StepPlan& plan : cuda::plan_steps(items, plan_options_))
      KIPP_RETURN_IF_ERROR(run_step(items, plan, kv_bases));
    return ok_status();
  }

 private:
  // ---- One step: its metadata uploaded in one copy, then the forward pass, replayed from a
  // captured graph for steps of one tile per item (decode steps of any batch, and single-tile
  // prefills) from the second time their shape runs. The first run of a shape goes outside a
  // graph so that cuBLASLt chooses the algorithms of its products on the host, not in a capture.

  Status run_step(std::span<const EvalItem> items, const StepPlan& plan, const std::vector<uint64_t>& kv_bases) {
    KIPP_RETURN_IF_ERROR(upload_metadata(plan, kv_bases));
    const bool single_pass = plan.logits.size() <= kLogitRowsPerPass;
    if (observer_ == nullptr && single_pass && plan.tiles.size() == plan.items.size() && ran_before(graph_key(plan))) {
      KIPP_ASSIGN_OR_RETURN(cudaGraphExec_t exec, decode_graph(plan));
      KIPP_RETURN_IF_ERROR(cuda_status(cudaGraphLaunch(exec, stream_), "cudaGraphLaunch"));
      return finish_logit_pass(items, plan, 0);
    }
    KIPP_RETURN_IF_ERROR(enqueue_layers(plan));
    for (uint32_t first = 0; first < plan.logits.size(); first += kLogitRowsPerPass) {
      KIPP_RETURN_IF_ERROR(enqueue_logit_pass(plan, first));
      KIPP_RETURN_IF_ERROR(finish_logit_pass(items, plan, first));
    }
    if (plan.logits.empty())
      return cuda_status(cudaStreamSynchronize(stream_), "running a step (cudaStreamSynchronize)");
    return ok_status();
  }

  Status upload_metadata(const StepPlan& plan, const std::vector<uint64_t>& kv_bases) {
    // The pinned copy is rewritten only once the previous step's upload has read it.
    KIPP_RETURN_IF_ERROR(cuda_status(cudaEventSynchronize(metadata_ready_), "waiting for the step metadata upload"));
    if (plan.tables.size() > metadata_layout_.table_capacity)
      KIPP_RETURN_IF_ERROR(allocate_metadata(2 * plan.tables.size()));
    cuda::pack_step_metadata(plan, metadata_layout_, kv_bases, metadata_host_.get());
    KIPP_RETURN_IF_ERROR(
        cuda_status(cudaMemcpyAsync(metadata_device_.get(), metadata_host_.get(), metadata_layout_.used_bytes(plan),
                                    cudaMemcpyHostToDevice, stream_),
                    "uploading the step metadata (cudaMemcpyAsync)"));
    return cuda_status(cudaEventRecord(metadata_ready_, stream_), "cudaEventRecord");
  }

  static GraphKey graph_key(const StepPlan& plan) {
    return {plan.rows(), static_cast<uint32_t>(plan.items.size()), static_cast<uint32_t>(plan.logits.size()),
            max_tile_rows(plan), plan.splits};
  }

  // True when a step of this shape has run before; records it otherwise.
  bool ran_before(const GraphKey& key) {
    if (graphs_.contains(key) || seen_shapes_.contains(key)) return true;
    if (seen_shapes_.size() >= kMaxSeenShapes) seen_shapes_.clear();
    seen_shapes_.insert(key);
    return false;
  }

  // The captured graph of a step of this shape: its layers and its one logit pass.
  Expected<cudaGraphExec_t> decode_graph(const StepPlan& plan) {
    const GraphKey key = graph_key(plan);
    if (auto found = graphs_.find(key); found != graphs_.end()) return found->second.exec;
    if (graphs_.size() >= kMaxGraphs) {
      cudaGraphExecDestroy(graphs_.at(graph_order_.front()).exec);
      graphs_.erase(graph_order_.front());
      graph_order_.pop_front();
    }
    KIPP_RETURN_IF_ERROR(
        cuda_status(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture"));
    Status enqueued = enqueue_layers(plan);
    if (enqueued.ok() && !plan.logits.empty()) enqueued = enqueue_logit_pass(plan, 0);
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
    if (!enqueued.ok() || ended != cudaSuccess) {
      if (graph != nullptr) cudaGraphDestroy(graph);
      cudaGetLastError();  // a failed capture is not sticky: the next step starts clean
      return make_error("capturing a decode step: " +
                        (enqueued.ok() ? cuda_status(ended, "cudaStreamEndCapture").message() : enqueued.message()));
    }
    // cudaGraphExec_t has no size query: the free device memory before and after instantiating
    // and uploading it is the estimate.
    size_t free_before = 0, free_after = 0, total = 0;
    cudaMemGetInfo(&free_before, &total);
    Graph entry;
    const cudaError_t instantiated = cudaGraphInstantiate(&entry.exec, graph, 0);
    cudaGraphDestroy(graph);
    KIPP_RETURN_IF_ERROR(cuda_status(instantiated, "cudaGraphInstantiate"));
    if (Status uploaded = cuda_status(cudaGraphUpload(entry.exec, stream_), "cudaGraphUpload"); !uploaded.ok()) {
      cudaGraphExecDestroy(entry.exec);
      return uploaded.error();
    }
    cudaMemGetInfo(&free_after, &total);
    entry.bytes = free_before > free_after ? free_before - free_after : 0;
    graphs_.emplace(key, entry);
    graph_order_.push_back(key);
    return entry.exec;
  }

  static uint32_t max_tile_rows(const StepPlan& plan) {
    uint32_t rows = 0;
    for (const StepPlan::Tile& tile : plan.tiles) rows = std::max(rows, tile.rows);
    return rows;
  }

  // The step metadata's arrays on the device.
  template <typename T>
  T* metadata(uint64_t offset) const {
    return reinterpret_cast<T*>(metadata_device_.get() + offset);
  }
  cuda::KvPages kv_pages() const {
    const cuda::StepMetadataLayout& m = metadata_layout_;
    cuda::KvPages pages;
    pages.positions = metadata<const uint32_t>(m.positions);
    pages.row_items = metadata<const uint32_t>(m.row_items);
    pages.item_table_offsets = metadata<const uint32_t>(m.item_table_offsets);
    pages.tables = metadata<const uint32_t>(m.tables);
    pages.kv_bases = metadata<const uint64_t>(m.kv_bases);
    pages.layout = layout_;
    return pages;
  }

  // Every layer of the step.
  Status enqueue_layers(const StepPlan& plan) {
    const uint32_t n = plan.rows(), hidden = config_.hidden_size, ffn = config_.ffn_size;
    const uint32_t qw = static_cast<uint32_t>(config_.q_width());
    const auto eps = static_cast<float>(config_.rms_norm_eps);
    KIPP_RETURN_IF_ERROR(
        cuda::embed_rows(embedding_, metadata<const uint32_t>(metadata_layout_.tokens), n, x_, stream_));
    KIPP_RETURN_IF_ERROR(observe("embedding", 0, plan, x_, hidden));
    for (uint32_t l = 0; l < layers_.size(); ++l) {
      const DeviceLayer& layer = layers_[l];
      KIPP_RETURN_IF_ERROR(
          cuda::rms_norm_rows(x_, hidden, nullptr, n, layer.attn_norm, hidden, eps, xn_, hidden, stream_));
      for (size_t i = 0; i < layer.qkv.size(); ++i) {
        const Projection& p = layer.qkv[i];
        const bool prepared =
            i > 0 && kernels::input_format(p.w.type) == kernels::input_format(layer.qkv[i - 1].w.type);
        KIPP_RETURN_IF_ERROR(
            product(xn_, hidden, n, p.w, nullptr, qkv_ + p.out_offset, qkv_width_, Epilogue::Store, prepared));
      }
      KIPP_RETURN_IF_ERROR(qk_rope_store(plan, layer, l));
      KIPP_RETURN_IF_ERROR(attend(plan, l));
      if (observer_ == nullptr) {
        KIPP_RETURN_IF_ERROR(product(attn_, qw, n, layer.o, nullptr, x_, hidden, Epilogue::Accumulate));
      } else {
        KIPP_RETURN_IF_ERROR(product(attn_, qw, n, layer.o, nullptr, proj_, hidden, Epilogue::Store));
        KIPP_RETURN_IF_ERROR(observe("attention", l, plan, proj_, hidden));
        KIPP_RETURN_IF_ERROR(cuda::add_floats(x_, proj_, uint64_t{n} * hidden, stream_));
      }
      KIPP_RETURN_IF_ERROR(
          cuda::rms_norm_rows(x_, hidden, nullptr, n, layer.ffn_norm, hidden, eps, xn_, hidden, stream_));
      KIPP_RETURN_IF_ERROR(product(xn_, hidden, n, layer.gate, &layer.up, act_, ffn, Epilogue::SwiGlu));
      KIPP_RETURN_IF_ERROR(product(act_, ffn, n, layer.down, nullptr, x_, hidden, Epilogue::Accumulate));
      KIPP_RETURN_IF_ERROR(observe("layer_output", l, plan, x_, hidden));
    }
    return ok_status();
  }

  Status qk_rope_store(const StepPlan& plan, const DeviceLayer& layer, uint32_t l) {
    cuda::QkRopeStore args;
    args.qkv = qkv_;
    args.qkv_stride = qkv_width_;
    args.rows = plan.rows();
    args.q_norm = layer.q_norm;
    args.k_norm = layer.k_norm;
    args.rope = rope_;
    args.num_heads = config_.num_heads;
    args.kv_heads = config_.num_kv_heads;
    args.head_dim = config_.head_dim;
    args.layer = l;
    args.eps = static_cast<float>(config_.rms_norm_eps);
    args.pages = kv_pages();
    return cuda::qk_norm_rope_store(args, stream_);
  }

  Status attend(const StepPlan& plan, uint32_t l) {
    const cuda::StepMetadataLayout& m = metadata_layout_;
    cuda::AttentionArgs args;
    args.q = qkv_;
    args.q_stride = qkv_width_;
    args.out = attn_;
    args.out_stride = static_cast<uint32_t>(config_.q_width());
    args.rows = plan.rows();
    args.tiles = static_cast<uint32_t>(plan.tiles.size());
    args.tile_first_rows = metadata<const uint32_t>(m.tile_first_rows);
    args.tile_rows = metadata<const uint32_t>(m.tile_rows);
    args.tile_items = metadata<const uint32_t>(m.tile_items);
    args.max_tile_rows = max_tile_rows(plan);
    args.num_heads = config_.num_heads;
    args.kv_heads = config_.num_kv_heads;
    args.head_dim = config_.head_dim;
    args.layer = l;
    args.splits = plan.splits;
    args.scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim));
    args.pages = kv_pages();
    args.partials = partials_;
    return cuda::attention(args, stream_);
  }

  // The final norm of logit rows [first, first + kLogitRowsPerPass) of the step, the output
  // head, and the logits' copy into the pinned staging rows.
  Status enqueue_logit_pass(const StepPlan& plan, uint32_t first) {
    const uint32_t count = std::min<uint32_t>(kLogitRowsPerPass, static_cast<uint32_t>(plan.logits.size()) - first);
    const uint32_t hidden = config_.hidden_size;
    KIPP_RETURN_IF_ERROR(cuda::rms_norm_rows(x_, hidden, metadata<const uint32_t>(metadata_layout_.logit_rows) + first,
                                             count, output_norm_, hidden, static_cast<float>(config_.rms_norm_eps),
                                             logit_inputs_, hidden, stream_));
    if (observer_ != nullptr) {
      std::vector<float> values(size_t{count} * hidden);
      KIPP_RETURN_IF_ERROR(copy_to_host(values.data(), logit_inputs_, values.size()));
      for (uint32_t i = 0; i < count; ++i) {
        const StepPlan::Logit& logit = plan.logits[first + i];
        observer_->on_activation("final_norm", 0, logit.eval_item, plan.positions[logit.row],
                                 std::span<const float>(values.data() + size_t{i} * hidden, hidden));
      }
    }
    KIPP_RETURN_IF_ERROR(
        product(logit_inputs_, hidden, count, head_, nullptr, logits_, config_.vocab_size, Epilogue::Store));
    return cuda_status(
        cudaMemcpyAsync(logits_host_.get(), logits_, uint64_t{count} * config_.vocab_size * sizeof(float),
                        cudaMemcpyDeviceToHost, stream_),
        "copying logits to the host (cudaMemcpyAsync)");
  }

  // Waits for a pass and copies its logits from the staging rows to the items' buffers.
  Status finish_logit_pass(std::span<const EvalItem> items, const StepPlan& plan, uint32_t first) {
    KIPP_RETURN_IF_ERROR(cuda_status(cudaStreamSynchronize(stream_), "running a step (cudaStreamSynchronize)"));
    const uint32_t count = std::min<uint32_t>(kLogitRowsPerPass, static_cast<uint32_t>(plan.logits.size()) - first);
    const size_t vocab = config_.vocab_size;
    const auto* staged = reinterpret_cast<const float*>(logits_host_.get());
    for (uint32_t i = 0; i < count; ++i) {
      const StepPlan::Logit& logit = plan.logits[first + i];
      std::memcpy(items[logit.eval_item].logits + size_t{logit.logit_row} * vocab, staged + size_t{i} * vocab,
                  vocab * sizeof(float));
    }
    return ok_status();
  }

  // out per `epilogue` from the product of w (and up) with rows of x, prepared first unless
  // `prepared` says the previous product left these rows in this format.
  Status product(const float* x, uint32_t x_stride, uint32_t rows, const DeviceMatrix& w, const DeviceMatrix* up,
                 float* out, uint32_t out_stride, Epilogue epilogue, bool prepared = false) {
    if (rows == 0) return ok_status();
    const DeviceInput in = cuda::device_input_layout(kernels::input_format(w.type), rows, w.cols, prepared_);
    if (!prepared) {
      cuda::prepare_input(x, x_stride, in, stream_);
      KIPP_RETURN_IF_ERROR(cuda::last_launch_status("preparing a product's input"));
    }
    return cuda::matmul(*matmul_, w, up, in, out, out_stride, epilogue, stream_);
  }

  // The observer's slow path: the rows' values copied back now.
  Status observe(std::string_view name, uint32_t layer, const StepPlan& plan, const float* values, uint32_t width) {
    if (observer_ == nullptr) return ok_status();
    std::vector<float> host(size_t{plan.rows()} * width);
    KIPP_RETURN_IF_ERROR(copy_to_host(host.data(), values, host.size()));
    for (uint32_t r = 0; r < plan.rows(); ++r)
      observer_->on_activation(name, layer, plan.items[plan.row_items[r]].eval_item, plan.positions[r],
                               std::span<const float>(host.data() + size_t{r} * width, width));
    return ok_status();
  }

  Status copy_to_host(float* host, const float* device, size_t count) {
    KIPP_RETURN_IF_ERROR(
        cuda_status(cudaMemcpyAsync(host, device, count * sizeof(float), cudaMemcpyDeviceToHost, stream_),
                    "copying activations to the host (cudaMemcpyAsync)"));
    return cuda_status(cudaStreamSynchronize(stream_), "copying activations to the host (cudaStreamSynchronize)");
  }

  // ---- Preparation at load.

  Status check_shapes() const {
    if (config_.head_dim % 64 != 0 || config_.head_dim > 256)
      return make_error("the cuda backend needs a head size that is a multiple of 64, at most 256 (the model has " +
                        std::to_string(config_.head_dim) + ")");
    if (config_.num_kv_heads == 0 || config_.num_heads % config_.num_kv_heads != 0)
      return make_error("the cuda backend needs the query heads to be a multiple of the kv heads");
    return ok_status();
  }

  // Every weight in one device buffer: the projections as the GGUF stores them, norms as FP32,
  // the RoPE table; q, k and v one after another so one product serves them when they share a
  // type; a tied head shares the embedding.
  Status upload_weights(const Model& model) {
    const Qwen3Weights& weights = model.weights();
    std::vector<Upload> uploads;
    std::vector<std::vector<float>> host_vectors;  // norms as FP32, and the RoPE table
    uint64_t total = 0;
    const auto place = [&](const void* source, uint64_t bytes) {
      uploads.push_back(Upload{source, bytes, total});
      const uint64_t offset = total;
      total += align_up(bytes);
      return offset;
    };
    // Offsets first (the buffer does not exist yet); pointers are fixed up after allocation.
    struct Pending {
      DeviceMatrix* matrix;
      const float** vector;
      uint64_t offset;
    };
    std::vector<Pending> pending;
    const auto matrix = [&](const TensorView& view, bool product, DeviceMatrix& out) -> Status {
      const kernels::WeightMatrix w = kernels::make_weight_matrix(view.type, view.data, view.rows, view.cols);
      const bool supported = view.type == GgmlType::BF16 || view.type == GgmlType::Q8_0 ||
                             view.type == GgmlType::Q4_1 ||
                             (!product && (view.type == GgmlType::F32 || view.type == GgmlType::F16));
      if (w.row_bytes == 0 || !supported)
        return make_error("tensor " + std::string(view.name) + ": element type " +
                          std::string(ggml_type_name(view.type)) + " is not supported by the cuda backend");
      out = DeviceMatrix{view.type, nullptr, static_cast<uint32_t>(view.rows), static_cast<uint32_t>(view.cols),
                         w.row_bytes};
      pending.push_back(Pending{&out, nullptr, place(view.data, view.rows * w.row_bytes)});
      return ok_status();
    };
    const auto vector = [&](const TensorView& view, const float*& out) -> Status {
      const kernels::WeightMatrix w = kernels::make_weight_matrix(view.type, view.data, view.rows, view.cols);
      if (w.row_bytes == 0)
        return make_error("tensor " + std::string(view.name) + ": element type " +
                          std::string(ggml_type_name(view.type)) + " is not supported by the cuda backend");
      std::vector<float>& values = host_vectors.emplace_back(view.rows * view.cols);
      for (size_t r = 0; r < w.rows; ++r) kernels::ref::dequantize_row(w, r, values.data() + r * w.cols);
      pending.push_back(Pending{nullptr, &out, place(values.data(), values.size() * sizeof(float))});
      return ok_status();
    };
    const bool tied = weights.output.data == weights.token_embedding.data &&
                      weights.output.type == weights.token_embedding.type &&
                      weights.output.rows == weights.token_embedding.rows;
    KIPP_RETURN_IF_ERROR(matrix(weights.token_embedding, tied, embedding_));
    if (tied) {
      head_ = embedding_;
    } else {
      KIPP_RETURN_IF_ERROR(matrix(weights.output, true, head_));
    }
    std::vector<DeviceMatrix> separate_qkv(3 * weights.layers.size());
    layers_.resize(weights.layers.size());
    KIPP_RETURN_IF_ERROR(vector(weights.output_norm, output_norm_));
    for (size_t l = 0; l < weights.layers.size(); ++l) {
      const LayerWeights& lw = weights.layers[l];
      DeviceLayer& layer = layers_[l];
      DeviceMatrix* qkv = &separate_qkv[3 * l];
      KIPP_RETURN_IF_ERROR(matrix(lw.attn_q, true, qkv[0]));
      KIPP_RETURN_IF_ERROR(matrix(lw.attn_k, true, qkv[1]));
      KIPP_RETURN_IF_ERROR(matrix(lw.attn_v, true, qkv[2]));
      // Consecutive uploads of one type and width: one matrix of all their rows (the three
      // uploads' rows are contiguous only if each ends on the alignment; else three products).
      const bool fused = qkv[1].type == qkv[0].type && qkv[2].type == qkv[0].type &&
                         qkv[0].rows * qkv[0].row_bytes % kAlign == 0 && qkv[1].rows * qkv[1].row_bytes % kAlign == 0;
      if (fused) {
        layer.qkv.push_back(Projection{
            DeviceMatrix{qkv[0].type, nullptr, qkv[0].rows + qkv[1].rows + qkv[2].rows, qkv[0].cols, qkv[0].row_bytes},
            0});
      } else {
        const uint32_t qw = static_cast<uint32_t>(config_.q_width()), kvw = static_cast<uint32_t>(config_.kv_width());
        layer.qkv = {Projection{qkv[0], 0}, Projection{qkv[1], qw}, Projection{qkv[2], qw + kvw}};
      }
      KIPP_RETURN_IF_ERROR(matrix(lw.attn_output, true, layer.o));
      KIPP_RETURN_IF_ERROR(matrix(lw.ffn_gate, true, layer.gate));
      KIPP_RETURN_IF_ERROR(matrix(lw.ffn_up, true, layer.up));
      KIPP_RETURN_IF_ERROR(matrix(lw.ffn_down, true, layer.down));
      if (layer.gate.type != layer.up.type)
        return make_error("the cuda backend needs ffn_gate and ffn_up of one element type (layer " + std::to_string(l) +
                          ")");
      KIPP_RETURN_IF_ERROR(vector(lw.attn_norm, layer.attn_norm));
      KIPP_RETURN_IF_ERROR(vector(lw.ffn_norm, layer.ffn_norm));
      KIPP_RETURN_IF_ERROR(vector(lw.attn_q_norm, layer.q_norm));
      KIPP_RETURN_IF_ERROR(vector(lw.attn_k_norm, layer.k_norm));
    }
    const std::vector<float>& rope =
        host_vectors.emplace_back(cuda::rope_table(config_.context_length, config_.head_dim, config_.rope_theta));
    const uint64_t rope_offset = place(rope.data(), rope.size() * sizeof(float));

    // The whole model must fit with its scratch; say so once rather than fail mid-way.
    const uint64_t scratch = scratch_plan();
    size_t free_bytes = 0, total_bytes = 0;
    KIPP_RETURN_IF_ERROR(cuda_status(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo"));
    const auto too_big = [&] {
      return make_error("the model needs " + gib(total + scratch) + " GiB of GPU memory, " + gib(free_bytes) +
                        " GiB free");
    };
    if (total + scratch > free_bytes) return too_big();
    void* buffer = nullptr;
    if (cudaMalloc(&buffer, total) != cudaSuccess) {
      cudaGetLastError();
      return too_big();
    }
    weights_.reset(static_cast<uint8_t*>(buffer));
    weight_bytes_ = total;
    for (const Upload& upload : uploads)
      KIPP_RETURN_IF_ERROR(
          cuda_status(cudaMemcpy(weights_.get() + upload.offset, upload.source, upload.bytes, cudaMemcpyHostToDevice),
                      "uploading the weights (cudaMemcpy)"));
    for (const Pending& p : pending) {
      if (p.matrix != nullptr) p.matrix->data = weights_.get() + p.offset;
      if (p.vector != nullptr) *p.vector = reinterpret_cast<const float*>(weights_.get() + p.offset);
    }
    if (tied) head_.data = embedding_.data;
    for (size_t l = 0; l < layers_.size(); ++l)
      for (size_t i = 0; i < layers_[l].qkv.size(); ++i) layers_[l].qkv[i].w.data = separate_qkv[3 * l + i].data;
    rope_ = reinterpret_cast<const float*>(weights_.get() + rope_offset);
    return ok_status();
  }

  // ---- Scratch: fixed device buffers for a step of step_rows_ rows.

  struct ScratchPart {
    float** target;
    uint64_t floats;
  };
  std::vector<ScratchPart> scratch_parts() {
    const uint64_t s = step_rows_, hidden = config_.hidden_size;
    return {{&x_, s * hidden},
            {&xn_, s * hidden},
            {&proj_, s * hidden},
            {&qkv_, s * qkv_width_},
            {&attn_, s * config_.q_width()},
            {&act_, s * config_.ffn_size},
            {&partials_, plan_options_.partial_capacity * (config_.head_dim + 2)},
            {&logit_inputs_, uint64_t{kLogitRowsPerPass} * hidden},
            {&logits_, uint64_t{kLogitRowsPerPass} * config_.vocab_size}};
  }

  // The largest prepared input any product of a step needs.
  uint64_t prepared_bytes() const {
    uint64_t bytes = 0;
    const auto grow = [&](const DeviceMatrix& w, uint32_t rows) {
      bytes = std::max<uint64_t>(bytes, cuda::device_input_bytes(kernels::input_format(w.type), rows, w.cols));
    };
    for (const DeviceLayer& layer : layers_) {
      for (const Projection& p : layer.qkv) grow(p.w, step_rows_);
      for (const DeviceMatrix* w : {&layer.o, &layer.gate, &layer.down}) grow(*w, step_rows_);
    }
    grow(head_, kLogitRowsPerPass);
    return bytes;
  }

  // Device bytes of the scratch (counted before the weights are allocated).
  uint64_t scratch_plan() {
    uint64_t bytes = align_up(prepared_bytes());
    for (const ScratchPart& part : scratch_parts()) bytes += align_up(part.floats * sizeof(float));
    return bytes;
  }

  Status allocate_scratch() {
    uint32_t max_outputs = std::max({qkv_width_, config_.hidden_size, config_.ffn_size, config_.vocab_size});
    KIPP_ASSIGN_OR_RETURN(matmul_, cuda::create_matmul_context(step_rows_, max_outputs, config_.ffn_size));
    const std::vector<ScratchPart> parts = scratch_parts();
    scratch_bytes_ = scratch_plan();
    KIPP_ASSIGN_OR_RETURN(scratch_, device_alloc(scratch_bytes_, "the activation scratch"));
    uint8_t* next = scratch_.get();
    prepared_ = next;
    next += align_up(prepared_bytes());
    for (const ScratchPart& part : parts) {
      *part.target = reinterpret_cast<float*>(next);
      next += align_up(part.floats * sizeof(float));
    }
    KIPP_ASSIGN_OR_RETURN(logits_host_,
                          pinned_alloc(uint64_t{kLogitRowsPerPass} * config_.vocab_size * sizeof(float), "logits"));
    // Block tables for every row's item reaching a few thousand positions; more grows it.
    return allocate_metadata(uint64_t{step_rows_} * 128);
  }

  // (Re)allocates the step metadata buffers; captured graphs read the old addresses, so they go.
  Status allocate_metadata(uint64_t table_capacity) {
    KIPP_RETURN_IF_ERROR(cuda_status(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"));
    for (auto& [key, graph] : graphs_) cudaGraphExecDestroy(graph.exec);
    graphs_.clear();
    graph_order_.clear();
    metadata_layout_ = cuda::StepMetadataLayout::make(step_rows_, table_capacity);
    metadata_device_.reset();
    metadata_host_.reset();
    KIPP_ASSIGN_OR_RETURN(metadata_device_, device_alloc(metadata_layout_.bytes, "the step metadata"));
    KIPP_ASSIGN_OR_RETURN(metadata_host_, pinned_alloc(metadata_layout_.bytes, "the step metadata"));
    return ok_status();
  }

  ModelConfig config_;
  CudaDeviceInfo device_;
  KvBlockLayout layout_;
  uint32_t step_rows_;
  uint32_t qkv_width_;
  cuda::StepPlanOptions plan_options_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t metadata_ready_ = nullptr;
  std::unique_ptr<cuda::MatmulContext> matmul_;

  DeviceBuffer weights_;
  uint64_t weight_bytes_ = 0;
  DeviceMatrix embedding_, head_;
  std::vector<DeviceLayer> layers_;
  const float* output_norm_ = nullptr;
  const float* rope_ = nullptr;

  DeviceBuffer scratch_;
  uint64_t scratch_bytes_ = 0;
  float *x_ = nullptr, *xn_ = nullptr, *proj_ = nullptr, *qkv_ = nullptr, *attn_ = nullptr, *act_ = nullptr,
        *partials_ = nullptr, *logit_inputs_ = nullptr, *logits_ = nullptr;
  uint8_t* prepared_ = nullptr;
  PinnedBuffer logits_host_;

  cuda::StepMetadataLayout metadata_layout_;
  DeviceBuffer metadata_device_;
  PinnedBuffer metadata_host_;

  std::map<GraphKey, Graph> graphs_;
  std::deque<GraphKey> graph_order_;
  std::set<GraphKey> seen_shapes_;
  std::shared_ptr<std::atomic<uint64_t>> live_kv_bytes_ = std::make_shared<std::atomic<uint64_t>>(0);
  ActivationObserver* observer_ = nullptr;
};

}  // namespace

Expected<std::unique_ptr<Backend>> create_cuda_backend(const Model& model, const BackendOptions& options) {
  KIPP_ASSIGN_OR_RETURN(CudaDeviceInfo device, cuda_device_info());
  auto backend = std::make_unique<CudaBackend>(model, options, std::move(device));
  KIPP_RETURN_IF_ERROR(backend->prepare(model));
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace kipp
