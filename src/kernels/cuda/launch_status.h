// A CUDA call's or a kernel launch's result as a Status naming what failed.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "core/status.h"

namespace kipp::cuda {

inline Status cuda_status(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return ok_status();
  return make_error(std::string(what) + " failed: " + cudaGetErrorString(error));
}

// After a launch: a bad configuration, or an error a previous kernel left behind.
inline Status last_launch_status(const char* kernel) { return cuda_status(cudaGetLastError(), kernel); }

}  // namespace kipp::cuda
