// The checkpoint a new run starts from (`kipp train --init`): where its weights are, the model
// config they were trained with (which fills the training config's `model` section) and the
// tokenizer it carries.
#pragma once

#include <string>

#include "core/status.h"
#include "model/model_config.h"

namespace kipp::train {

struct InitSource {
  std::string name;       // as the user gave it (a registry name or a path); names it in messages
  std::string path;       // an HF checkpoint folder or a GGUF file
  ModelConfig config;     // the source's own config.json or GGUF metadata
  std::string tokenizer;  // the folder's tokenizer.json; empty for a GGUF (its vocabulary is metadata)
};

// Reads the config of the HF folder (config.json) or GGUF at `path`.
Expected<InitSource> read_init_source(const std::string& name, const std::string& path);

}  // namespace kipp::train
