#include "backend/cuda/cuda_backend.h"

#include "backend/cuda/cuda_device.h"

namespace kipp {

Expected<std::unique_ptr<Backend>> create_cuda_backend(const Model&, const BackendOptions&) {
  KIPP_ASSIGN_OR_RETURN(CudaDeviceInfo device, cuda_device_info());
  return make_error("the cuda backend cannot run models yet (found " + device.name + ")");
}

}  // namespace kipp
