#include "convert/converter.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/files.h"
#include "core/half.h"
#include "format/gguf.h"
#include "format/quant.h"
#include "format/safetensors.h"
#include "model/content_hash.h"
#include "model/registry.h"
#include "model/tokenizer_metadata.h"
#include "tokenizer/hf_tokenizer.h"

namespace kipp {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

void report(const ConvertOptions& options, const std::string& line) {
  if (options.progress) options.progress(line);
}

Status resolve_registry_stamp(ConvertOptions& options) {
  const std::string manifest_path = join_path(options.input_dir, kPullManifestName);
  if (options.repository || options.revision || !file_exists(manifest_path)) return ok_status();
  KIPP_ASSIGN_OR_RETURN(const std::string text, read_text_file(manifest_path));
  const json manifest = json::parse(text, nullptr, false);
  if (manifest.is_discarded() || !manifest.contains("repository") || !manifest.contains("revision") ||
      !manifest["repository"].is_string() || !manifest["revision"].is_string()) {
    return make_error(manifest_path + ": expected an object with string fields repository and revision");
  }
  if (manifest.value("registry", false)) {
    options.repository = manifest["repository"].get<std::string>();
    options.revision = manifest["revision"].get<std::string>();
  }
  return ok_status();
}

// A registry stamp is only given to files that are provably the pinned ones: every weight
// file must have a recorded SHA-256 (an entry that lacks them cannot stamp anything yet),
// and every file with a recorded size or SHA-256 must match it.
Status verify_registry_files(const RegistryEntry& entry, const std::string& dir, const ConvertOptions& options) {
  for (const auto& item : fs::directory_iterator(dir)) {
    const std::string name = item.path().filename().string();
    if (item.path().extension() != ".safetensors") continue;
    const RegistryFile* recorded = entry.find_file(name);
    if (recorded == nullptr || !recorded->sha256) {
      return make_error(entry.id + ": the registry records no SHA-256 for " + name +
                        ", so it cannot be verified as the pinned checkpoint; convert without --repo for "
                        "local provenance, or complete registry/qwen3_dense.json");
    }
  }
  for (const auto& file : entry.files) {
    if (!file.size && !file.sha256) continue;
    const std::string path = join_path(dir, file.name);
    if (!file_exists(path)) {
      return make_error(entry.id + ": " + file.name + " is missing from " + dir + " (the registry records it)");
    }
    if (file.size) {
      KIPP_ASSIGN_OR_RETURN(const uint64_t size, file_size(path));
      if (size != *file.size) {
        return make_error(entry.id + ": " + file.name + " is " + std::to_string(size) + " bytes (the registry pins " +
                          std::to_string(*file.size) + "); not the pinned checkpoint");
      }
    }
    if (file.sha256) {
      report(options, "verifying " + file.name + " (SHA-256)");
      KIPP_ASSIGN_OR_RETURN(const std::string digest, sha256_file_hex(path));
      if (digest != *file.sha256) {
        return make_error(entry.id + ": " + file.name + " has SHA-256 " + digest + " (the registry pins " +
                          *file.sha256 + "); not the pinned checkpoint");
      }
    }
  }
  return ok_status();
}

Expected<std::vector<uint32_t>> read_stop_tokens(const std::string& dir, const ModelConfig& config) {
  const std::string path = join_path(dir, "generation_config.json");
  std::vector<uint32_t> stops;
  if (file_exists(path)) {
    KIPP_ASSIGN_OR_RETURN(const std::string text, read_text_file(path));
    const json generation = json::parse(text, nullptr, false);
    if (generation.is_discarded() || !generation.is_object()) return make_error(path + ": not a JSON object");
    const auto eos = generation.find("eos_token_id");
    if (eos != generation.end()) {
      const json items = eos->is_array() ? *eos : json::array({*eos});
      for (const json& item : items) {
        if (!item.is_number_unsigned() || item.get<uint64_t>() >= config.vocab_size) {
          return make_error(path + ": eos_token_id entry " + item.dump() + " is not a token id");
        }
        stops.push_back(item.get<uint32_t>());
      }
    }
  }
  if (stops.empty()) stops.push_back(config.eos_token_id);
  return stops;
}

std::vector<uint64_t> reversed(const std::vector<uint64_t>& shape) { return {shape.rbegin(), shape.rend()}; }

// Source elements as FP32 (the source is BF16, F16 or F32).
void to_f32(const SafetensorsTensor& source, std::span<const uint8_t> bytes, std::vector<float>& out) {
  const size_t count = source.element_count();
  out.resize(count);
  switch (source.dtype) {
    case SafetensorsDtype::BF16: {
      std::vector<uint16_t> bits(count);
      std::memcpy(bits.data(), bytes.data(), count * 2);
      bf16_to_f32_row(bits.data(), out.data(), count);
      break;
    }
    case SafetensorsDtype::F16: {
      std::vector<uint16_t> bits(count);
      std::memcpy(bits.data(), bytes.data(), count * 2);
      f16_to_f32_row(bits.data(), out.data(), count);
      break;
    }
    default: std::memcpy(out.data(), bytes.data(), count * 4);
  }
}

// Produces each GGUF tensor's bytes in file order and hands them to `sink`.
class TensorStream {
 public:
  TensorStream(const SafetensorsCheckpoint& checkpoint, std::vector<TensorSpec> specs)
      : checkpoint_(checkpoint), specs_(std::move(specs)) {}

