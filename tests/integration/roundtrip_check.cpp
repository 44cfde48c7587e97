// Integration check of a converted model against its source checkpoint:
//   roundtrip_check HF_DIR MODEL.gguf
// 1. the strict loader accepts the file;
// 2. serialising the parsed metadata and tensors again gives the file back bit for bit;
// 3. every tensor equals its source: BF16 and F32 exactly (F32 norms are exact upcasts of
//    BF16), quantized projections within the format's error bound.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "core/mapped_file.h"
#include "format/gguf.h"
#include "format/quant.h"
#include "format/safetensors.h"
#include "model/gguf_schema.h"
#include "model/model.h"

namespace {

using namespace kipp;

int failures = 0;

void fail(const std::string& message) {
  std::fprintf(stderr, "FAIL: %s\n", message.c_str());
  ++failures;
}

std::vector<float> source_as_f32(const SafetensorsTensor& tensor, std::span<const uint8_t> bytes) {
  std::vector<float> out(tensor.element_count());
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t half_bits;
    switch (tensor.dtype) {
      case SafetensorsDtype::BF16:
        std::memcpy(&half_bits, bytes.data() + 2 * i, 2);
        out[i] = bf16_to_f32(half_bits);
        break;
      case SafetensorsDtype::F16:
        std::memcpy(&half_bits, bytes.data() + 2 * i, 2);
        out[i] = f16_to_f32(half_bits);
        break;
      default: std::memcpy(&out[i], bytes.data() + 4 * i, 4);
    }
  }
  return out;
}

std::vector<float> gguf_as_f32(const GgufTensorInfo& tensor, std::span<const uint8_t> bytes) {
  const size_t count = tensor.element_count();
  std::vector<float> out(count);
  switch (tensor.type) {
    case GgmlType::F32: std::memcpy(out.data(), bytes.data(), count * 4); break;
    case GgmlType::BF16:
      for (size_t i = 0; i < count; ++i) {
        uint16_t bits;
        std::memcpy(&bits, bytes.data() + 2 * i, 2);
        out[i] = bf16_to_f32(bits);
      }
      break;
    case GgmlType::Q8_0: {
      std::vector<BlockQ8_0> blocks(count / kQuantBlock);
      std::memcpy(blocks.data(), bytes.data(), bytes.size());
      dequantize_q8_0(blocks.data(), out.data(), count);
      break;
    }
    default: {
      std::vector<BlockAffine4> blocks(count / kQuantBlock);
      std::memcpy(blocks.data(), bytes.data(), bytes.size());
      dequantize_affine4(blocks.data(), out.data(), count);
    }
  }
  return out;
}

void check_rewrite_is_identical(const GgufFile& file, std::span<const uint8_t> original) {
  auto bytes = reserialize_gguf(file);
  if (!bytes.ok()) return fail("re-serialising: " + bytes.message());
  if (bytes->size() != original.size() || std::memcmp(bytes->data(), original.data(), original.size()) != 0) {
    fail("re-serialised GGUF differs from the file (" + std::to_string(bytes->size()) + " vs " +
         std::to_string(original.size()) + " bytes)");
  }
}

void check_tensors_match_source(const Model& model, const SafetensorsCheckpoint& source) {
  const auto specs = expected_tensors(model.config(), model.provenance().scheme);
  for (const auto& spec : specs) {
    const SafetensorsTensor* src = source.find(spec.hf_name);
    const GgufTensorInfo* dst = model.gguf().find_tensor(spec.gguf_name);
    if (src == nullptr || dst == nullptr) {
      fail("tensor " + spec.gguf_name + " missing");
      continue;
    }
    const auto expected = source_as_f32(*src, source.data(spec.hf_name));
    const auto actual = gguf_as_f32(*dst, model.gguf().tensor_data(*dst));
    if (expected.size() != actual.size()) {
      fail(spec.gguf_name + ": element count differs");
      continue;
    }
    double error = 0, energy = 0;
    size_t exact_mismatches = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
      const double diff = double(actual[i]) - double(expected[i]);
      error += diff * diff;
      energy += double(expected[i]) * expected[i];
      exact_mismatches += std::memcmp(&actual[i], &expected[i], 4) != 0;
    }
    const double nmse = energy > 0 ? error / energy : error;
    if (dst->type == GgmlType::BF16 || dst->type == GgmlType::F32) {
      if (exact_mismatches != 0) fail(spec.gguf_name + ": " + std::to_string(exact_mismatches) + " values differ");
    } else {
      const double bound = dst->type == GgmlType::Q8_0 ? 1e-4 : 2e-2;
      if (!(nmse <= bound)) fail(spec.gguf_name + ": NMSE " + std::to_string(nmse) + " above " + std::to_string(bound));
    }
  }
  std::printf("compared %zu tensors with the source checkpoint\n", specs.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: roundtrip_check HF_DIR MODEL.gguf\n");
    return 2;
  }
  auto model = Model::open(argv[2]);
  if (!model.ok()) {
    std::fprintf(stderr, "FAIL: %s\n", model.message().c_str());
    return 1;
  }
  auto mapping = MappedFile::open(argv[2]);
  auto source = SafetensorsCheckpoint::open_dir(argv[1]);
  if (!mapping.ok() || !source.ok()) {
    std::fprintf(stderr, "FAIL: cannot open inputs\n");
    return 1;
  }
  check_rewrite_is_identical(model->gguf(), mapping->bytes());
  check_tensors_match_source(*model, *source);
  if (failures == 0) std::printf("OK: %s round-trips and matches %s\n", argv[2], argv[1]);
  return failures == 0 ? 0 : 1;
}
