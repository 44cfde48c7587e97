// The pre-tokenized cache: a dataset's records tokenized once into shards of ids with their loss
// bits, plus an index, in a folder named by a hash of everything the tokens depend on (input
// files with sizes and modification times, format options, tokenizer, shuffle). Repeated runs
// over the same data open it instead of tokenizing again. Built in a temporary folder that is
// renamed into place, so an interrupted build leaves nothing a later run would trust.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "core/status.h"
#include "data/record_tokens.h"
#include "data/records.h"
#include "data/training_tokenizer.h"

namespace kipp::data {

// A stored token: the id in the low 31 bits; this bit set when, as a target, it carries no loss.
inline constexpr uint32_t kNoLossBit = 0x80000000u;

struct CacheSource {
  std::vector<std::string> inputs;  // files, globs or folders
  DatasetOptions dataset;
  RecordTokenOptions tokens;
  // Raw little-endian token files instead of records: nanoGPT's bare ids, or llm.c's files with
  // their 1024-byte header (recognised by its magic, checked against raw_type and the size).
  // Concatenated as they are; every id must be below the tokenizer's vocabulary.
  bool raw_tokens = false;
  TokenFileType raw_type = TokenFileType::U16;
  // Documents mixed at once before packing (a seeded shuffle buffer); 0 or 1 keeps file order.
  uint32_t shuffle_buffer = 0;
  uint64_t shuffle_seed = 0;
};

struct CacheStats {
  uint64_t files = 0;
  uint64_t records = 0;
  uint64_t malformed = 0;   // unreadable records, and records the tokenizer or chat format refused
  uint64_t all_masked = 0;  // conversations with no assistant token, skipped
  uint64_t documents = 0;
  uint64_t tokens = 0;
  uint64_t counted = 0;  // tokens that carry loss as targets
  uint64_t input_bytes = 0;
};

struct CacheProgress {
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
  uint64_t tokens = 0;
};

struct CacheEvents {
  std::function<void(const CacheProgress&)> on_progress;  // about twice a second while building
  std::function<void(const std::string&)> on_message;     // malformed records, "cache built"
  std::function<bool()> should_stop;                      // polled while building: true abandons it
};

class TokenCache {
 public:
  // Opens the cache of `source` under `cache_root`, building it first when it is missing.
  static Expected<TokenCache> open_or_build(const std::string& cache_root, const CacheSource& source,
                                            const TrainingTokenizer& tokenizer, const CacheEvents& events);

  uint64_t size() const { return size_; }
  // Copies stored tokens [begin, begin + count) (kNoLossBit included) into `out`.
  void read(uint64_t begin, uint64_t count, uint32_t* out) const;
  const CacheStats& stats() const { return stats_; }
  const std::string& dir() const { return dir_; }
  // XXH3 of the stored tokens: identifies the data itself, whatever the files' names or times.
  const std::string& content_hash() const { return content_hash_; }
  bool built_now() const { return built_now_; }

 private:
  static Expected<TokenCache> open_dir(const std::string& dir);

  std::string dir_;
  std::string content_hash_;
  std::vector<MappedFile> shards_;
  std::vector<uint64_t> shard_starts_;  // first token of each shard, then the total
  uint64_t size_ = 0;
  CacheStats stats_;
  bool built_now_ = false;
};

// $KIPP_CACHE_DIR/datasets, else $XDG_CACHE_HOME/kipp/datasets, else ~/.cache/kipp/datasets.
std::string default_cache_root();

}  // namespace kipp::data
