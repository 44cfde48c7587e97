// A model named on the command line (`kipp train --init`, `kipp lora merge BASE`): a GGUF or HF
// checkpoint folder on disk, else a registry name, which means the folder `kipp pull` made.
#pragma once

#include <string>

#include "core/status.h"
#include "train/init_source.h"

namespace kipp::cli {

// `what` names the argument in errors ("--init", "BASE").
Expected<train::InitSource> open_model_source(const std::string& what, const std::string& source);

}  // namespace kipp::cli
