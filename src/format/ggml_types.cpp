#include "format/ggml_types.h"

#include <array>
#include <limits>

namespace kipp {
namespace {

constexpr std::array<GgmlTypeTraits, 6> kKnownTypes = {{
    {GgmlType::F32, "f32", 1, 4},
    {GgmlType::F16, "f16", 1, 2},
    {GgmlType::Q4_0, "q4_0", 32, 18},
    {GgmlType::Q4_1, "q4_1", 32, 20},
    {GgmlType::Q8_0, "q8_0", 32, 34},
    {GgmlType::BF16, "bf16", 1, 2},
}};

}  // namespace

std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t type_id) {
  for (const auto& traits : kKnownTypes) {
    if (static_cast<uint32_t>(traits.type) == type_id) return traits;
  }
  return std::nullopt;
}

std::string_view ggml_type_name(GgmlType type) {
  const auto traits = ggml_type_traits(static_cast<uint32_t>(type));
  return traits ? traits->name : std::string_view("unknown");
}

std::optional<uint64_t> ggml_tensor_bytes(GgmlType type, uint64_t elements) {
  const auto traits = ggml_type_traits(static_cast<uint32_t>(type));
  if (!traits || elements % traits->block_elements != 0) return std::nullopt;
  const uint64_t blocks = elements / traits->block_elements;
  if (blocks > std::numeric_limits<uint64_t>::max() / traits->block_bytes) return std::nullopt;
  return blocks * traits->block_bytes;
}

}  // namespace kipp
