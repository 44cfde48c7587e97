// The CUDA backend's K/V cache: device blocks in the layout every backend shares
// (kernels/kv_block_layout.h), so a block table means the same as on the CPU.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "backend/backend.h"

namespace kipp::cuda {

class CudaKvStorage final : public KvStorage {
 public:
  // `live_bytes` counts the bytes of every storage alive (the backend's memory report); it may
  // outlive the backend.
  static Expected<std::unique_ptr<CudaKvStorage>> create(uint32_t num_blocks, uint64_t block_elements,
                                                         std::shared_ptr<std::atomic<uint64_t>> live_bytes);
  ~CudaKvStorage() override;
  CudaKvStorage(const CudaKvStorage&) = delete;
  CudaKvStorage& operator=(const CudaKvStorage&) = delete;

  uint32_t num_blocks() const override { return num_blocks_; }
  uint64_t bytes() const override { return uint64_t{num_blocks_} * block_elements_ * sizeof(uint16_t); }
  // A device-to-device copy, complete when it returns (the backend's stream does not wait for
  // other streams); a failure is kept and reported by the next eval that uses this storage.
  void copy_block(uint32_t from, uint32_t to) override;
  uint64_t device_address() const { return reinterpret_cast<uint64_t>(data_); }
  // The first copy_block failure since the last call, or ok.
  Status take_error();

 private:
  CudaKvStorage(uint32_t num_blocks, uint64_t block_elements, uint16_t* data,
                std::shared_ptr<std::atomic<uint64_t>> live_bytes);
  uint32_t num_blocks_;
  uint64_t block_elements_;
  uint16_t* data_;
  std::shared_ptr<std::atomic<uint64_t>> live_bytes_;
  Status error_;
};

}  // namespace kipp::cuda
