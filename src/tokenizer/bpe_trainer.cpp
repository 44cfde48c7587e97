#include "tokenizer/bpe_trainer.h"

#include <algorithm>
#include <array>
#include <queue>
#include <unordered_map>

#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/pretokenizer_pattern.h"
#include "tokenizer/utf8.h"

namespace kipp {
namespace {

constexpr uint32_t kByteTokens = 256;
constexpr uint32_t kProgressEvery = 256;  // merges between progress reports

// Byte -> its token id: the bytes in the order of their byte-level characters' code points.
struct ByteIds {
  std::array<uint32_t, 256> id_of_byte{};
  std::array<uint8_t, 256> byte_of_id{};

  ByteIds() {
    std::array<uint32_t, 256> bytes{};
    for (uint32_t b = 0; b < 256; ++b) bytes[b] = b;
    std::sort(bytes.begin(), bytes.end(), [](uint32_t a, uint32_t b) {
      return byte_level::byte_to_code_point(static_cast<uint8_t>(a)) <
             byte_level::byte_to_code_point(static_cast<uint8_t>(b));
    });
    for (uint32_t id = 0; id < 256; ++id) {
      byte_of_id[id] = static_cast<uint8_t>(bytes[id]);
      id_of_byte[bytes[id]] = id;
    }
  }
};

const ByteIds& byte_ids() {
  static const ByteIds instance;
  return instance;
}

std::vector<std::string> byte_vocab() {
  std::vector<std::string> vocab;
  vocab.reserve(kByteTokens);
  for (uint32_t id = 0; id < kByteTokens; ++id) vocab.emplace_back(byte_level::byte_to_text(byte_ids().byte_of_id[id]));
  return vocab;
}

uint64_t pair_key(uint32_t left, uint32_t right) { return (uint64_t{left} << 32) | right; }

// One adjacent pair: its weighted count and the words that hold (or once held) it.
struct PairSlot {
  uint32_t left = 0, right = 0;
  int64_t count = 0;
  std::vector<uint32_t> words;      // may repeat a word (once per time it gained the pair) or be stale
  uint32_t raised_at = UINT32_MAX;  // the merge step whose updates raised the count last
  bool merged = false;
};

struct HeapEntry {
  int64_t count;
  uint32_t left, right;
};

// The heap's "less": lower count, or on equal counts the larger (left, right), comes later.
struct HeapOrder {
  bool operator()(const HeapEntry& a, const HeapEntry& b) const {
    if (a.count != b.count) return a.count < b.count;
    return pair_key(a.left, a.right) > pair_key(b.left, b.right);
  }
};

class BpeState {
 public:
  BpeState(const WordCounts& counts, std::vector<std::string> vocab) : vocab_(std::move(vocab)) {
    for (uint32_t id = 0; id < vocab_.size(); ++id) ids_.emplace(vocab_[id], id);
    const ByteIds& bytes = byte_ids();
    size_t symbols = 0;
    for (const auto& [word, count] : counts.words) symbols += word.size();
    symbols_.reserve(symbols);
    for (const auto& [word, count] : counts.words) {
      if (word.empty() || count == 0) continue;
      offsets_.push_back(symbols_.size());
      lengths_.push_back(static_cast<uint32_t>(word.size()));
      weights_.push_back(static_cast<int64_t>(count));
      for (const char c : word) symbols_.push_back(bytes.id_of_byte[static_cast<uint8_t>(c)]);
    }
    stamps_.assign(offsets_.size(), UINT32_MAX);
    for (uint32_t w = 0; w < offsets_.size(); ++w) {
      const uint32_t* s = &symbols_[offsets_[w]];
      for (uint32_t i = 0; i + 1 < lengths_[w]; ++i) add(s[i], s[i + 1], weights_[w], w);
    }
    std::vector<HeapEntry> entries;
    entries.reserve(slots_.size());
    for (const PairSlot& slot : slots_) {
      if (slot.count > 0) entries.push_back({slot.count, slot.left, slot.right});
    }
    heap_ = std::priority_queue<HeapEntry, std::vector<HeapEntry>, HeapOrder>(HeapOrder{}, std::move(entries));
  }

