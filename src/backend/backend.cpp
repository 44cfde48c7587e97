#include "backend/backend.h"

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_device.h"
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
      return Error{cuda_device_info().error()};  // names the missing build
#endif
  }
  return make_error("unknown backend kind " + std::to_string(static_cast<int>(kind)));
}

}  // namespace kipp
