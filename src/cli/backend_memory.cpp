#include "cli/backend_memory.h"

#include <cstdio>

namespace kipp::cli {
namespace {

std::string line(const char* what, uint64_t bytes) {
  char text[96];
  std::snprintf(text, sizeof text, "  %-10s %12.1f MiB\n", what, static_cast<double>(bytes) / (1 << 20));
  return text;
}

}  // namespace

std::string backend_memory_text(const BackendMemory& memory) {
  std::string text = "memory on " + memory.device + ":\n";
  text += line("weights", memory.weight_bytes);
  text += line("K/V", memory.kv_bytes);
  text += line("scratch", memory.scratch_bytes);
  text += line("graphs", memory.graph_bytes);
  if (memory.device_total_bytes == 0) return text + "  (host memory: no device of its own)\n";
  text += line("free", memory.device_free_bytes);
  return text + line("total", memory.device_total_bytes);
}

nlohmann::ordered_json backend_memory_json(const BackendMemory& memory) {
  return {{"device", memory.device},
          {"weight_bytes", memory.weight_bytes},
          {"kv_bytes", memory.kv_bytes},
          {"scratch_bytes", memory.scratch_bytes},
          {"graph_bytes", memory.graph_bytes},
          {"device_free_bytes", memory.device_free_bytes},
          {"device_total_bytes", memory.device_total_bytes}};
}

}  // namespace kipp::cli