  // Learns merges until the vocabulary has `target` entries or no pair of at least
  // `min_frequency` is left; returns false in the second case.
  bool run(uint32_t target, uint64_t min_frequency, const BpeProgressCallback& progress) {
    const uint64_t wanted = target > vocab_.size() ? target - vocab_.size() : 0;
    const size_t start = vocab_.size();
    uint32_t since_report = 0;
    while (vocab_.size() < target) {
      if (heap_.empty()) return false;
      const HeapEntry top = heap_.top();
      heap_.pop();
      const auto found = slot_of_.find(pair_key(top.left, top.right));
      const int64_t current = slots_[found->second].count;
      if (current <= 0) continue;
      if (current != top.count) {  // stale: back in with the count it has now
        heap_.push({current, top.left, top.right});
        continue;
      }
      if (static_cast<uint64_t>(current) < std::max<uint64_t>(min_frequency, 1)) return false;
      merge(found->second);
      if (progress && ++since_report == kProgressEvery) {
        since_report = 0;
        progress({BpeTrainingProgress::Phase::Merging, vocab_.size() - start, wanted});
      }
    }
    return true;
  }

  std::vector<std::string> take_vocab() { return std::move(vocab_); }
  std::vector<std::pair<uint32_t, uint32_t>> take_merges() { return std::move(merges_); }

 private:
  uint32_t slot(uint32_t left, uint32_t right) {
    const auto [it, inserted] = slot_of_.try_emplace(pair_key(left, right), static_cast<uint32_t>(slots_.size()));
    if (inserted) {
      slots_.emplace_back();
      slots_.back().left = left;
      slots_.back().right = right;
    }
    return it->second;
  }

  // Adds `delta` occurrences of (left, right) in word `word`.
  void add(uint32_t left, uint32_t right, int64_t delta, uint32_t word) {
    const uint32_t index = slot(left, right);
    PairSlot& s = slots_[index];
    s.count += delta;
    if (delta > 0) {
      if (s.words.empty() || s.words.back() != word) s.words.push_back(word);
      if (s.raised_at != step_) {
        s.raised_at = step_;
        raised_.push_back(index);
      }
    }
  }

  // Merges every occurrence of the slot's pair, left to right within each word.
  void merge(uint32_t merged_slot) {
    const uint32_t a = slots_[merged_slot].left;
    const uint32_t b = slots_[merged_slot].right;
    std::string text = vocab_[a] + vocab_[b];
    uint32_t c;
    if (const auto it = ids_.find(text); it != ids_.end()) {
      c = it->second;  // another pair spelled this token first: same id, no new entry
    } else {
      c = static_cast<uint32_t>(vocab_.size());
      ids_.emplace(text, c);
      vocab_.push_back(std::move(text));
    }
    if (!slots_[merged_slot].merged) merges_.emplace_back(a, b);
    slots_[merged_slot].merged = true;
    ++step_;
    raised_.clear();
    const std::vector<uint32_t> words = std::move(slots_[merged_slot].words);
    slots_[merged_slot].words = {};
    for (const uint32_t w : words) {
      if (stamps_[w] == step_) continue;
      stamps_[w] = step_;
      merge_in_word(w, a, b, c);
    }
    for (const uint32_t raised : raised_) {
      const PairSlot& s = slots_[raised];
      if (s.count > 0) heap_.push({s.count, s.left, s.right});
    }
  }

  // Rewrites the word in place (it only shrinks) and updates the counts of the pairs next to
  // each occurrence: (x a)(a b)(b y) become (x c)(c y); for "a b a b", (b a) goes once and
  // (c c) comes once.
  void merge_in_word(uint32_t w, uint32_t a, uint32_t b, uint32_t c) {
    uint32_t* s = &symbols_[offsets_[w]];
    const uint32_t n = lengths_[w];
    const int64_t weight = weights_[w];
    uint32_t out = 0;
    uint32_t previous = 0;  // the original symbol before position i
    bool previous_merged = false;
    for (uint32_t i = 0; i < n;) {
      if (i + 1 < n && s[i] == a && s[i + 1] == b) {
        if (out > 0) {
          if (!previous_merged) add(previous, a, -weight, w);  // else the previous occurrence took (b a)
          add(s[out - 1], c, weight, w);
        }
        add(a, b, -weight, w);
        if (i + 2 < n) {
          const uint32_t next = s[i + 2];
          add(b, next, -weight, w);
          const bool next_merges = i + 3 < n && next == a && s[i + 3] == b;
          if (!next_merges) add(c, next, weight, w);  // else the next occurrence adds (c c)
        }
        s[out++] = c;
        previous = b;
        previous_merged = true;
        i += 2;
      } else {
        previous = s[i];
        s[out++] = s[i];
        previous_merged = false;
        i += 1;
      }
    }
    lengths_[w] = out;
  }

