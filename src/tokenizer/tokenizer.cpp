#include "tokenizer/tokenizer.h"

#include <cstdio>
#include <unordered_map>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/pretokenizer_pattern.h"
#include "tokenizer/utf8.h"

namespace kipp {
namespace {

std::string hex_byte(uint8_t byte) {
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "0x%02X", byte);
  return buffer;
}

std::string quoted(std::string_view text) { return "'" + std::string(text) + "'"; }

// The vocabulary checked token by token: what each id decodes to, its type, and the ids of
// the normal (byte-level) and added tokens by their text (views into the metadata).
struct Vocabulary {
  std::vector<std::string> bytes;
  std::vector<TokenType> types;
  std::unordered_map<std::string_view, uint32_t> normal_ids;  // byte-level string -> id
  std::unordered_map<std::string_view, uint32_t> added_ids;   // added token content -> id
};

Expected<Vocabulary> read_vocabulary(const TokenizerMetadata& metadata) {
  const size_t vocab = metadata.tokens.size();
  Vocabulary v;
  v.bytes.resize(vocab);
  v.types.resize(vocab);
  v.normal_ids.reserve(vocab);
  for (uint32_t id = 0; id < vocab; ++id) {
    const std::string& piece = metadata.tokens[id];
    const int32_t type = metadata.token_types[id];
    v.types[id] = static_cast<TokenType>(type);
    switch (static_cast<TokenType>(type)) {
      case TokenType::Normal: {
        auto decoded = byte_level::decode(piece);
        if (piece.empty() || !decoded) {
          return make_error("token " + std::to_string(id) + " " + quoted(piece) +
                            " is not a byte-level string (each character must stand for one byte)");
        }
        if (!v.normal_ids.emplace(piece, id).second) {
          return make_error("token " + std::to_string(id) + " " + quoted(piece) + " repeats token " +
                            std::to_string(v.normal_ids[piece]));
        }
        v.bytes[id] = std::move(*decoded);
        break;
      }
      case TokenType::Control:
      case TokenType::UserDefined:
        if (piece.empty()) return make_error("added token " + std::to_string(id) + " is empty");
        if (utf8::first_invalid_byte(piece)) {
          return make_error("added token " + std::to_string(id) + " is not valid UTF-8");
        }
        if (!v.added_ids.emplace(piece, id).second) {
          return make_error("added token " + std::to_string(id) + " " + quoted(piece) + " repeats added token " +
                            std::to_string(v.added_ids[piece]));
        }
        v.bytes[id] = piece;  // verbatim: what the text held when it was matched
        break;
      case TokenType::Unused: break;  // a padding slot: decodes to nothing, as an id unknown to Hugging Face does
      default:
        return make_error("token " + std::to_string(id) + " " + quoted(piece) + " has type " + std::to_string(type) +
                          ", which a byte-level BPE vocabulary does not use (1 normal, 3 control, 4 user-defined, "
                          "5 unused)");
    }
  }
  return v;
}

// The ids of the 256 single-byte tokens, which every byte-level BPE vocabulary holds.
Expected<std::array<uint32_t, 256>> byte_token_ids(const std::unordered_map<std::string_view, uint32_t>& normal_ids) {
  std::array<uint32_t, 256> byte_ids{};
  for (uint32_t b = 0; b < 256; ++b) {
    const auto found = normal_ids.find(byte_level::byte_to_text(static_cast<uint8_t>(b)));
    if (found == normal_ids.end()) {
      return make_error("the vocabulary lacks the token " + quoted(byte_level::byte_to_text(static_cast<uint8_t>(b))) +
                        " for byte " + hex_byte(static_cast<uint8_t>(b)) +
                        "; a byte-level BPE vocabulary needs all 256");
    }
    byte_ids[b] = found->second;
  }
  return byte_ids;
}

// The merges by (left id, right id), each naming tokens of the vocabulary.
Expected<std::unordered_map<uint64_t, BpeModel::Merge>> read_merges(
    const std::vector<std::string>& ranked, const std::unordered_map<std::string_view, uint32_t>& normal_ids) {
  std::unordered_map<uint64_t, BpeModel::Merge> merges;
  merges.reserve(ranked.size());
  std::string joined;
  for (size_t rank = 0; rank < ranked.size(); ++rank) {
    const std::string& merge = ranked[rank];
    const auto describe = [&] { return "merge rank " + std::to_string(rank) + " " + quoted(merge); };
    const size_t space = merge.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == merge.size() ||
        merge.find(' ', space + 1) != std::string::npos) {
      return make_error(describe() + " is not two byte-level tokens separated by one space");
    }
    const std::string_view left(merge.data(), space);
    const std::string_view right(merge.data() + space + 1, merge.size() - space - 1);
    joined.assign(left);
    joined.append(right);
    const auto left_id = normal_ids.find(left);
    const auto right_id = normal_ids.find(right);
    const auto joined_id = normal_ids.find(joined);
    if (left_id == normal_ids.end()) return make_error(describe() + ": " + quoted(left) + " is not in the vocabulary");
    if (right_id == normal_ids.end())
      return make_error(describe() + ": " + quoted(right) + " is not in the vocabulary");
    if (joined_id == normal_ids.end()) {
      return make_error(describe() + ": the merged token " + quoted(joined) + " is not in the vocabulary");
    }
    const auto [existing, inserted] = merges.emplace(BpeModel::pair_key(left_id->second, right_id->second),
                                                     BpeModel::Merge{static_cast<uint32_t>(rank), joined_id->second});
    if (!inserted) {
      return make_error(describe() + " repeats merge rank " + std::to_string(existing->second.rank));
    }
  }
  return merges;
}

}  // namespace

