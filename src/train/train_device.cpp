#include "train/train_device.h"

#include <string>
#include <vector>

#include "train/train_config.h"

namespace kipp::train {

std::string_view device_name(TrainDevice device) { return device == TrainDevice::Cuda ? "cuda" : "cpu"; }

Expected<TrainDevice> parse_device(std::string_view name) {
  if (name == "cpu") return TrainDevice::Cpu;
  if (name == "cuda") return TrainDevice::Cuda;
  return make_error("expected cpu or cuda, got '" + std::string(name) + "'");
}

Status check_train_device(const TrainConfig& config, int processes, const GpuProbe& gpu) {
  if (config.train.device == TrainDevice::Cpu) return {};
  if (!gpu.built) {
    return make_error(
        "train.device: cuda, but the cuda backend is not built into this Kipp: nvcc was not found when it was "
        "built (see docs/GPU.md)");
  }
  // Keys whose GPU version does not exist yet, named so the user knows what to drop.
  std::vector<std::string> missing;
  if (config.train.lora.enabled()) missing.push_back("train.lora (LoRA and QLoRA adapters)");
  if (processes > 1) missing.push_back("data-parallel ranks under mpirun");
  if (!missing.empty()) {
    std::string list;
    for (const std::string& item : missing) list += (list.empty() ? "" : ", ") + item;
    return make_error("train.device: cuda does not support " + list + " yet; train on the cpu for that");
  }
  if (!gpu.usable.ok()) return make_error("train.device: cuda, but " + gpu.usable.message());
  return {};
}

Error cuda_step_unavailable() {
  return make_error("train.device: cuda needs the GPU training model, which only the kipp command passes in");
}

}  // namespace kipp::train