  Status check_sources() const {
    for (const auto& spec : specs_) {
      const SafetensorsTensor* source = checkpoint_.find(spec.hf_name);
      if (source == nullptr) return make_error("checkpoint is missing tensor '" + spec.hf_name + "'");
      if (reversed(source->shape) != spec.dims) {
        return make_error("tensor '" + spec.hf_name + "': shape does not match config.json (expected " +
                          std::to_string(spec.dims.size() > 1 ? spec.dims[1] : spec.dims[0]) +
                          (spec.dims.size() > 1 ? " x " + std::to_string(spec.dims[0]) : std::string()) + ")");
      }
      if (source->dtype != SafetensorsDtype::BF16 && source->dtype != SafetensorsDtype::F16 &&
          source->dtype != SafetensorsDtype::F32) {
        return make_error("tensor '" + spec.hf_name + "': dtype " + std::string(safetensors_dtype_name(source->dtype)) +
                          " (expected BF16, F16 or F32)");
      }
    }
    return ok_status();
  }

  // Calls begin(spec) then part(bytes) one or more times per tensor, in file order. Tensors
  // stored unchanged go out in pieces straight from the mapping, whose pages are dropped as
  // soon as they are consumed, so RSS stays near one piece rather than the largest tensor.
  template <typename Begin, typename Part>
  Status run(Begin&& begin, Part&& part) {
    constexpr size_t kPiece = size_t{32} << 20;
    for (const auto& spec : specs_) {
      const SafetensorsTensor* source = checkpoint_.find(spec.hf_name);
      const std::span<const uint8_t> bytes = checkpoint_.data(spec.hf_name);
      KIPP_RETURN_IF_ERROR(begin(spec));
      if (spec.type == GgmlType::BF16 && source->dtype == SafetensorsDtype::BF16) {
        for (size_t offset = 0; offset < bytes.size(); offset += kPiece) {
          const auto piece = bytes.subspan(offset, std::min(kPiece, bytes.size() - offset));
          KIPP_RETURN_IF_ERROR(part(piece));
          drop_mapped_pages(piece);
        }
      } else {
        KIPP_RETURN_IF_ERROR(part(encode(spec, *source, bytes)));
        drop_mapped_pages(bytes);
      }
    }
    return ok_status();
  }

 private:
  std::span<const uint8_t> encode(const TensorSpec& spec, const SafetensorsTensor& source,
                                  std::span<const uint8_t> bytes) {
    to_f32(source, bytes, floats_);
    const size_t count = floats_.size();
    switch (spec.type) {
      case GgmlType::F32: return as_bytes(floats_.data(), count * sizeof(float));
      case GgmlType::BF16:
        halves_.resize(count);
        f32_to_bf16_row(floats_.data(), halves_.data(), count);
        return as_bytes(halves_.data(), count * 2);
      case GgmlType::Q8_0:
        q8_.resize(count / kQuantBlock);
        quantize_q8_0(floats_.data(), q8_.data(), count);
        return as_bytes(q8_.data(), q8_.size() * sizeof(BlockQ8_0));
      case GgmlType::Q4_1:
        q4_.resize(count / kQuantBlock);
        quantize_affine4(floats_.data(), q4_.data(), count);
        return as_bytes(q4_.data(), q4_.size() * sizeof(BlockAffine4));
      default: return {};
    }
  }

  static std::span<const uint8_t> as_bytes(const void* data, size_t size) {
    return {static_cast<const uint8_t*>(data), size};
  }

