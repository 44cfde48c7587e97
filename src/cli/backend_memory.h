// What a backend holds in memory (Backend::memory()), shown for people by `kipp inspect
// --backend` and the bench table, and as JSON in the bench document.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "backend/backend.h"

namespace kipp::cli {

// Lines of "  <what>  <MiB>", one per purpose, then the device's free and total memory (or
// that the backend lives in host memory).
std::string backend_memory_text(const BackendMemory& memory);

nlohmann::ordered_json backend_memory_json(const BackendMemory& memory);

}  // namespace kipp::cli
