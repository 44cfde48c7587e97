// Q8_0 and affine4 (Q4_1) weights times Q8 inputs on 256-bit registers, for x86 CPUs without
// AVX-512: AVX2 (VPMADDUBSW) and, where the CPU has AVX-VNNI, VPDPBUSD. Matrices of whole
// panels are packed at load time (quant_panels.h) and multiplied lane per output
// (matmul_int8_avx2_panels.h); others are read as stored, 8 rows at a time, each block's dot
// summed across its vector. Every result is the reference's bit for bit (ref/q8_rows.h).
#pragma once

#include <cstdint>

#include "kernels/matmul_input.h"
#include "kernels/weights.h"

// The AVX2 kernels' target with AVX-VNNI (the VEX-encoded VPDPBUSD on 256-bit registers).
#define KIPP_AVX2_VNNI __attribute__((target("avx2,fma,f16c,avxvnni")))

namespace kipp::kernels::avx2 {

// ref::matmul's contract for Q8_0 and Q4_1 weights on Q8 inputs, stored as the file holds them
// or (w.panels) as pack_quantized arranged them; the caller checks avx2::supported().
void quantized_matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride);

// Whether this CPU has AVX2 (avx2::supported()) and AVX-VNNI.
bool vnni_supported();

// The same with VPDPBUSD for packed matrices; the caller checks vnni_supported().
void quantized_matmul_vnni(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride);

// avx2::matmul with quantized products by quantized_matmul_vnni: the avx2-vnni table's.
void matmul_vnni(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride);

// KernelTable::packs_weights / pack_weights for the quantized matrices: Q8_0 and Q4_1 ones of
// whole 16-row panels (cpu::stores_panels); pack_quantized returns false, out untouched, for
// any other.
bool packs_quantized(const WeightMatrix& w);
bool pack_quantized(const WeightMatrix& w, uint8_t* out);

}  // namespace kipp::kernels::avx2