  const SafetensorsCheckpoint& checkpoint_;
  std::vector<TensorSpec> specs_;
  std::vector<float> floats_;
  std::vector<uint16_t> halves_;
  std::vector<BlockQ8_0> q8_;
  std::vector<BlockAffine4> q4_;
};

// memcmp in pieces, dropping the mapped pages behind it (the two can be 2 x 311 MB).
bool same_bytes_bounded_memory(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  if (a.size() != b.size()) return false;
  constexpr size_t kPiece = size_t{16} << 20;
  for (size_t offset = 0; offset < a.size(); offset += kPiece) {
    const size_t length = std::min(kPiece, a.size() - offset);
    const bool equal = std::memcmp(a.data() + offset, b.data() + offset, length) == 0;
    drop_mapped_pages(a.subspan(offset, length));
    drop_mapped_pages(b.subspan(offset, length));
    if (!equal) return false;
  }
  return true;
}

// Decides what to do with tensors the spec table does not list.
Expected<std::string> check_extra_tensors(const SafetensorsCheckpoint& checkpoint, const std::vector<TensorSpec>& specs,
                                          const ModelConfig& config, bool& dropped_lm_head) {
  std::vector<std::string> expected_names;
  for (const auto& spec : specs) expected_names.push_back(spec.hf_name);
  std::string notes;
  dropped_lm_head = false;
  for (const auto& name : checkpoint.tensor_names()) {
    if (std::find(expected_names.begin(), expected_names.end(), name) != expected_names.end()) continue;
    if (name == "lm_head.weight" && config.tie_embeddings) {
      // Some checkpoints (Qwen3-0.6B, 1.7B) ship lm_head although tie_word_embeddings is true.
      // transformers ties it to the embedding anyway, so the embedding is what the model uses.
      const auto head = checkpoint.data(name);
      const auto embedding = checkpoint.data("model.embed_tokens.weight");
      const bool identical = same_bytes_bounded_memory(head, embedding);
      dropped_lm_head = true;
      notes = identical ? "lm_head.weight equals the embedding (tie_word_embeddings=true): dropped"
                        : "lm_head.weight DIFFERS from the embedding but tie_word_embeddings=true: dropped, as "
                          "transformers ties the head to the embedding";
      continue;
    }
    return make_error("checkpoint has an unexpected tensor '" + name + "' (not part of a Qwen3 dense model with " +
                      std::to_string(config.num_layers) + " layers" + (config.tie_embeddings ? ", tied" : "") + ")");
  }
  return notes;
}

Expected<std::string> read_optional(const std::string& path) {
  if (!file_exists(path)) return std::string();
  return read_text_file(path);
}

// A registry stamp comes as a pair and excludes --chat-format, which is for local models.
Status check_stamp(const ConvertOptions& options) {
  if (options.repository.has_value() != options.revision.has_value()) {
    return make_error("a registry stamp needs both --repo and --revision");
  }
  if (options.chat_format && options.repository) {
    return make_error("--chat-format is for local models; a registry checkpoint uses its own chat template");
  }
  if (options.chat_format && options.chat_format->empty()) return make_error("--chat-format: empty format name");
  return ok_status();
}

// Where the model comes from: a registry checkpoint (its entry checked against the folder; the
// entry returned) or a local one (nullptr).
Expected<const RegistryEntry*> fill_provenance(const ConvertOptions& options, const ModelConfig& config,
                                               const std::string& config_text, Provenance& provenance) {
  const std::string& dir = options.input_dir;
  if (!options.repository) {
    provenance.kind = ProvenanceKind::Local;
    provenance.local_config = config_text;
    KIPP_ASSIGN_OR_RETURN(provenance.stop_token_ids, read_stop_tokens(dir, config));
    return nullptr;
  }
  const RegistryEntry* entry = Registry::builtin().find(*options.repository);
  if (entry == nullptr || entry->id != *options.repository) {
    return make_error("repository '" + *options.repository + "' is not in the registry (see `kipp registry`)");
  }
  if (entry->revision != *options.revision) {
    return make_error(entry->id + ": revision " + *options.revision + " is not the pinned revision " + entry->revision);
  }
  if (!(entry->config == config)) {
    return make_error(entry->id +
                      ": config.json does not match the registry entry (dimensions, ids or constants differ)");
  }
  KIPP_RETURN_IF_ERROR(verify_registry_files(*entry, dir, options));
  provenance.kind = ProvenanceKind::Registry;
  provenance.repository = entry->id;
  provenance.revision = entry->revision;
  provenance.variant = entry->variant;
  provenance.stop_token_ids = entry->stop_token_ids;
  return entry;
}

// Pass 1 hashes the converted tensors (the hash goes into the header, which precedes them).
Expected<std::string> hash_converted(TensorStream& stream, const ConvertOptions& options) {
  report(options, "hashing converted tensors");
  ContentHasher hasher;
  KIPP_RETURN_IF_ERROR(stream.run(
      [&](const TensorSpec& spec) {
        hasher.begin_tensor(spec.gguf_name, spec.type, spec.dims);
        return ok_status();
      },
      [&](std::span<const uint8_t> bytes) {
        hasher.add_data(bytes);
        return ok_status();
      }));
  return hasher.finish_hex();
}

// Pass 2 writes the GGUF file: the metadata, then the converted tensors.
Status write_gguf(TensorStream& stream, const std::vector<TensorSpec>& specs, const ConvertOptions& options,
                  const ModelConfig& config, const std::string& name, const TokenizerMetadata& tokenizer,
                  const Provenance& provenance) {
  GgufWriter writer;
  add_model_metadata(writer, config, name, options.scheme);
  add_tokenizer_metadata(writer, tokenizer);
  add_provenance_metadata(writer, provenance);
  if (options.chat_format) {
    writer.add_metadata(std::string(gguf_key::kKippChatFormat), GgufValue::string(*options.chat_format));
  }
  for (const auto& spec : specs) writer.add_tensor(spec.gguf_name, spec.dims, spec.type);
  KIPP_RETURN_IF_ERROR(writer.begin(options.output_path));
  size_t started = 0;
  const TensorSpec* current = nullptr;
  KIPP_RETURN_IF_ERROR(stream.run(
      [&](const TensorSpec& spec) {
        current = &spec;
        if (++started % 16 == 0 || started == specs.size()) {
          report(options, "writing tensor " + std::to_string(started) + "/" + std::to_string(specs.size()));
        }
        return ok_status();
      },
      [&](std::span<const uint8_t> bytes) { return writer.write_tensor_part(current->gguf_name, bytes); }));
  return writer.finish();
}

}  // namespace

