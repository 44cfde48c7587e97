// Tensor element types as GGUF numbers them (the ggml type ids) and their block sizes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kipp {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,  // Kipp calls this layout "affine4"
  Q8_0 = 8,
  BF16 = 30,
};

struct GgmlTypeTraits {
  GgmlType type;
  std::string_view name;    // "f32", "bf16", "q8_0", "q4_1", ...
  uint32_t block_elements;  // elements per block (1 for plain types)
  uint32_t block_bytes;     // bytes per block
};

// Traits of a type id Kipp knows, or nullopt for any other id (a file may carry anything).
std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t type_id);
std::string_view ggml_type_name(GgmlType type);

// Bytes of a row-major tensor of `elements` elements, or nullopt if `elements` is not a whole
// number of blocks or the size overflows.
std::optional<uint64_t> ggml_tensor_bytes(GgmlType type, uint64_t elements);

}  // namespace kipp
