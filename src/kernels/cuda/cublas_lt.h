// cuBLASLt, opened at run time. Linking it costs every process that links Kipp a third of a
// second at start-up (its initializers run whether or not a GPU is ever used), so the library is
// opened with dlopen the first time a CUDA product needs it, and its functions are called
// through this table (the declarations and types still come from <cublasLt.h>).
#pragma once

#include <cublasLt.h>

#include <string>

#include "core/status.h"

namespace kipp::cuda {

struct CublasLt {
  decltype(&::cublasLtCreate) create;
  decltype(&::cublasLtDestroy) destroy;
  decltype(&::cublasLtGetStatusString) status_string;
  decltype(&::cublasLtMatmul) matmul;
  decltype(&::cublasLtMatmulDescCreate) matmul_desc_create;
  decltype(&::cublasLtMatmulDescDestroy) matmul_desc_destroy;
  decltype(&::cublasLtMatmulDescSetAttribute) matmul_desc_set_attribute;
  decltype(&::cublasLtMatrixLayoutCreate) matrix_layout_create;
  decltype(&::cublasLtMatrixLayoutDestroy) matrix_layout_destroy;
  decltype(&::cublasLtMatrixLayoutSetAttribute) matrix_layout_set_attribute;
  decltype(&::cublasLtMatmulPreferenceCreate) preference_create;
  decltype(&::cublasLtMatmulPreferenceDestroy) preference_destroy;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) preference_set_attribute;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) algo_get_heuristic;

  // "cublasLtMatmul: CUBLAS_STATUS_..." for a failed call, or ok.
  Status check(cublasStatus_t status, const char* call) const;
};

// The table, opened once per process (libcublasLt.so.<major of the toolkit Kipp was built with>,
// found on the usual library path); the error says which library or function is missing.
Expected<const CublasLt*> cublas_lt();

}  // namespace kipp::cuda