struct Tokenizer::Impl {
  std::vector<std::string> pieces;  // vocabulary strings as stored
  std::vector<std::string> bytes;   // what each id decodes to (empty for unused slots)
  std::vector<TokenType> types;
  AddedTokenMatcher added;
  Pretokenizer pretokenizer;
  BpeModel bpe;

  Impl(Pretokenizer p, BpeModel b) : pretokenizer(std::move(p)), bpe(std::move(b)) {}

  // Normal text (no added tokens in it): NFC, split, BPE per piece.
  Status encode_text(std::string_view text, std::vector<uint32_t>& ids) const {
    std::string storage;
    const std::string_view normalized = nfc(text, storage);
    struct Context {
      const BpeModel* bpe;
      std::vector<uint32_t>* ids;
    } context{&bpe, &ids};
    return pretokenizer.split(
        normalized,
        [](void* raw, std::string_view piece) {
          auto* c = static_cast<Context*>(raw);
          c->bpe->encode_piece(piece, *c->ids);
        },
        &context);
  }
};

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Expected<Tokenizer> Tokenizer::create(const TokenizerMetadata& metadata) {
  if (metadata.model != "gpt2") {
    return make_error("tokenizer model is " + quoted(metadata.model) + "; Kipp implements byte-level BPE ('gpt2')");
  }
  if (metadata.pre != "qwen2") {
    return make_error("tokenizer pre-tokenizer is " + quoted(metadata.pre) + "; Kipp implements 'qwen2'");
  }
  const size_t vocab = metadata.tokens.size();
  if (vocab == 0 || vocab >= UINT32_MAX)
    return make_error("tokenizer vocabulary has " + std::to_string(vocab) + " tokens");
  if (metadata.token_types.size() != vocab) {
    return make_error("tokenizer has " + std::to_string(vocab) + " tokens but " +
                      std::to_string(metadata.token_types.size()) + " token types");
  }

  KIPP_ASSIGN_OR_RETURN(Vocabulary vocabulary, read_vocabulary(metadata));
  KIPP_ASSIGN_OR_RETURN(const auto byte_ids, byte_token_ids(vocabulary.normal_ids));
  KIPP_ASSIGN_OR_RETURN(auto merges, read_merges(metadata.merges, vocabulary.normal_ids));
  KIPP_ASSIGN_OR_RETURN(auto pretokenizer, Pretokenizer::create(kQwen2PretokenizerPattern));
  auto impl = std::make_unique<Impl>(std::move(pretokenizer), BpeModel(byte_ids, std::move(merges)));
  for (const auto& [content, id] : vocabulary.added_ids) impl->added.add(content, id);
  impl->pieces = metadata.tokens;
  impl->bytes = std::move(vocabulary.bytes);
  impl->types = std::move(vocabulary.types);
  return Tokenizer(std::move(impl));
}

