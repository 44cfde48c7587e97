#include "cli/backend_flag.h"

#include <string>

namespace kipp::cli {

CLI::Option* add_backend_option(CLI::App& command, BackendKind& backend) {
  // CLI11 stores an enum from its number: the names become numbers here, and anything else is
  // refused with the names that work.
  const CLI::Validator names(
      [](std::string& value) -> std::string {
        for (const BackendKind kind : {BackendKind::Cpu, BackendKind::Cuda}) {
          if (value == backend_name(kind)) {
            value = std::to_string(static_cast<int>(kind));
            return {};
          }
        }
        return "expected cpu or cuda, found '" + value + "'";
      },
      "cpu|cuda");
  return command
      .add_option("--backend", backend,
                  "Where the model runs: cpu, or cuda (an NVIDIA GPU of compute capability 8.0 or newer, a driver "
                  "for CUDA 13, and a Kipp built with nvcc)")
      ->transform(names)
      ->option_text("cpu|cuda [cpu]");
}

}  // namespace kipp::cli
