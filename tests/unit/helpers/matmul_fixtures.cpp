#include "unit/helpers/matmul_fixtures.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/half.h"
#include "format/quant.h"
#include "kernels/ref/ops.h"

namespace kipp::testing {
namespace {

std::vector<float> random_floats(std::mt19937& rng, size_t n) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(n);
  for (float& v : values) v = dist(rng);
  return values;
}

}  // namespace

StoredMatrix make_stored_matrix(GgmlType type, size_t rows, size_t cols, std::mt19937& rng) {
  StoredMatrix m;
  const std::vector<float> source = random_floats(rng, rows * cols);
  switch (type) {
    case GgmlType::F32:
      m.bytes.resize(source.size() * sizeof(float));
      std::memcpy(m.bytes.data(), source.data(), m.bytes.size());
      break;
    case GgmlType::BF16:
      m.bytes.resize(source.size() * 2);
      f32_to_bf16_row(source.data(), reinterpret_cast<uint16_t*>(m.bytes.data()), source.size());
      break;
    case GgmlType::Q8_0:
      m.bytes.resize(source.size() / kQuantBlock * sizeof(BlockQ8_0));
      quantize_q8_0(source.data(), reinterpret_cast<BlockQ8_0*>(m.bytes.data()), source.size());
      break;
    default:
      m.bytes.resize(source.size() / kQuantBlock * sizeof(BlockAffine4));
      quantize_affine4(source.data(), reinterpret_cast<BlockAffine4*>(m.bytes.data()), source.size());
      break;
  }
  m.w = kernels::make_weight_matrix(type, m.bytes.data(), rows, cols);
  // The decoded values from the bytes, by the format's definition (quant.h), not by the kernels.
  m.values.resize(rows * cols);
  for (size_t o = 0; o < rows; ++o) {
    const uint8_t* row = m.bytes.data() + o * m.w.row_bytes;
    for (size_t i = 0; i < cols; ++i) {
      double value = 0;
      if (type == GgmlType::F32) {
        float f;
        std::memcpy(&f, row + i * 4, 4);
        value = f;
      } else if (type == GgmlType::BF16) {
        uint16_t bits;
        std::memcpy(&bits, row + i * 2, 2);
        value = bf16_to_f32(bits);
      } else if (type == GgmlType::Q8_0) {
        const auto& block = reinterpret_cast<const BlockQ8_0*>(row)[i / 32];
        value = double{f16_to_f32(block.scale_f16)} * block.q[i % 32];
      } else {
        const auto& block = reinterpret_cast<const BlockAffine4*>(row)[i / 32];
        const size_t j = i % 32;
        const int code = j < 16 ? block.nibbles[j] & 0x0F : block.nibbles[j - 16] >> 4;
        value = double{f16_to_f32(block.scale_f16)} * code + f16_to_f32(block.min_f16);
      }
      m.values[o * cols + i] = value;
    }
  }
  return m;
}

PreparedRows make_prepared_rows(kernels::InputFormat format, size_t rows, size_t cols, size_t stride,
                                std::mt19937& rng) {
  PreparedRows x;
  x.source.assign(rows * stride, std::numeric_limits<float>::quiet_NaN());
  for (size_t r = 0; r < rows; ++r) {
    const std::vector<float> row = random_floats(rng, cols);
    std::copy(row.begin(), row.end(), x.source.begin() + static_cast<std::ptrdiff_t>(r * stride));
  }
  x.storage.assign(kernels::prepared_input_bytes(format, rows, cols) / sizeof(float) + 1, 0.0f);
  x.in = kernels::ref::prepare_input(format, x.source.data(), rows, stride, cols, x.storage.data());
  x.values.resize(rows * cols);
  for (size_t r = 0; r < rows; ++r)
    for (size_t i = 0; i < cols; ++i) {
      double value = x.source[r * stride + i];
      if (format == kernels::InputFormat::BF16) value = bf16_to_f32(x.in.bf16[r * cols + i]);
      if (format == kernels::InputFormat::Q8)
        value = double{x.in.q8_scale[(r * cols + i) / 32]} * x.in.q8[r * cols + i];
      x.values[r * cols + i] = value;
    }
  return x;
}

ExactProduct exact_product(const StoredMatrix& m, const PreparedRows& x, size_t o, size_t r) {
  const size_t cols = m.w.cols;
  ExactProduct product{0, 0};
  for (size_t i = 0; i < cols; ++i) {
    const double term = m.values[o * cols + i] * x.values[r * cols + i];
    product.value += term;
    product.magnitude += std::fabs(term);
  }
  return product;
}

void set_extreme_codes(StoredMatrix& m, PreparedRows& x) {
  const size_t codes = x.in.rows * x.in.cols;
  for (size_t i = 0; i < codes; ++i) x.in.q8[i] = static_cast<int8_t>((i / 3) % 2 ? 127 : -127);
  for (size_t i = 0; i < codes / 32; ++i) {
    int32_t sum = 0;
    for (size_t k = 0; k < 32; ++k) sum += x.in.q8[i * 32 + k];
    x.in.q8_sum[i] = sum;
    x.in.q8_scaled_sum[i] = x.in.q8_scale[i] * static_cast<float>(sum);
  }
  for (size_t o = 0; o < m.w.rows; ++o)
    for (size_t b = 0; b < m.w.cols / 32; ++b) {
      uint8_t* row = m.bytes.data() + o * m.w.row_bytes;
      if (m.w.type == GgmlType::Q8_0) {
        auto& q8 = reinterpret_cast<BlockQ8_0*>(row)[b];
        for (size_t i = 0; i < 32; ++i) q8.q[i] = static_cast<int8_t>((i + o) % 4 == 0 ? 127 : -128);
      } else {
        auto& q4 = reinterpret_cast<BlockAffine4*>(row)[b];
        for (size_t i = 0; i < 16; ++i) q4.nibbles[i] = (i + o) % 5 == 0 ? 0x0F : 0xFF;
      }
    }
}

}  // namespace kipp::testing
