#include "train/frozen_base.h"

namespace kipp::train {

Expected<std::unique_ptr<FrozenBase>> FrozenBase::open(const ModelConfig&, const std::string& source) {
  return make_error("cannot open " + source + " as a LoRA base: LoRA training is not available yet");
}

}  // namespace kipp::train
