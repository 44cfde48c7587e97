#include "kernels/cpu/kernels.h"

#include <cstdlib>
#include <vector>

#include "kernels/cpu/portable_ops.h"

// Each architecture's tables are built only for it (CMakeLists.txt leaves the others' files out).
#if defined(__x86_64__)
#include "kernels/cpu/attention_avx512.h"
#include "kernels/cpu/matmul_amx.h"
#include "kernels/cpu/matmul_avx2.h"
#include "kernels/cpu/matmul_avx512.h"
#include "kernels/cpu/matmul_int8_amx.h"
#include "kernels/cpu/matmul_int8_avx2.h"
#include "kernels/cpu/matmul_int8_avx512.h"
#endif
#if defined(__aarch64__)
#include "kernels/cpu/matmul_neon.h"
#endif

namespace kipp::kernels {
namespace {

// FP32 activations into every product, whatever the weight type.
InputFormat f32_inputs(GgmlType) { return InputFormat::F32; }

constexpr KernelTable kReference{
    "reference",       &f32_inputs, &ref::dequantize_row, &ref::prepare_rows, &ref::matmul, &ref::rms_norm,
    &ref::rope_angles, &ref::rope,  &ref::attention_rows, &ref::swiglu,       &ref::add,    &ref::store_bf16};

// Highway's best target for this CPU for everything.
constexpr KernelTable kPortable{
    "portable",          &input_format,        &ref::dequantize_row, &portable::prepare_rows,   &portable::matmul,
    &portable::rms_norm, &ref::rope_angles,    &portable::rope,      &portable::attention_rows, &portable::swiglu,
    &portable::add,      &portable::store_bf16};

#if defined(__x86_64__)
// The products on AVX2 (with FMA and F16C), the rest as in the portable table.
constexpr KernelTable kAvx2{"avx2",
                            &input_format,
                            &avx2::dequantize_row,
                            &portable::prepare_rows,
                            &avx2::matmul,
                            &portable::rms_norm,
                            &ref::rope_angles,
                            &portable::rope,
                            &portable::attention_rows,
                            &portable::swiglu,
                            &portable::add,
                            &portable::store_bf16,
                            &avx2::packs_weights,
                            &avx2::pack_weights};

// The AVX2 table with quantized products on AVX-VNNI (VPDPBUSD on 256-bit registers).
constexpr KernelTable kAvx2Vnni{
    "avx2-vnni",         &input_format,         &avx2::dequantize_row, &portable::prepare_rows,   &avx2::matmul_vnni,
    &portable::rms_norm, &ref::rope_angles,     &portable::rope,       &portable::attention_rows, &portable::swiglu,
    &portable::add,      &portable::store_bf16, &avx2::packs_weights,  &avx2::pack_weights};

// The products on AVX-512 BF16/VNNI, the rest as in the portable table.
constexpr KernelTable kAvx512{
    "avx512-bf16-vnni",  &input_format,         &avx512::dequantize_row, &portable::prepare_rows, &avx512::matmul,
    &portable::rms_norm, &ref::rope_angles,     &portable::rope,         &avx512::attention_rows, &portable::swiglu,
    &portable::add,      &portable::store_bf16, &avx512::packs_weights,  &avx512::pack_weights};

// The AVX-512 table (the same packed weights) with BF16 products, and quantized ones of 9 rows
// or more, on AMX tiles.
constexpr KernelTable kAmx{"avx512-amx-bf16",        &input_format,         &avx512::dequantize_row,
                           &portable::prepare_rows,  &amx::matmul,          &portable::rms_norm,
                           &ref::rope_angles,        &portable::rope,       &avx512::attention_rows,
                           &portable::swiglu,        &portable::add,        &portable::store_bf16,
                           &avx512::packs_weights,   &avx512::pack_weights, true,
                           &amx::int8_tiles_for_rows};
#endif

#if defined(__aarch64__)
// The products on NEON (sdot and BF16 dot products where the CPU has them), the rest as in the
// portable table.
constexpr KernelTable kNeon{"neon",
                            &input_format,
                            &ref::dequantize_row,
                            &portable::prepare_rows,
                            &neon::matmul,
                            &portable::rms_norm,
                            &ref::rope_angles,
                            &portable::rope,
                            &portable::attention_rows,
                            &portable::swiglu,
                            &portable::add,
                            &portable::store_bf16};
#endif

std::vector<const KernelTable*> detect_tables() {
  std::vector<const KernelTable*> tables{&kReference, &kPortable};
#if defined(__x86_64__)
  if (avx2::supported()) tables.push_back(&kAvx2);
  if (avx2::vnni_supported()) tables.push_back(&kAvx2Vnni);
  if (avx512::supported()) tables.push_back(&kAvx512);
  if (amx::supported()) tables.push_back(&kAmx);
#endif
#if defined(__aarch64__)
  tables.push_back(&kNeon);  // every ARM64 CPU has NEON
#endif
  return tables;
}

}  // namespace

std::span<const KernelTable* const> available_kernel_tables() {
  static const std::vector<const KernelTable*> tables = detect_tables();
  return tables;
}

const KernelTable* find_kernel_table(std::string_view name) {
  for (const KernelTable* table : available_kernel_tables())
    if (name == table->name) return table;
  return nullptr;
}

const KernelTable& cpu_kernels() {
  static const KernelTable& chosen = []() -> const KernelTable& {
    if (const char* wanted = std::getenv("KIPP_KERNELS"))
      if (const KernelTable* table = find_kernel_table(wanted)) {
#if defined(__x86_64__)
        if (table == &kAvx2 || table == &kAvx2Vnni) portable::cap_at_avx2();
#endif
        return *table;
      }
    return *available_kernel_tables().back();
  }();
  return chosen;
}

}  // namespace kipp::kernels
