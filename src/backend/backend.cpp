#include "backend/backend.h"

#include "backend/cpu/cpu_backend.h"

namespace kipp {

std::string_view backend_name(BackendKind kind) { return kind == BackendKind::Cpu ? "cpu" : "cuda"; }

Expected<std::unique_ptr<Backend>> create_backend(BackendKind kind, const Model& model, const BackendOptions& options) {
  switch (kind) {
    case BackendKind::Cpu: return create_cpu_backend(model, options);
    case BackendKind::Cuda: break;
  }
  return make_error("the cuda backend is not built into this Kipp (CPU only so far)");
}

}  // namespace kipp
