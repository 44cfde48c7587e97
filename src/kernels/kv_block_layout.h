// Where in a K/V block each layer's and head's K and V lie: one arrangement for every backend,
// so a block means the same on the CPU and on a GPU. Usable in device code (no library calls).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/weights.h"

#if defined(__CUDACC__)
#define KIPP_HOST_DEVICE __host__ __device__
#else
#define KIPP_HOST_DEVICE
#endif

namespace kipp {

// A block holds, per layer, the K of all kv heads and then their V; each head's positions lie
// together, so one head's attention reads its K and V in order, a stream the hardware prefetchers
// follow (bench/attention_bench compares arrangements).
struct KvBlockLayout {
  size_t layers;
  size_t kv_heads;
  size_t head_dim;

  // One head's K (or V) for all positions of a block.
  KIPP_HOST_DEVICE size_t head_elements() const { return kernels::kKvBlockPositions * head_dim; }
  KIPP_HOST_DEVICE size_t layer_elements() const { return 2 * kv_heads * head_elements(); }
  KIPP_HOST_DEVICE size_t block_elements() const { return layers * layer_elements(); }
  // Offsets in a block of the first position of a layer's head.
  KIPP_HOST_DEVICE size_t k(size_t layer, size_t head) const {
    return layer * layer_elements() + head * head_elements();
  }
  KIPP_HOST_DEVICE size_t v(size_t layer, size_t head) const { return k(layer, head) + kv_heads * head_elements(); }
  // The sequence's block that holds a position, and the position's offset within a head's rows.
  KIPP_HOST_DEVICE static size_t block_of(uint32_t position) { return position / kernels::kKvBlockPositions; }
  KIPP_HOST_DEVICE size_t slot(uint32_t position) const { return (position % kernels::kKvBlockPositions) * head_dim; }
};

}  // namespace kipp
