// The backend contract. The runtime (core) owns parsing, tokenization, sampling, session
// lifecycle, block tables and errors; a backend owns prepared weights, activation scratch, K/V
// storage and execution. No device type crosses this boundary.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"
#include "model/model.h"

namespace kipp {

inline constexpr uint32_t kKvBlockPositions = 32;

// Storage for `num_blocks` K/V blocks of 32 positions each (every layer's K and V, BF16).
// Which block holds which positions is the caller's block table; the storage only addresses.
class KvStorage {
 public:
  virtual ~KvStorage() = default;
  virtual uint32_t num_blocks() const = 0;
  virtual uint64_t bytes() const = 0;
  virtual void copy_block(uint32_t from, uint32_t to) = 0;
};

// One sequence's work in an eval step: append `tokens` at positions [start, start + size) of
// the sequence whose logical block b lives in physical block block_table[b] of `kv`, and write
// the logits of the last `logits_count` of those positions, row by row, into `logits`.
struct EvalItem {
  KvStorage* kv = nullptr;
  std::span<const uint32_t> block_table;  // covers at least start + tokens.size() positions
  uint32_t start = 0;
  std::span<const uint32_t> tokens;
  uint32_t logits_count = 0;
  float* logits = nullptr;  // logits_count * vocab floats
};

// Sees activations as they are computed, for tests against a reference implementation:
// "embedding", per layer "attention" (the output projection, before the residual add) and
// "layer_output" (the residual stream after the layer), and "final_norm" (rows with logits).
class ActivationObserver {
 public:
  virtual ~ActivationObserver() = default;
  virtual void on_activation(std::string_view name, uint32_t layer, size_t item, uint32_t position,
                             std::span<const float> values) = 0;
};

enum class BackendKind { Cpu, Cuda };

struct BackendOptions {
  // Token rows processed together per step: the size of the activation scratch. Longer evals
  // run as several steps; the results do not depend on it.
  uint32_t max_step_tokens = 128;
  // Threads that split each matrix product by output rows; 0: one per hardware thread. The
  // results do not depend on it.
  uint32_t threads = 0;
  // The CPU kernel table by name (kernels/cpu/kernels.h); empty: the fastest this CPU runs.
  // A test hook: the reference and the SIMD kernels must agree.
  std::string kernels = {};
};

// Bytes a backend holds, by purpose. On the CPU backend everything lives in host memory and the
// device fields stay empty; on a GPU these are device (VRAM) bytes.
struct BackendMemory {
  std::string device;               // "cpu", or the GPU's name
  uint64_t weight_bytes = 0;        // weights the backend keeps itself (device copies, packed panels)
  uint64_t kv_bytes = 0;            // live K/V storage made by create_kv_storage
  uint64_t scratch_bytes = 0;       // activation scratch, allocated at creation
  uint64_t graph_bytes = 0;         // captured GPU graphs
  uint64_t device_free_bytes = 0;   // the device's free memory now (0 on the CPU)
  uint64_t device_total_bytes = 0;  // the device's capacity (0 on the CPU)
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  virtual Expected<std::unique_ptr<KvStorage>> create_kv_storage(uint32_t num_blocks) = 0;
  // Items must be valid (the runtime checks ids, capacity and tables) and name distinct
  // sequences. Each weight is read once per step for all items together.
  virtual Status eval(std::span<const EvalItem> items) = 0;
  // Null (the default) turns observation off.
  virtual void set_activation_observer(ActivationObserver* observer) = 0;
  // What the backend holds now, and where.
  virtual BackendMemory memory() const = 0;
};

std::string_view backend_name(BackendKind kind);
// `model` must outlive the backend: its weights are used in place.
Expected<std::unique_ptr<Backend>> create_backend(BackendKind kind, const Model& model,
                                                  const BackendOptions& options = {});

}  // namespace kipp
