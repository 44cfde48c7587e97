#include "kernels/cuda/train_embedding_plan.h"

#include <algorithm>
#include <numeric>
#include <string>

namespace kipp::cuda::train {

Expected<EmbeddingGradPlan> plan_embedding_grad(std::span<const int32_t> ids, uint32_t vocab) {
  for (size_t row = 0; row < ids.size(); ++row) {
    if (ids[row] < 0 || uint32_t(ids[row]) >= vocab) {
      return make_error("token id " + std::to_string(ids[row]) + " at row " + std::to_string(row) +
                        " is outside the vocabulary of " + std::to_string(vocab));
    }
  }
  std::vector<uint32_t> order(ids.size());
  std::iota(order.begin(), order.end(), 0u);
  // Stable: rows of one id keep their order.
  std::stable_sort(order.begin(), order.end(), [&ids](uint32_t a, uint32_t b) { return ids[a] < ids[b]; });
  EmbeddingGradPlan plan;
  plan.rows = std::move(order);
  for (size_t i = 0; i < plan.rows.size(); ++i) {
    const int32_t id = ids[plan.rows[i]];
    if (plan.ids.empty() || plan.ids.back() != id) {
      plan.ids.push_back(id);
      plan.starts.push_back(uint32_t(i));
    }
  }
  plan.starts.push_back(uint32_t(plan.rows.size()));
  return plan;
}

}  // namespace kipp::cuda::train
