// Weight matrices and inputs for the matrix-product tests: random weights stored in a weight
// type, inputs prepared by the reference, and the exact value of each product computed in
// double from the stored and prepared values (the oracle both the reference and the SIMD
// products are held to).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "format/ggml_types.h"
#include "kernels/matmul_input.h"
#include "kernels/weights.h"

namespace kipp::testing {

struct StoredMatrix {
  std::vector<uint8_t> bytes;
  kernels::WeightMatrix w;
  std::vector<double> values;  // rows * cols, what each stored weight decodes to
};

StoredMatrix make_stored_matrix(GgmlType type, size_t rows, size_t cols, std::mt19937& rng);

struct PreparedRows {
  std::vector<float> source;   // rows * stride floats (NaN in the gaps past cols)
  std::vector<float> storage;  // what prepare_input wrote
  kernels::PreparedInput in;
  std::vector<double> values;  // rows * cols: what each prepared input value stands for
};

// `rows` random input rows of `cols` values, `stride` apart, prepared by the reference.
PreparedRows make_prepared_rows(kernels::InputFormat format, size_t rows, size_t cols, size_t stride,
                                std::mt19937& rng);

// Exact product of weight row o and input row r, and the sum of the absolute terms (the
// scale a floating-point sum's error is measured against).
struct ExactProduct {
  double value;
  double magnitude;
};
ExactProduct exact_product(const StoredMatrix& m, const PreparedRows& x, size_t o, size_t r);

// Sets Q8 input codes to +-127 (their block sums updated to match) and the weights' codes to
// their largest magnitudes (Q8_0 -128 and 127, affine4 15 and 0): every pair of products sits at
// its largest, where a saturating or sign-losing integer step would show.
void set_extreme_codes(StoredMatrix& m, PreparedRows& x);

}  // namespace kipp::testing
