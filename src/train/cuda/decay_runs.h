// The AdamW tensors' weight-decay rule as the GPU update reads it: adjacent tensors with the
// same rule merged into one run, so one launch covers the whole buffer with few runs.
#pragma once

#include <span>
#include <vector>

#include "kernels/cuda/train_kernels.h"
#include "train/adamw.h"

namespace kipp::train::cuda {

std::vector<kipp::cuda::train::DecayRun> decay_runs(std::span<const AdamW::DecayRange> ranges);

}  // namespace kipp::train::cuda
