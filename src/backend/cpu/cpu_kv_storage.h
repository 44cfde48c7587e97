// The CPU backend's K/V cache: blocks of kKvBlockPositions positions of one sequence, as BF16,
// arranged as kernels/kv_block_layout.h says.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "kernels/kv_block_layout.h"
#include "kernels/weights.h"

namespace kipp {

static_assert(kernels::kKvBlockPositions == kipp::kKvBlockPositions);

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
