// Pre-token frequencies for BPE training (declared in bpe_trainer.h): the encoder's split
// (added tokens, NFC, the Qwen2 regex) run over streamed input on several threads.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <unordered_map>

#include "core/thread_pool.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/pretokenizer_pattern.h"
#include "tokenizer/utf8.h"

namespace kipp {
namespace {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const noexcept { return std::hash<std::string_view>{}(text); }
};
using CountTable = std::unordered_map<std::string, uint64_t, StringHash, std::equal_to<>>;

// One per thread: its own table, so counting needs no locks.
struct Counter {
  CountTable table;
  uint64_t pieces = 0;
  std::string nfc_storage;
};

// What every chunk needs: the split regex and the special tokens to leave out.
struct Splitter {
  Pretokenizer pretokenizer;
  AddedTokenMatcher specials;
};

Expected<std::unique_ptr<Splitter>> make_splitter(const std::vector<std::string>& special_tokens) {
  KIPP_ASSIGN_OR_RETURN(Pretokenizer pretokenizer, Pretokenizer::create(kQwen2PretokenizerPattern));
  auto splitter = std::make_unique<Splitter>(Splitter{std::move(pretokenizer), {}});
  for (size_t i = 0; i < special_tokens.size(); ++i)
    splitter->specials.add(special_tokens[i], static_cast<uint32_t>(i));
  return splitter;
}

void count_piece(void* context, std::string_view piece) {
  auto* counter = static_cast<Counter*>(context);
  ++counter->pieces;
  const auto it = counter->table.find(piece);
  if (it != counter->table.end()) {
    ++it->second;
  } else {
    counter->table.emplace(std::string(piece), 1);
  }
}

// `text` is valid UTF-8. Added tokens are cut out first (as the encoder does); each stretch
// between them is normalized and split on its own.
Status count_chunk(std::string_view text, const Splitter& splitter, Counter& counter) {
  auto count_stretch = [&](std::string_view stretch) {
    const std::string_view normalized = nfc(stretch, counter.nfc_storage);
    return splitter.pretokenizer.split(normalized, count_piece, &counter);
  };
  if (splitter.specials.empty()) return count_stretch(text);
  Status status = ok_status();
  splitter.specials.scan(
      text,
      [&](size_t start, size_t length) {
        if (status.ok()) status = count_stretch(text.substr(start, length));
      },
      [](uint32_t) {});
  return status;
}

std::string hex_byte(uint8_t byte) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%02X", byte);
  return text;
}

// Unicode White_Space beyond ASCII: U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029,
// U+202F, U+205F, U+3000.
bool is_non_ascii_white_space(uint32_t c) {
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

// The code point of the (valid) UTF-8 sequence at the start of `bytes`, or nothing.
std::optional<uint32_t> leading_code_point(std::string_view bytes) {
  bool needs_more = false;
  const size_t length = utf8::valid_sequence_length(bytes, &needs_more);
  if (length < 2) return std::nullopt;
  const auto byte = [&](size_t i) { return uint32_t(static_cast<uint8_t>(bytes[i])); };
  uint32_t c = byte(0) & (0xFFu >> (length + 1));
  for (size_t i = 1; i < length; ++i) c = (c << 6) | (byte(i) & 0x3F);
  return c;
}

// A point where the text may be cut without changing its pre-tokens: right after "\n" and
// before a character that is not white space. No alternative of the Qwen2 pattern matches a
// line break followed by anything but more whitespace, and "\n" (a starter that composes with
// nothing) blocks NFC from looking across it. Special tokens hold no line break. Letters of any
// script qualify, so text in any language splits into blocks for the counting threads.
bool is_cut_point(std::string_view text, size_t at) {
  if (at == 0 || at >= text.size() || text[at - 1] != '\n') return false;
  const auto next = static_cast<uint8_t>(text[at]);
  if (next < 0x80) return next >= 0x21 && next <= 0x7E;
  const std::optional<uint32_t> c = leading_code_point(text.substr(at, 4));
  return c && !is_non_ascii_white_space(*c);
}

// The first cut point at or after `from`, or npos.
size_t next_cut_point(std::string_view text, size_t from) {
  size_t at = from == 0 ? 0 : from - 1;
  while ((at = text.find('\n', at)) != std::string_view::npos) {
    if (is_cut_point(text, at + 1)) return at + 1;
    ++at;
  }
  return std::string_view::npos;
}

// The last cut point in `text`, or 0 when there is none.
size_t last_cut_point(std::string_view text) {
  size_t at = text.size();
  while (at > 0) {
    const size_t newline = text.rfind('\n', at - 1);
    if (newline == std::string_view::npos) return 0;
    if (is_cut_point(text, newline + 1)) return newline + 1;
    at = newline;
  }
  return 0;
}

// Counts `region` (whole lines of one input) on all threads. `origin` names the input and
// `offset` is the region's byte offset in it, for the error message.
Status count_region(std::string_view region, const std::string& origin, uint64_t offset, const Splitter& splitter,
                    ThreadPool& pool, std::vector<Counter>& counters) {
  std::vector<size_t> bounds{0};
  const size_t parts = pool.size();
  for (size_t part = 1; part < parts; ++part) {
    const size_t target = std::max(region.size() / parts * part, bounds.back() + 1);
    const size_t cut = next_cut_point(region, target);
    if (cut == std::string_view::npos || cut >= region.size()) break;
    bounds.push_back(cut);
  }
  bounds.push_back(region.size());
  const size_t chunks = bounds.size() - 1;
  std::vector<Status> results(chunks);
  std::vector<size_t> bad_byte(chunks, std::string_view::npos);
  pool.parallel_for(chunks, [&](size_t thread, size_t begin, size_t end) {
    for (size_t c = begin; c < end; ++c) {
      const std::string_view chunk = region.substr(bounds[c], bounds[c + 1] - bounds[c]);
      if (const auto bad = utf8::first_invalid_byte(chunk)) {
        bad_byte[c] = bounds[c] + *bad;
        continue;
      }
      results[c] = count_chunk(chunk, splitter, counters[thread]);
    }
  });
  for (size_t c = 0; c < chunks; ++c) {
    if (bad_byte[c] != std::string_view::npos) {
      return make_error(origin + ": invalid UTF-8 at byte offset " + std::to_string(offset + bad_byte[c]) + " (byte " +
                        hex_byte(static_cast<uint8_t>(region[bad_byte[c]])) + ")");
    }
    if (!results[c].ok()) return make_error(origin + ": " + results[c].message());
  }
  return ok_status();
}

// Merges the per-thread tables into one sorted list.
WordCounts collect(std::vector<Counter>& counters, uint64_t bytes) {
  std::sort(counters.begin(), counters.end(),
            [](const Counter& a, const Counter& b) { return a.table.size() > b.table.size(); });
  CountTable& all = counters[0].table;
  WordCounts out;
  out.bytes = bytes;
  out.pieces = counters[0].pieces;
  for (size_t t = 1; t < counters.size(); ++t) {
    out.pieces += counters[t].pieces;
    for (auto& [word, count] : counters[t].table) all[word] += count;
    CountTable().swap(counters[t].table);
  }
  out.words.reserve(all.size());
  for (auto& [word, count] : all) out.words.emplace_back(word, count);
  CountTable().swap(all);
  std::sort(out.words.begin(), out.words.end());
  return out;
}

}  // namespace

