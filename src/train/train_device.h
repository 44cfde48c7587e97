// Where the training step runs (`train.device`, `kipp train --device`), and whether a config can
// run there. The GPU itself is probed by the caller (the CLI), which may see the CUDA backend;
// this layer only judges what it found, so every rule is testable without a GPU.
#pragma once

#include <string_view>

#include "core/status.h"

namespace kipp::train {

struct TrainConfig;

enum class TrainDevice { Cpu, Cuda };

// "cpu" / "cuda" (the `train.device` values).
std::string_view device_name(TrainDevice device);
Expected<TrainDevice> parse_device(std::string_view name);

// What the caller found out about the GPU: whether this Kipp has the CUDA trainer built in and,
// when it has, the device probe's answer (its message says why there is no usable GPU).
struct GpuProbe {
  bool built = false;
  Status usable;
};

// Ok when `config` can train on its device with `processes` data-parallel ranks; otherwise one
// error naming what stands in the way (the build, the GPU, or the keys the GPU step lacks).
Status check_train_device(const TrainConfig& config, int processes, const GpuProbe& gpu);

// The error for a cuda run started without the GPU model (TrainRun::device_model).
Error cuda_step_unavailable();

}  // namespace kipp::train
