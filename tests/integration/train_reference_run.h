// The PyTorch training reference (tools/train_reference.py) as the training gates run it: its
// model files (an HF config.json and FP32 weights), a token batch, and one invocation. Shared by
// the CPU trainer's gates and the GPU trainer's.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "core/files.h"
#include "format/safetensors.h"
#include "gate_report.h"
#include "hf_config_text.h"
#include "train/parameters.h"

namespace kipp::gates {

struct ReferenceTools {
  std::string python;
  std::string script;
  std::filesystem::path scratch;
};

// DIR/config.json and DIR/weights.safetensors, which the reference's --config and --weights read.
inline Status write_reference_model(const std::filesystem::path& dir, const train::ParameterLayout& layout,
                                    std::span<const float> params) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  KIPP_RETURN_IF_ERROR(write_text_file_atomic((dir / "config.json").string(), hf_config_text(layout.config())));
  return train::save_parameters(layout, params, (dir / "weights.safetensors").string());
}

// int32 "inputs" and "targets" of `shape`, the reference's --batch.
inline Status write_token_batch(const std::string& path, const std::vector<int32_t>& inputs,
                                const std::vector<int32_t>& targets, std::vector<uint64_t> shape) {
  auto bytes = [](const std::vector<int32_t>& v) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(int32_t));
  };
  return write_safetensors(path, {{"inputs", SafetensorsDtype::I32, shape, bytes(inputs)},
                                  {"targets", SafetensorsDtype::I32, shape, bytes(targets)}});
}

// Runs the reference with `arguments` (one thread, as the gates' bounds assume); a failure is
// reported as a failed check.
inline bool run_train_reference(const ReferenceTools& tools, const std::string& arguments) {
  const std::string command = "OMP_NUM_THREADS=1 '" + tools.python + "' '" + tools.script + "' " + arguments;
  if (std::system(command.c_str()) == 0) return true;
  report(false, "reference", "command failed: " + command);
  return false;
}

}  // namespace kipp::gates
