#include "train/cuda/decay_runs.h"

namespace kipp::train::cuda {

std::vector<kipp::cuda::train::DecayRun> decay_runs(std::span<const AdamW::DecayRange> ranges) {
  std::vector<kipp::cuda::train::DecayRun> runs;
  for (const AdamW::DecayRange& range : ranges) {
    if (range.count == 0) continue;
    const uint32_t decays = range.decays ? 1u : 0u;
    if (!runs.empty() && runs.back().decays == decays && runs.back().offset + runs.back().count == range.offset) {
      runs.back().count += range.count;
    } else {
      runs.push_back({range.offset, range.count, decays});
    }
  }
  return runs;
}

}  // namespace kipp::train::cuda
