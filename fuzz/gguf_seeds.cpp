// Writes the seed corpus for gguf_fuzz: small valid files covering every value type, nested
// arrays, each tensor type and a non-default alignment. Usage: gguf_fuzz_seeds OUTPUT_DIR
// (the committed seeds in fuzz/corpus/gguf/ come from this; each is well under 10 KB).
#include <cstdio>
#include <string>
#include <vector>

#include "format/gguf.h"

namespace {

using kipp::GgmlType;
using kipp::GgufValue;
using kipp::GgufValueType;

struct Tensor {
  std::string name;
  std::vector<uint64_t> dims;
  GgmlType type;
};

bool write_seed(const std::string& path, uint32_t alignment, const std::vector<kipp::GgufMetadataEntry>& metadata,
                const std::vector<Tensor>& tensors) {
  kipp::GgufWriter writer;
  writer.set_alignment(alignment);
  for (const auto& entry : metadata) writer.add_metadata(entry.key, entry.value);
  std::vector<std::vector<uint8_t>> buffers;
  for (const auto& tensor : tensors) {
    writer.add_tensor(tensor.name, tensor.dims, tensor.type);
    uint64_t elements = 1;
    for (uint64_t dim : tensor.dims) elements *= dim;
    std::vector<uint8_t> bytes(*kipp::ggml_tensor_bytes(tensor.type, elements));
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 37 + buffers.size());
    buffers.push_back(std::move(bytes));
  }
  const kipp::Status status = writer.write_all(path, {buffers.begin(), buffers.end()});
  if (!status.ok()) std::fprintf(stderr, "%s: %s\n", path.c_str(), status.message().c_str());
  return status.ok();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  bool ok = write_seed(dir + "/empty.gguf", 32, {}, {});
  ok &= write_seed(
      dir + "/values.gguf", 32,
      {{"general.architecture", GgufValue::string("qwen3")},
       {"u8", GgufValue::u8(1)},
       {"i8", GgufValue::i8(-1)},
       {"u16", GgufValue::u16(2)},
       {"i16", GgufValue::i16(-2)},
       {"u32", GgufValue::u32(3)},
       {"i32", GgufValue::i32(-3)},
       {"u64", GgufValue::u64(4)},
       {"i64", GgufValue::i64(-4)},
       {"f32", GgufValue::f32(0.5f)},
       {"f64", GgufValue::f64(0.25)},
       {"bool", GgufValue::boolean(true)},
       {"string", GgufValue::string("")},
       {"tokens", GgufValue::string_array({"a", "b", "\xc4\xa0t"})},
       {"types", GgufValue::i32_array({1, 3, 4})},
       {"nested", GgufValue::array(GgufValueType::ARRAY, {GgufValue::u32_array({1, 2}), GgufValue::u32_array({})})},
       {"bools", GgufValue::array(GgufValueType::BOOL, {GgufValue::boolean(false)})}},
      {});
  ok &= write_seed(dir + "/tensors.gguf", 32,
                   {{"general.architecture", GgufValue::string("qwen3")}, {"qwen3.block_count", GgufValue::u32(1)}},
                   {{"token_embd.weight", {4, 3}, GgmlType::BF16},
                    {"blk.0.attn_norm.weight", {4}, GgmlType::F32},
                    {"blk.0.attn_q.weight", {32, 2}, GgmlType::Q8_0},
                    {"blk.0.ffn_up.weight", {32, 1, 2}, GgmlType::Q4_1},
                    {"blk.0.ffn_down.weight", {32, 1, 1, 1}, GgmlType::Q4_0},
                    {"output_norm.weight", {3}, GgmlType::F16}});
  ok &= write_seed(dir + "/aligned64.gguf", 64, {{"general.name", GgufValue::string("x")}},
                   {{"a", {5}, GgmlType::F32}, {"b", {2, 2}, GgmlType::BF16}});
  return ok ? 0 : 1;
}
