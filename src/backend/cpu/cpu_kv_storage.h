// The CPU backend's K/V cache: blocks of kKvBlockPositions positions of one sequence, as BF16,
// and where in a block each layer's and head's K and V lie.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "kernels/weights.h"

namespace kipp {

static_assert(kernels::kKvBlockPositions == kipp::kKvBlockPositions);

// A block holds, per layer, the K of all kv heads and then their V; each head's positions lie
// together, so one head's attention reads its K and V in order, a stream the hardware prefetchers
// follow (bench/attention_bench compares arrangements).
struct KvBlockLayout {
  size_t layers;
  size_t kv_heads;
  size_t head_dim;

  // One head's K (or V) for all positions of a block.
  size_t head_elements() const { return kKvBlockPositions * head_dim; }
  size_t layer_elements() const { return 2 * kv_heads * head_elements(); }
  size_t block_elements() const { return layers * layer_elements(); }
  // Offsets in a block of the first position of a layer's head.
  size_t k(size_t layer, size_t head) const { return layer * layer_elements() + head * head_elements(); }
  size_t v(size_t layer, size_t head) const { return k(layer, head) + kv_heads * head_elements(); }
  // The sequence's block that holds a position, and the position's offset within a head's rows.
  static size_t block_of(uint32_t position) { return position / kKvBlockPositions; }
  size_t slot(uint32_t position) const { return (position % kKvBlockPositions) * head_dim; }
};

class CpuKvStorage final : public KvStorage {
 public:
  // `live_bytes` counts the bytes of every storage alive (the backend's memory report); it may
  // outlive the backend.
  CpuKvStorage(uint32_t num_blocks, size_t block_elements, std::shared_ptr<std::atomic<uint64_t>> live_bytes)
      : num_blocks_(num_blocks),
        block_elements_(block_elements),
        // Not value-initialized: every position is written before it is read, and untouched
        // pages of a large session or pool stay uncommitted until used.
        data_(std::make_unique_for_overwrite<uint16_t[]>(num_blocks * block_elements)),
        live_bytes_(std::move(live_bytes)) {
    *live_bytes_ += bytes();
  }
  ~CpuKvStorage() override { *live_bytes_ -= bytes(); }
  CpuKvStorage(const CpuKvStorage&) = delete;
  CpuKvStorage& operator=(const CpuKvStorage&) = delete;
  uint32_t num_blocks() const override { return num_blocks_; }
  uint64_t bytes() const override { return uint64_t{num_blocks_} * block_elements_ * sizeof(uint16_t); }
  void copy_block(uint32_t from, uint32_t to) override { std::copy_n(block(from), block_elements_, block(to)); }
  uint16_t* block(uint32_t index) { return data_.get() + size_t{index} * block_elements_; }

 private:
  uint32_t num_blocks_;
  size_t block_elements_;
  std::unique_ptr<uint16_t[]> data_;
  std::shared_ptr<std::atomic<uint64_t>> live_bytes_;
};

}  // namespace kipp
