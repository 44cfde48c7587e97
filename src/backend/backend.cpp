#include "backend/backend.h"

#include "backend/cpu/cpu_backend.h"
#ifdef KIPP_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace kipp {

std::string_view backend_name(BackendKind kind) { return kind == BackendKind::Cpu ? "cpu" : "cuda"; }

Expected<std::unique_ptr<Backend>> create_backend(BackendKind kind, const Model& model, const BackendOptions& options) {
  switch (kind) {
    case BackendKind::Cpu: return create_cpu_backend(model, options);
    case BackendKind::Cuda:
#ifdef KIPP_HAVE_CUDA
      return create_cuda_backend(model, options);
#else
      break;
#endif
  }
  return make_error(
      "the cuda backend is not built into this Kipp: nvcc was not found when it was built (see docs/GPU.md)");
}

}  // namespace kipp
