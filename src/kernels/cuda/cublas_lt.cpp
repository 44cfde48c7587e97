#include "kernels/cuda/cublas_lt.h"

#include <dlfcn.h>

namespace kipp::cuda {
namespace {

#define KIPP_STRINGIFY_VALUE(x) #x
#define KIPP_STRINGIFY(x) KIPP_STRINGIFY_VALUE(x)
constexpr const char* kLibrary = "libcublasLt.so." KIPP_STRINGIFY(CUBLAS_VER_MAJOR);

struct Opened {
  CublasLt table{};
  std::string error;
};

// Resolves `name` into `slot`, or records the first missing one.
template <typename Function>
void resolve(void* library, const char* name, Function& slot, std::string& error) {
  slot = reinterpret_cast<Function>(dlsym(library, name));
  if (slot == nullptr && error.empty()) error = std::string(kLibrary) + " has no function " + name;
}

Opened open_library() {
  Opened opened;
  void* library = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    opened.error = std::string("cannot open ") + kLibrary +
                   " (cuBLASLt, part of the CUDA toolkit; add its folder to "
                   "LD_LIBRARY_PATH): " +
                   (why != nullptr ? why : "not found");
    return opened;
  }
  CublasLt& t = opened.table;
  std::string& e = opened.error;
  resolve(library, "cublasLtCreate", t.create, e);
  resolve(library, "cublasLtDestroy", t.destroy, e);
  resolve(library, "cublasLtGetStatusString", t.status_string, e);
  resolve(library, "cublasLtMatmul", t.matmul, e);
  resolve(library, "cublasLtMatmulDescCreate", t.matmul_desc_create, e);
  resolve(library, "cublasLtMatmulDescDestroy", t.matmul_desc_destroy, e);
  resolve(library, "cublasLtMatmulDescSetAttribute", t.matmul_desc_set_attribute, e);
  resolve(library, "cublasLtMatrixLayoutCreate", t.matrix_layout_create, e);
  resolve(library, "cublasLtMatrixLayoutDestroy", t.matrix_layout_destroy, e);
  resolve(library, "cublasLtMatrixLayoutSetAttribute", t.matrix_layout_set_attribute, e);
  resolve(library, "cublasLtMatmulPreferenceCreate", t.preference_create, e);
  resolve(library, "cublasLtMatmulPreferenceDestroy", t.preference_destroy, e);
  resolve(library, "cublasLtMatmulPreferenceSetAttribute", t.preference_set_attribute, e);
  resolve(library, "cublasLtMatmulAlgoGetHeuristic", t.algo_get_heuristic, e);
  // The library stays open for the life of the process: its functions are in the table.
  return opened;
}

}  // namespace

Status CublasLt::check(cublasStatus_t status, const char* call) const {
  if (status == CUBLAS_STATUS_SUCCESS) return ok_status();
  const char* text = status_string != nullptr ? status_string(status) : nullptr;
  return make_error(std::string(call) + ": " + (text != nullptr ? text : "cuBLASLt error " + std::to_string(status)));
}

Expected<const CublasLt*> cublas_lt() {
  static const Opened opened = open_library();
  if (!opened.error.empty()) return make_error(opened.error);
  return &opened.table;
}

}  // namespace kipp::cuda
