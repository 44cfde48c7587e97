// BF16 matrix products on Intel AMX (Sapphire Rapids and later): TDPBF16PS multiplies a tile
// of 16 input rows x 32 columns by a tile of 32 columns x 16 outputs in one instruction, about
// 30x the rate of VDPBF16PS on the same core. Weights are arranged once at load time into the
// tiles the instruction reads. Packed Q8_0 and affine4 products of 9 rows or more go to the AMX
// integer kernel (matmul_int8_amx.h), every other product to the AVX-512 kernels.
#pragma once

#include "kernels/matmul_input.h"
#include "kernels/weights.h"

namespace kipp::kernels::amx {

// Whether this CPU has AMX-BF16 and the kernel lets this process use the tile registers (Linux
// grants them on request, once per process; the request is made here).
bool supported();

// ref::matmul's contract. BF16 weights packed as panels (bf16_panels.h, the tiles TDPBF16PS
// reads; avx512::pack_weights packs them): per output, one FP32 accumulator
// that every 32-column block adds its 16 pair products to, in column order, whatever the number
// of rows or outputs computed together (rows are zero-padded to whole tiles). Packed Q8_0 and
// affine4 weights times kMinTileRows rows or more: quantized_panels_matmul. Everything else:
// avx512::matmul.
void matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride);

}  // namespace kipp::kernels::amx
