// The host side of the CUDA products, without a GPU: the prepared-input layout, the path per
// weight type and row count, and the argument errors of matmul() (reported before anything
// touches the device; a context of decode rows needs neither cuBLASLt nor device memory).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/matmul.h"
#include "kernels/cuda/matmul_plan.h"

namespace kipp::cuda {
namespace {

using kernels::InputFormat;

uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

TEST(CudaMatmulLayout, PiecesAreAlignedDisjointAndInsideTheStorage) {
  alignas(256) static uint8_t storage[1];  // only addresses are computed
  for (const uint32_t rows : {1u, 3u, 7u, 64u, 1000u})
    for (const uint32_t cols : {32u, 96u, 1024u, 3072u}) {
      const uintptr_t base = address(storage);
      const size_t bf16_bytes = device_input_bytes(InputFormat::BF16, rows, cols);
      EXPECT_EQ(bf16_bytes % 256, 0u);
      EXPECT_GE(bf16_bytes, size_t{rows} * cols * 2);
      EXPECT_LT(bf16_bytes, size_t{rows} * cols * 2 + 256);
      const DeviceInput b = device_input_layout(InputFormat::BF16, rows, cols, storage);
      EXPECT_EQ(address(b.bf16), base);
      EXPECT_EQ(b.rows, rows);
      EXPECT_EQ(b.cols, cols);
      EXPECT_EQ(b.format, InputFormat::BF16);

      const size_t q8_bytes = device_input_bytes(InputFormat::Q8, rows, cols);
      const size_t blocks = size_t{rows} * cols / 32;
      const DeviceInput q = device_input_layout(InputFormat::Q8, rows, cols, storage);
      EXPECT_EQ(address(q.q8), base);
      for (const uintptr_t piece : {address(q.q8_scale), address(q.q8_scaled_sum)}) EXPECT_EQ(piece % 256, 0u);
      EXPECT_LE(address(q.q8) + size_t{rows} * cols, address(q.q8_scale));
      EXPECT_LE(address(q.q8_scale) + blocks * 4, address(q.q8_scaled_sum));
      EXPECT_LE(address(q.q8_scaled_sum) + blocks * 4, base + q8_bytes);
      EXPECT_LT(q8_bytes, size_t{rows} * cols + 2 * blocks * 4 + 3 * 256);
      EXPECT_EQ(q.bf16, nullptr);
    }
}

TEST(CudaMatmulPath, DecodeUpToEightRowsThenTensorCoresOrTiles) {
  for (uint32_t rows = 1; rows <= 8; ++rows) {
    EXPECT_EQ(matmul_path(GgmlType::BF16, rows), MatmulPath::Bf16Decode);
    EXPECT_EQ(matmul_path(GgmlType::Q8_0, rows), MatmulPath::QuantDecode);
    EXPECT_EQ(matmul_path(GgmlType::Q4_1, rows), MatmulPath::QuantDecode);
  }
  for (const uint32_t rows : {9u, 16u, 512u}) {
    EXPECT_EQ(matmul_path(GgmlType::BF16, rows), MatmulPath::Bf16Cublas);
    EXPECT_EQ(matmul_path(GgmlType::Q8_0, rows), MatmulPath::QuantTiled);
    EXPECT_EQ(matmul_path(GgmlType::Q4_1, rows), MatmulPath::QuantTiled);
  }
}

TEST(CudaMatmulPath, RowBytesOfEachType) {
  EXPECT_EQ(weight_row_bytes(GgmlType::BF16, 1024), 2048u);
  EXPECT_EQ(weight_row_bytes(GgmlType::Q8_0, 1024), 32u * 34u);
  EXPECT_EQ(weight_row_bytes(GgmlType::Q4_1, 1024), 32u * 20u);
  EXPECT_EQ(weight_row_bytes(GgmlType::Q8_0, 1000), 0u);
  EXPECT_EQ(weight_row_bytes(GgmlType::F32, 1024), 0u);
  EXPECT_EQ(weight_row_bytes(GgmlType::BF16, 0), 0u);
}

// Valid arguments over host memory standing in for device memory (nothing is dereferenced).
struct Arguments {
  alignas(256) uint8_t weights[4 * 64 * 34] = {};
  alignas(256) uint8_t up_weights[4 * 64 * 34] = {};
  alignas(256) uint8_t input[8192] = {};
  alignas(256) float out[64 * 8] = {};
  DeviceMatrix w, up;
  DeviceInput in;