Expected<ConvertReport> convert_checkpoint(const ConvertOptions& requested) {
  ConvertOptions options = requested;
  const std::string& dir = options.input_dir;
  if (!fs::is_directory(dir))
    return make_error(dir + " is not a directory (expected a Hugging Face checkpoint folder)");
  KIPP_RETURN_IF_ERROR(resolve_registry_stamp(options));
  KIPP_RETURN_IF_ERROR(check_stamp(options));

  ConvertReport report_out;
  KIPP_ASSIGN_OR_RETURN(const std::string config_text, read_text_file(join_path(dir, "config.json")));
  auto parsed_config = parse_hf_config(config_text);
  if (!parsed_config.ok()) return make_error(join_path(dir, "config.json") + ": " + parsed_config.message());
  ModelConfig config = parsed_config.value();

  Provenance& provenance = report_out.provenance;
  provenance.scheme = options.scheme;
  KIPP_ASSIGN_OR_RETURN(const RegistryEntry* entry, fill_provenance(options, config, config_text, provenance));

  HfTokenizerFiles tokenizer_files;
  KIPP_ASSIGN_OR_RETURN(tokenizer_files.tokenizer_json, read_text_file(join_path(dir, "tokenizer.json")));
  KIPP_ASSIGN_OR_RETURN(tokenizer_files.tokenizer_config_json, read_optional(join_path(dir, "tokenizer_config.json")));
  auto tokenizer = import_hf_tokenizer(tokenizer_files, config.vocab_size, config.bos_token_id, config.eos_token_id);
  if (!tokenizer.ok()) return make_error(dir + ": " + tokenizer.message());
  if (!entry) {
    provenance.variant =
        options.variant.value_or(tokenizer->chat_template || options.chat_format ? Variant::Instruct : Variant::Base);
  }

  report(options, "reading safetensors in " + dir);
  auto checkpoint = SafetensorsCheckpoint::open_dir(dir);
  if (!checkpoint.ok()) return checkpoint.error();
  const auto specs = expected_tensors(config, options.scheme);
  KIPP_ASSIGN_OR_RETURN(report_out.notes,
                        check_extra_tensors(*checkpoint, specs, config, provenance.dropped_tied_lm_head));
  TensorStream stream(*checkpoint, specs);
  KIPP_RETURN_IF_ERROR(stream.check_sources());
  KIPP_ASSIGN_OR_RETURN(provenance.content_hash, hash_converted(stream, options));

  const std::string name = !options.name.empty() ? options.name : entry ? entry->id : fs::path(dir).filename().string();
  KIPP_RETURN_IF_ERROR(write_gguf(stream, specs, options, config, name, *tokenizer, provenance));

  report_out.config = config;
  report_out.tensor_count = specs.size();
  KIPP_ASSIGN_OR_RETURN(report_out.output_bytes, file_size(options.output_path));
  return report_out;
}

}  // namespace kipp
