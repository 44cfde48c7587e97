#include "backend/cuda/cuda_kv_storage.h"

#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/launch_status.h"

namespace kipp::cuda {

Expected<std::unique_ptr<CudaKvStorage>> CudaKvStorage::create(uint32_t num_blocks, uint64_t block_elements,
                                                               std::shared_ptr<std::atomic<uint64_t>> live_bytes) {
  void* data = nullptr;
  const uint64_t bytes = uint64_t{num_blocks} * block_elements * sizeof(uint16_t);
  if (bytes > 0) {
    if (const cudaError_t e = cudaMalloc(&data, bytes); e != cudaSuccess) {
      cudaGetLastError();  // not sticky: clear it so later launches do not report it
      size_t free_bytes = 0, total_bytes = 0;
      cudaMemGetInfo(&free_bytes, &total_bytes);
      return make_error("the K/V cache needs " + std::to_string(bytes >> 20) + " MiB of GPU memory, " +
                        std::to_string(free_bytes >> 20) + " MiB free (" + cudaGetErrorString(e) + ")");
    }
  }
  return std::unique_ptr<CudaKvStorage>(
      new CudaKvStorage(num_blocks, block_elements, static_cast<uint16_t*>(data), std::move(live_bytes)));
}

CudaKvStorage::CudaKvStorage(uint32_t num_blocks, uint64_t block_elements, uint16_t* data,
                             std::shared_ptr<std::atomic<uint64_t>> live_bytes)
    : num_blocks_(num_blocks), block_elements_(block_elements), data_(data), live_bytes_(std::move(live_bytes)) {
  *live_bytes_ += bytes();
}

CudaKvStorage::~CudaKvStorage() {
  *live_bytes_ -= bytes();
  if (data_ != nullptr) cudaFree(data_);
}

void CudaKvStorage::copy_block(uint32_t from, uint32_t to) {
  if (from >= num_blocks_ || to >= num_blocks_) {
    if (error_.ok())
      error_ = make_error("copying K/V block " + std::to_string(from) + " to " + std::to_string(to) +
                          " of a storage of " + std::to_string(num_blocks_) + " blocks");
    return;
  }
  const uint64_t block_bytes = block_elements_ * sizeof(uint16_t);
  Status copied = cuda_status(
      cudaMemcpy(data_ + to * block_elements_, data_ + from * block_elements_, block_bytes, cudaMemcpyDeviceToDevice),
      "copying a K/V block (cudaMemcpy)");
  // A device-to-device cudaMemcpy may return before the copy is done; the backend's stream does
  // not wait for the legacy default stream, so the copy must be complete here.
  if (copied.ok())
    copied = cuda_status(cudaStreamSynchronize(cudaStreamLegacy), "copying a K/V block (cudaStreamSynchronize)");
  if (error_.ok() && !copied.ok()) error_ = std::move(copied);
}

Status CudaKvStorage::take_error() {
  Status error = std::move(error_);
  error_ = ok_status();
  return error;
}

}  // namespace kipp::cuda