  explicit Arguments(GgmlType type, uint32_t rows = 2) {
    w = {type, weights, 4, 64, weight_row_bytes(type, 64)};
    up = {type, up_weights, 4, 64, weight_row_bytes(type, 64)};
    in = device_input_layout(kernels::input_format(type), rows, 64, input);
  }
  Status check(Epilogue epilogue = Epilogue::Store, bool with_up = false, uint32_t out_stride = 8) {
    return check_matmul_arguments(w, with_up ? &up : nullptr, in, out, out_stride, epilogue, 8, 64);
  }
};

void expect_error(const Status& status, const std::string& words) {
  ASSERT_FALSE(status.ok()) << "expected an error with: " << words;
  EXPECT_NE(status.message().find(words), std::string::npos) << status.message();
}

TEST(CudaMatmulArguments, ValidProductsPass) {
  for (const GgmlType type : {GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_1}) {
    Arguments a(type);
    EXPECT_TRUE(a.check().ok()) << a.check().message();
    EXPECT_TRUE(a.check(Epilogue::Accumulate).ok());
    EXPECT_TRUE(a.check(Epilogue::SwiGlu, true).ok());
    EXPECT_TRUE(a.check(Epilogue::Store, false, 4).ok());  // stride = outputs
  }
}

TEST(CudaMatmulArguments, EachMistakeIsNamed) {
  {
    Arguments a(GgmlType::F32);
    a.w.row_bytes = 256;
    expect_error(a.check(), "is not BF16, Q8_0 or Q4_1");
  }
  {
    Arguments a(GgmlType::Q8_0);
    a.w.row_bytes = 64;
    expect_error(a.check(), "has rows of 64 bytes, not 68");
  }
  {
    Arguments a(GgmlType::BF16);
    a.w.cols = 40;
    expect_error(a.check(), "whole number of 32");
  }
  {
    Arguments a(GgmlType::BF16);
    a.w.data += 2;
    expect_error(a.check(), "16-byte aligned");
  }
  {
    Arguments a(GgmlType::Q4_1);
    a.w.data += 2;
    expect_error(a.check(), "4-byte aligned");
  }
  {
    Arguments a(GgmlType::Q8_0);
    a.in = device_input_layout(InputFormat::BF16, 2, 64, a.input);
    expect_error(a.check(), "q8_0 weights take Q8 inputs");
  }
  {
    Arguments a(GgmlType::BF16);
    a.in.cols = 32;
    expect_error(a.check(), "the input has 32 columns");
  }
  {
    Arguments a(GgmlType::BF16);
    a.in.bf16 = nullptr;
    expect_error(a.check(), "no storage");
  }
  {
    Arguments a(GgmlType::BF16);
    expect_error(a.check(Epilogue::SwiGlu), "SwiGlu needs the up projection");
    expect_error(a.check(Epilogue::Store, true), "only taken by SwiGlu");
    a.up.rows = 3;
    expect_error(a.check(Epilogue::SwiGlu, true), "differs from");
  }
  {
    Arguments a(GgmlType::BF16);
    expect_error(a.check(Epilogue::Store, false, 3), "output stride 3 is below the 4 outputs");
  }
  {
    Arguments a(GgmlType::Q8_0, 9);
    expect_error(a.check(), "exceed the context's 8 x 64");
  }
  {
    Arguments a(GgmlType::Q8_0, 0);
    expect_error(a.check(), "no rows");
  }
}

TEST(CudaMatmulArguments, MatmulReportsThemBeforeTouchingTheDevice) {
  auto context = create_matmul_context(8, 64);
  ASSERT_TRUE(context.ok()) << context.message();
  EXPECT_EQ((*context)->device_bytes(), 0u);
  Arguments a(GgmlType::Q8_0);
  a.w.cols = 96;
  a.w.row_bytes = weight_row_bytes(GgmlType::Q8_0, 96);
  expect_error(matmul(**context, a.w, nullptr, a.in, a.out, 8, Epilogue::Store, nullptr), "the input has 64 columns");
  const auto empty = create_matmul_context(0, 64);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.message().find("at least one row"), std::string::npos);
}

}  // namespace
}  // namespace kipp::cuda
