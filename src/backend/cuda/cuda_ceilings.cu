// The card's own ceilings, measured in the run that reports figures against them: a
// device-to-device copy for memory bandwidth and a plain cuBLASLt BF16 product for the tensor-core
// peak. Both run on random data (timing zeros flatters the tensor cores' power draw) and report
// the median of several timed runs after warm-up, timed with CUDA events on one stream.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/cuda_device.h"
#include "kernels/cuda/cublas_lt.h"

namespace kipp {
namespace {

constexpr size_t kCopyBytes = size_t{1} << 30;  // large enough that caches and launch cost vanish
constexpr uint64_t kProductSize = 8192;         // M = N = K of the product
constexpr size_t kWorkspaceBytes = size_t{32} << 20;
constexpr int kWarmUps = 3;
constexpr int kTimedRuns = 10;

Status check(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return ok_status();
  return make_error(std::string("measuring the GPU's ceilings: ") + call + ": " + cudaGetErrorString(error));
}

class DeviceBuffer {
 public:
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }
  Status allocate(size_t bytes) { return check(cudaMalloc(&data_, bytes), "cudaMalloc"); }
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
};

// A stream and the two events that time work on it.
class Timer {
 public:
  ~Timer() {
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  Status create() {
    KIPP_RETURN_IF_ERROR(check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
    KIPP_RETURN_IF_ERROR(check(cudaEventCreate(&start_), "cudaEventCreate"));
    return check(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  cudaStream_t stream() const { return stream_; }

  // Seconds `work` (which enqueues on stream()) takes, as the events see it.
  template <typename Work>
  Expected<double> time(Work&& work) {
    KIPP_RETURN_IF_ERROR(check(cudaEventRecord(start_, stream_), "cudaEventRecord"));
    KIPP_RETURN_IF_ERROR(work());
    KIPP_RETURN_IF_ERROR(check(cudaEventRecord(stop_, stream_), "cudaEventRecord"));
    KIPP_RETURN_IF_ERROR(check(cudaEventSynchronize(stop_), "cudaEventSynchronize"));
    float milliseconds = 0;
    KIPP_RETURN_IF_ERROR(check(cudaEventElapsedTime(&milliseconds, start_, stop_), "cudaEventElapsedTime"));
    if (milliseconds <= 0) return make_error("measuring the GPU's ceilings: a timed run took no time");
    return milliseconds / 1e3;
  }

  // The median seconds of kTimedRuns runs of `work` after kWarmUps untimed ones.
  template <typename Work>
  Expected<double> median_seconds(Work&& work) {
    for (int i = 0; i < kWarmUps; ++i) KIPP_RETURN_IF_ERROR(time(work));
    std::vector<double> seconds;
    for (int i = 0; i < kTimedRuns; ++i) {
      KIPP_ASSIGN_OR_RETURN(const double s, time(work));
      seconds.push_back(s);
    }
    std::sort(seconds.begin(), seconds.end());
    return seconds[seconds.size() / 2];
  }

 private:
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

__device__ uint32_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

// Pseudo-random words: the copy's source.
__global__ void fill_words(uint32_t* out, size_t count, uint64_t seed) {
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count; i += stride) out[i] = mix(i + seed);
}

// Pseudo-random BF16 values in [-1, 1) (the upper half of the FP32 bits): the product's operands.
__global__ void fill_bf16(uint16_t* out, size_t count, uint64_t seed) {
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count; i += stride) {
    const float value = static_cast<float>(mix(i + seed) >> 8) * (2.0f / 16777216.0f) - 1.0f;
    out[i] = static_cast<uint16_t>(__float_as_uint(value) >> 16);
  }
}

constexpr unsigned kFillBlocks = 1024;
constexpr unsigned kFillThreads = 256;

Expected<double> copy_bytes_per_second(Timer& timer) {
  DeviceBuffer source, destination;
  KIPP_RETURN_IF_ERROR(source.allocate(kCopyBytes));
  KIPP_RETURN_IF_ERROR(destination.allocate(kCopyBytes));
  fill_words<<<kFillBlocks, kFillThreads, 0, timer.stream()>>>(static_cast<uint32_t*>(source.data()),
                                                               kCopyBytes / sizeof(uint32_t), 1);
  KIPP_RETURN_IF_ERROR(check(cudaGetLastError(), "filling the copy's source"));
  KIPP_ASSIGN_OR_RETURN(const double seconds, timer.median_seconds([&] {
    return check(
        cudaMemcpyAsync(destination.data(), source.data(), kCopyBytes, cudaMemcpyDeviceToDevice, timer.stream()),
        "cudaMemcpyAsync");
  }));
  return 2.0 * static_cast<double>(kCopyBytes) / seconds;  // every byte is read once and written once
}

// cuBLASLt's descriptors for one BF16 product D = A^T B with FP32 accumulation, freed together.
struct ProductPlan {
  const cuda::CublasLt* lt = nullptr;
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic{};

  ~ProductPlan() {
    if (lt == nullptr) return;
    if (preference != nullptr) lt->preference_destroy(preference);
    if (d != nullptr) lt->matrix_layout_destroy(d);
    if (b != nullptr) lt->matrix_layout_destroy(b);
    if (a != nullptr) lt->matrix_layout_destroy(a);
    if (operation != nullptr) lt->matmul_desc_destroy(operation);
    if (handle != nullptr) lt->destroy(handle);
  }

  Status create(const cuda::CublasLt* table) {
    lt = table;
    const uint64_t n = kProductSize;
    KIPP_RETURN_IF_ERROR(lt->check(lt->create(&handle), "cublasLtCreate"));
    KIPP_RETURN_IF_ERROR(
        lt->check(lt->matmul_desc_create(&operation, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate"));
    const cublasOperation_t transpose = CUBLAS_OP_T;
    KIPP_RETURN_IF_ERROR(
        lt->check(lt->matmul_desc_set_attribute(operation, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose),
                  "cublasLtMatmulDescSetAttribute"));
    // Column-major: A is K x M read transposed (so its rows are the K-contiguous weight rows), B is
    // K x N, D is M x N.
    KIPP_RETURN_IF_ERROR(lt->check(lt->matrix_layout_create(&a, CUDA_R_16BF, n, n, static_cast<int64_t>(n)),
                                   "cublasLtMatrixLayoutCreate"));
    KIPP_RETURN_IF_ERROR(lt->check(lt->matrix_layout_create(&b, CUDA_R_16BF, n, n, static_cast<int64_t>(n)),
                                   "cublasLtMatrixLayoutCreate"));
    KIPP_RETURN_IF_ERROR(lt->check(lt->matrix_layout_create(&d, CUDA_R_16BF, n, n, static_cast<int64_t>(n)),
                                   "cublasLtMatrixLayoutCreate"));
    KIPP_RETURN_IF_ERROR(lt->check(lt->preference_create(&preference), "cublasLtMatmulPreferenceCreate"));
    const size_t workspace = kWorkspaceBytes;
    KIPP_RETURN_IF_ERROR(lt->check(lt->preference_set_attribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                &workspace, sizeof workspace),
                                   "cublasLtMatmulPreferenceSetAttribute"));
    int found = 0;
    KIPP_RETURN_IF_ERROR(
        lt->check(lt->algo_get_heuristic(handle, operation, a, b, d, d, preference, 1, &heuristic, &found),
                  "cublasLtMatmulAlgoGetHeuristic"));
    if (found < 1) return make_error("measuring the GPU's ceilings: cuBLASLt offers no BF16 product algorithm");
    return ok_status();
  }
};

Expected<double> bf16_flops_per_second(Timer& timer) {
  KIPP_ASSIGN_OR_RETURN(const cuda::CublasLt* lt, cuda::cublas_lt());
  const size_t elements = kProductSize * kProductSize;
  const size_t operand_bytes = elements * sizeof(uint16_t);
  DeviceBuffer a, b, d, workspace;
  KIPP_RETURN_IF_ERROR(a.allocate(operand_bytes));
  KIPP_RETURN_IF_ERROR(b.allocate(operand_bytes));
  KIPP_RETURN_IF_ERROR(d.allocate(operand_bytes));
  KIPP_RETURN_IF_ERROR(workspace.allocate(kWorkspaceBytes));
  fill_bf16<<<kFillBlocks, kFillThreads, 0, timer.stream()>>>(static_cast<uint16_t*>(a.data()), elements, 2);
  fill_bf16<<<kFillBlocks, kFillThreads, 0, timer.stream()>>>(static_cast<uint16_t*>(b.data()), elements, 3);
  KIPP_RETURN_IF_ERROR(check(cudaGetLastError(), "filling the product's operands"));
  ProductPlan plan;
  KIPP_RETURN_IF_ERROR(plan.create(lt));
  const float alpha = 1.0f, beta = 0.0f;
  KIPP_ASSIGN_OR_RETURN(const double seconds, timer.median_seconds([&] {
    return lt->check(
        lt->matmul(plan.handle, plan.operation, &alpha, a.data(), plan.a, b.data(), plan.b, &beta, d.data(), plan.d,
                   d.data(), plan.d, &plan.heuristic.algo, workspace.data(), kWorkspaceBytes, timer.stream()),
        "cublasLtMatmul");
  }));
  const double n = static_cast<double>(kProductSize);
  return 2.0 * n * n * n / seconds;
}

}  // namespace

Expected<CudaCeilings> measure_cuda_ceilings() {
  KIPP_RETURN_IF_ERROR(cuda_device_info());  // "no usable NVIDIA GPU" before any allocation
  Timer timer;
  KIPP_RETURN_IF_ERROR(timer.create());
  CudaCeilings ceilings;
  KIPP_ASSIGN_OR_RETURN(ceilings.copy_bytes_per_second, copy_bytes_per_second(timer));
  KIPP_ASSIGN_OR_RETURN(ceilings.bf16_flops_per_second, bf16_flops_per_second(timer));
  return ceilings;
}

}  // namespace kipp