Expected<std::vector<uint32_t>> Tokenizer::encode(std::string_view text, SpecialTokens special) const {
  if (const auto bad = utf8::first_invalid_byte(text)) {
    return make_error("invalid UTF-8 at byte offset " + std::to_string(*bad) + " (byte " +
                      hex_byte(static_cast<uint8_t>(text[*bad])) + ")");
  }
  std::vector<uint32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (special == SpecialTokens::PlainText || impl_->added.empty()) {
    KIPP_RETURN_IF_ERROR(impl_->encode_text(text, ids));
    return ids;
  }
  Status status = ok_status();
  impl_->added.scan(
      text,
      [&](size_t start, size_t length) {
        if (status.ok()) status = impl_->encode_text(text.substr(start, length), ids);
      },
      [&](uint32_t id) { ids.push_back(id); });
  KIPP_RETURN_IF_ERROR(status);
  return ids;
}

Expected<std::string> Tokenizer::decode(std::span<const uint32_t> ids) const {
  size_t total = 0;
  for (const uint32_t id : ids) {
    if (id >= impl_->bytes.size()) {
      return make_error("unknown token id " + std::to_string(id) + " (the vocabulary has " +
                        std::to_string(impl_->bytes.size()) + " tokens)");
    }
    total += impl_->bytes[id].size();
  }
  std::string out;
  out.reserve(total);
  for (const uint32_t id : ids) out.append(impl_->bytes[id]);
  return out;
}

Expected<std::string> Tokenizer::token_to_bytes(uint32_t id) const {
  if (id >= impl_->bytes.size()) {
    return make_error("unknown token id " + std::to_string(id) + " (the vocabulary has " +
                      std::to_string(impl_->bytes.size()) + " tokens)");
  }
  return impl_->bytes[id];
}

Expected<std::string> Tokenizer::token_to_piece(uint32_t id) const {
  if (id >= impl_->pieces.size()) {
    return make_error("unknown token id " + std::to_string(id) + " (the vocabulary has " +
                      std::to_string(impl_->pieces.size()) + " tokens)");
  }
  return impl_->pieces[id];
}

uint32_t Tokenizer::vocab_size() const { return static_cast<uint32_t>(impl_->pieces.size()); }

bool Tokenizer::is_added_token(uint32_t id) const {
  return id < impl_->types.size() &&
         (impl_->types[id] == TokenType::Control || impl_->types[id] == TokenType::UserDefined);
}

bool Tokenizer::is_special_token(uint32_t id) const {
  return id < impl_->types.size() && impl_->types[id] == TokenType::Control;
}

Expected<std::string> IncrementalDecoder::push(uint32_t id) {
  KIPP_ASSIGN_OR_RETURN(const std::string bytes, tokenizer_->token_to_bytes(id));
  pending_ += bytes;
  std::string out;
  const size_t consumed = utf8::append_lossy(pending_, /*keep_incomplete_tail=*/true, out);
  pending_.erase(0, consumed);
  return out;
}

std::string IncrementalDecoder::finish() {
  std::string out;
  utf8::append_lossy(pending_, /*keep_incomplete_tail=*/false, out);
  pending_.clear();
  return out;
}

}  // namespace kipp