  std::vector<std::string> vocab_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<std::pair<uint32_t, uint32_t>> merges_;

  // Words as symbol runs in one array (a word only shrinks, in place).
  std::vector<uint32_t> symbols_;
  std::vector<size_t> offsets_;
  std::vector<uint32_t> lengths_;
  std::vector<int64_t> weights_;
  std::vector<uint32_t> stamps_;  // the merge step that last rewrote the word

  std::unordered_map<uint64_t, uint32_t> slot_of_;
  std::vector<PairSlot> slots_;
  std::priority_queue<HeapEntry, std::vector<HeapEntry>, HeapOrder> heap_;
  uint32_t step_ = 0;
  std::vector<uint32_t> raised_;
};

}  // namespace

const std::vector<std::string>& default_special_tokens() {
  static const std::vector<std::string> tokens{"<pad>",  "<unk>",        "<bos>",     "<eos>",
                                               "<mask>", "<|im_start|>", "<|im_end|>"};
  return tokens;
}

Status check_bpe_options(const BpeMergeOptions& options) {
  const uint64_t minimum = uint64_t{kByteTokens} + options.special_tokens.size();
  if (options.vocab_size < minimum) {
    return make_error("--vocab-size " + std::to_string(options.vocab_size) + " is too small: the 256 byte tokens and " +
                      std::to_string(options.special_tokens.size()) + " special tokens need " +
                      std::to_string(minimum));
  }
  KIPP_ASSIGN_OR_RETURN(Pretokenizer pretokenizer, Pretokenizer::create(kQwen2PretokenizerPattern));
  for (size_t i = 0; i < options.special_tokens.size(); ++i) {
    const std::string& token = options.special_tokens[i];
    const std::string quoted = "'" + token + "'";
    if (token.empty()) return make_error("special token " + std::to_string(i) + " is empty");
    if (utf8::first_invalid_byte(token))
      return make_error("special token " + std::to_string(i) + " is not valid UTF-8");
    if (token.find_first_of("\r\n") != std::string::npos)
      return make_error("special token " + quoted + " holds a line break");
    for (size_t j = 0; j < i; ++j) {
      if (options.special_tokens[j] == token) return make_error("special token " + quoted + " is given twice");
    }
    std::vector<std::string_view> pieces;
    KIPP_RETURN_IF_ERROR(pretokenizer.split(token, pieces));
    if (pieces.size() < 2) {
      return make_error("special token " + quoted +
                        " is a single pre-token, so it could also be a byte or learned "
                        "token; use a form like '<name>'");
    }
  }
  return ok_status();
}

Expected<TrainedTokenizer> train_bpe(const WordCounts& counts, const BpeMergeOptions& options,
                                     const BpeProgressCallback& progress) {
  KIPP_RETURN_IF_ERROR(check_bpe_options(options));
  const auto target = static_cast<uint32_t>(options.vocab_size - options.special_tokens.size());
  BpeState state(counts, byte_vocab());
  TrainedTokenizer out;
  out.stopped_early = !state.run(target, options.min_frequency, progress);
  out.vocab = state.take_vocab();
  out.merges = state.take_merges();
  out.special_tokens = options.special_tokens;
  if (progress) {
    const uint64_t wanted = target - kByteTokens;
    progress({BpeTrainingProgress::Phase::Merging, out.vocab.size() - kByteTokens, wanted});
  }
  return out;
}

Expected<TrainedTokenizer> byte_level_tokenizer(const std::vector<std::string>& special_tokens) {
  BpeMergeOptions options{.vocab_size = static_cast<uint32_t>(kByteTokens + special_tokens.size()),
                          .special_tokens = special_tokens};
  KIPP_RETURN_IF_ERROR(check_bpe_options(options));
  TrainedTokenizer out;
  out.vocab = byte_vocab();
  out.special_tokens = special_tokens;
  return out;
}

}  // namespace kipp
