// The CPU backend: the Qwen3 forward pass as a short list of kernel calls through the CPU
// kernel table, over BF16 (or quantized) weights used in place in the model's mapping.
#pragma once

#include <memory>

#include "backend/backend.h"

namespace kipp {

Expected<std::unique_ptr<Backend>> create_cpu_backend(const Model& model, const BackendOptions& options);

}  // namespace kipp
