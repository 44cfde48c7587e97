// The full model (every parameter trained) on an NVIDIA GPU behind the CPU trainer's
// TrainingModel interface: the forward and backward of training_model.cpp, pass for pass, over
// device buffers, with the products on the tensor cores (BF16 operands rounded from the FP32
// parameters and activations, FP32 sums) and the other passes as kernels/cuda/train_kernels.h.
// Its TrainingModel calls take the host's FP32 parameters and add the gradients into the host's
// buffer, so results compare tensor by tensor with the CPU model's; its device_optimizer() keeps
// parameters, gradient and AdamW moments resident for the trainer. Names no CUDA type.
#pragma once

#include <memory>

#include "core/status.h"
#include "train/parameters.h"
#include "train/training_model.h"

namespace kipp::train::cuda {

// Fails with the reason when there is no usable GPU, cuBLASLt cannot be opened, the device
// memory does not suffice, or head_dim is not a multiple of 32 up to 256.
Expected<std::unique_ptr<TrainingModel>> create_cuda_training_model(const ParameterLayout& layout,
                                                                    const TrainingModelOptions& options);

}  // namespace kipp::train::cuda