Expected<WordCounts> count_words_in_text(std::string_view text, const WordCountOptions& options) {
  KIPP_ASSIGN_OR_RETURN(auto splitter, make_splitter(options.special_tokens));
  ThreadPool pool(1);
  std::vector<Counter> counters(1);
  KIPP_RETURN_IF_ERROR(count_region(text, "text", 0, *splitter, pool, counters));
  return collect(counters, text.size());
}

Expected<WordCounts> count_words_in_files(const std::vector<std::string>& files, const WordCountOptions& options,
                                          const BpeProgressCallback& progress) {
  if (files.empty()) return make_error("no input files");
  uint64_t total = 0;
  for (const std::string& path : files) {
    std::FILE* probe = std::fopen(path.c_str(), "rb");
    if (probe == nullptr) return make_error("cannot read " + path + ": " + std::strerror(errno));
    std::fseek(probe, 0, SEEK_END);
    const long size = std::ftell(probe);
    std::fclose(probe);
    if (size > 0) total += static_cast<uint64_t>(size);
  }
  KIPP_ASSIGN_OR_RETURN(auto splitter, make_splitter(options.special_tokens));
  ThreadPool pool(options.threads);
  std::vector<Counter> counters(pool.size());
  const size_t block = std::max<size_t>(options.block_bytes, 1);
  uint64_t done = 0;
  if (progress) progress({BpeTrainingProgress::Phase::Counting, 0, total});
  for (const std::string& path : files) {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), std::fclose);
    if (!file) return make_error("cannot read " + path + ": " + std::strerror(errno));
    std::string buffer;
    uint64_t buffer_offset = 0;  // of buffer[0] in the file
    bool at_end = false;
    while (!at_end || !buffer.empty()) {
      if (!at_end) {
        const size_t old = buffer.size();
        buffer.resize(old + block);
        const size_t got = std::fread(buffer.data() + old, 1, block, file.get());
        buffer.resize(old + got);
        if (got < block) {
          if (std::ferror(file.get())) return make_error("cannot read " + path + ": " + std::strerror(errno));
          at_end = true;
        }
      }
      // Up to the last cut point; at the end everything. Without a cut point, read more.
      const size_t end = at_end ? buffer.size() : last_cut_point(buffer);
      if (end == 0) continue;
      KIPP_RETURN_IF_ERROR(
          count_region(std::string_view(buffer).substr(0, end), path, buffer_offset, *splitter, pool, counters));
      buffer.erase(0, end);
      buffer_offset += end;
      done += end;
      if (progress) progress({BpeTrainingProgress::Phase::Counting, std::min(done, total), total});
    }
  }
  return collect(counters, done);
}

}  // namespace kipp
