// The CUDA backend: the Qwen3 forward pass on an NVIDIA GPU with the weights resident in device
// memory, the paged K/V cache in device blocks, and decode steps replayed as CUDA graphs. Its
// header names no CUDA type; only backend/cuda and kernels/cuda see the CUDA headers.
#pragma once

#include <memory>

#include "backend/backend.h"

namespace kipp {

// Fails with one clear message when there is no usable GPU, the model does not fit, or a weight
// type is not supported.
Expected<std::unique_ptr<Backend>> create_cuda_backend(const Model& model, const BackendOptions& options);

}  // namespace kipp
