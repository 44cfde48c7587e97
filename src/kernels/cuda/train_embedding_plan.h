// The order the embedding gradient is summed in on the GPU: rows grouped by token id, each
// group in row order, so one block per id adds its rows one after another (no float atomics)
// and every column of the table gets exactly the CPU trainer's sum, dtable[id] += dx[row] in
// row order.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"

namespace kipp::cuda::train {

struct EmbeddingGradPlan {
  std::vector<int32_t> ids;      // the distinct ids, ascending
  std::vector<uint32_t> starts;  // ids.size() + 1 offsets into rows
  std::vector<uint32_t> rows;    // the rows of ids[i] at [starts[i], starts[i + 1]), ascending
};

// An error names the first id outside [0, vocab).
Expected<EmbeddingGradPlan> plan_embedding_grad(std::span<const int32_t> ids, uint32_t vocab);

}  // namespace kipp::cuda::train
