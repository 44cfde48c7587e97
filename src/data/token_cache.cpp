#include "data/token_cache.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "core/random.h"

namespace kipp::data {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kShardTokens = uint64_t(1) << 26;  // 256 MiB per shard file
constexpr int kCacheVersion = 1;
// A document this long streams straight to the shards instead of waiting in the shuffle buffer.
constexpr size_t kLongDocumentTokens = size_t(1) << 20;
constexpr size_t kShuffleBufferMaxTokens = size_t(1) << 24;

std::string shard_name(size_t index) {
  char name[32];
  std::snprintf(name, sizeof name, "tokens-%05zu.bin", index);
  return name;
}

class KeyHash {
 public:
  KeyHash() : state_(XXH3_createState()) { XXH3_64bits_reset(state_.get()); }
  void add(std::string_view text) {
    const uint64_t length = text.size();
    XXH3_64bits_update(state_.get(), &length, sizeof length);
    XXH3_64bits_update(state_.get(), text.data(), text.size());
  }
  void add(uint64_t value) { XXH3_64bits_update(state_.get(), &value, sizeof value); }
  void add_bytes(const void* data, size_t size) { XXH3_64bits_update(state_.get(), data, size); }
  std::string hex() {
    char out[17];
    std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(XXH3_64bits_digest(state_.get())));
    return out;
  }

 private:
  struct Free {
    void operator()(XXH3_state_t* state) const { XXH3_freeState(state); }
  };
  std::unique_ptr<XXH3_state_t, Free> state_;
};

Expected<std::string> cache_key(const CacheSource& source, const std::vector<std::string>& files,
                                const TrainingTokenizer& tokenizer) {
  KeyHash hash;
  hash.add(uint64_t(kCacheVersion));
  hash.add(tokenizer.fingerprint);
  hash.add(uint64_t(tokenizer.eos_id));
  hash.add(dataset_format_name(source.dataset.format));
  hash.add(source.dataset.text_field);
  hash.add(source.dataset.document_separator);
  hash.add(chat_format_name(source.tokens.chat_format));
  hash.add(uint64_t(source.raw_tokens) * 2 + uint64_t(source.raw_type == TokenFileType::U32));
  hash.add(uint64_t(source.shuffle_buffer > 1 ? source.shuffle_buffer : 0));
  hash.add(source.shuffle_buffer > 1 ? source.shuffle_seed : 0);
  for (const std::string& file : files) {
    struct stat info {};
    if (::stat(file.c_str(), &info) != 0) return make_error(file + ": " + std::strerror(errno));
    std::error_code error;
    hash.add(fs::absolute(file, error).string());
    hash.add(uint64_t(info.st_size));
    hash.add(uint64_t(info.st_mtim.tv_sec) * 1000000000ULL + uint64_t(info.st_mtim.tv_nsec));
  }
  return hash.hex();
}

// Stored tokens in order into shard files of kShardTokens each.
class ShardWriter {
 public:
  explicit ShardWriter(std::string dir) : dir_(std::move(dir)) {}

  Status append(const uint32_t* tokens, size_t count) {
    content_.add_bytes(tokens, count * sizeof(uint32_t));
    while (count > 0) {
      if (!file_ || in_shard_ == kShardTokens) KIPP_RETURN_IF_ERROR(next_shard());
      const size_t take = std::min<size_t>(count, kShardTokens - in_shard_);
      KIPP_RETURN_IF_ERROR(file_->write({reinterpret_cast<const uint8_t*>(tokens), take * sizeof(uint32_t)}));
      in_shard_ += take;
      total_ += take;
      tokens += take;
      count -= take;
    }
    return {};
  }

  Status finish() {
    if (file_) {
      KIPP_RETURN_IF_ERROR(file_->commit());
      counts_.push_back(in_shard_);
    }
    file_.reset();
    return {};
  }

  uint64_t total() const { return total_; }
  const std::vector<uint64_t>& shard_counts() const { return counts_; }
  std::string content_hash() { return content_.hex(); }

 private:
  Status next_shard() {
    KIPP_RETURN_IF_ERROR(finish());
    KIPP_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::create(join_path(dir_, shard_name(counts_.size()))));
    file_ = std::make_unique<AtomicFile>(std::move(file));
    in_shard_ = 0;
    return {};
  }

  std::string dir_;
  KeyHash content_;
  std::unique_ptr<AtomicFile> file_;
  uint64_t in_shard_ = 0, total_ = 0;
  std::vector<uint64_t> counts_;
};

// Whole documents wait in a buffer and leave it in a seeded random order, so packed windows mix
// documents from across the input instead of following file order.
class DocumentShuffle {
 public:
  DocumentShuffle(ShardWriter& out, uint32_t capacity, uint64_t seed) : out_(out), capacity_(capacity), seed_(seed) {}

  Status add(std::vector<uint32_t> document) {
    if (capacity_ <= 1 || document.size() >= kLongDocumentTokens) return out_.append(document.data(), document.size());
    buffered_tokens_ += document.size();
    buffer_.push_back(std::move(document));
    while (buffer_.size() >= capacity_ || buffered_tokens_ > kShuffleBufferMaxTokens) KIPP_RETURN_IF_ERROR(emit_one());
    return {};
  }

  Status drain() {
    while (!buffer_.empty()) KIPP_RETURN_IF_ERROR(emit_one());
    return {};
  }

 private:
  Status emit_one() {
    const size_t pick = size_t(counter_random(seed_, draws_++) % buffer_.size());
    std::swap(buffer_[pick], buffer_.back());
    const std::vector<uint32_t> document = std::move(buffer_.back());
    buffer_.pop_back();
    buffered_tokens_ -= document.size();
    return out_.append(document.data(), document.size());
  }

  ShardWriter& out_;
  uint32_t capacity_;
  uint64_t seed_;
  uint64_t draws_ = 0;
  std::vector<std::vector<uint32_t>> buffer_;
  size_t buffered_tokens_ = 0;
};

class ProgressTicker {
 public:
  explicit ProgressTicker(const CacheEvents& events) : events_(events) {}
  void tick(const CacheProgress& progress, bool force = false) {
    if (!events_.on_progress) return;
    const auto now = Clock::now();
    if (!force && now - last_ < std::chrono::milliseconds(500)) return;
    last_ = now;
    events_.on_progress(progress);
  }

 private:
  const CacheEvents& events_;
  Clock::time_point last_{};
};

Status build_from_records(const CacheSource& source, std::vector<std::string> files, const TrainingTokenizer& tokenizer,
                          const CacheEvents& events, ShardWriter& out, CacheStats& stats) {
  auto message = [&](const std::string& line) {
    if (events.on_message) events.on_message(line);
  };
  KIPP_ASSIGN_OR_RETURN(std::unique_ptr<RecordReader> reader,
                        RecordReader::open(std::move(files), source.dataset, message));
  DocumentShuffle shuffle(out, source.shuffle_buffer, source.shuffle_seed);
  ProgressTicker ticker(events);
  std::vector<uint32_t> document;
  bool streaming_document = false;  // a long document already partly written past the buffer
  // A finished document goes through the shuffle buffer, or straight on after its head.
  auto end_document = [&]() -> Status {
    if (streaming_document) {
      KIPP_RETURN_IF_ERROR(out.append(document.data(), document.size()));
      document.clear();
    } else if (!document.empty()) {
      KIPP_RETURN_IF_ERROR(shuffle.add(std::move(document)));
      document = {};
    }
    streaming_document = false;
    ++stats.documents;
    return {};
  };
  Record record;
  while (true) {
    if (events.should_stop && events.should_stop())
      return make_error("stopped while tokenizing the data; nothing was cached");
    KIPP_ASSIGN_OR_RETURN(bool more, reader->next(record));
    if (!more) break;
    auto tokens = tokenize_record(record, tokenizer, source.tokens);
    if (!tokens) {
      const std::string what = record.origin.to_string() + ": " + tokens.error().message;
      if (source.dataset.strict) return make_error(what);
      ++stats.malformed;
      message(what);
      // The document this piece belonged to ends here, so the next one does not run on from it.
      if (!document.empty() || streaming_document) {
        document.push_back(tokenizer.eos_id);
        KIPP_RETURN_IF_ERROR(end_document());
      }
      continue;
    }
    if (record.is_conversation() && !tokens->any_counted()) {
      ++stats.all_masked;
      continue;
    }
    for (size_t i = 0; i < tokens->ids.size(); ++i) {
      document.push_back(tokens->ids[i] | (tokens->counts[i] ? 0u : kNoLossBit));
      stats.counted += tokens->counts[i];
    }
    if (!record.ends_document && document.size() >= kLongDocumentTokens) {
      KIPP_RETURN_IF_ERROR(out.append(document.data(), document.size()));
      document.clear();
      streaming_document = true;
    }
    if (record.ends_document) KIPP_RETURN_IF_ERROR(end_document());
    ticker.tick({reader->stats().bytes, reader->total_bytes(), out.total()});
  }
  if (!document.empty() || streaming_document) KIPP_RETURN_IF_ERROR(end_document());
  KIPP_RETURN_IF_ERROR(shuffle.drain());
  stats.records = reader->stats().records;
  stats.malformed += reader->stats().malformed;
  stats.files = reader->stats().files;
  stats.input_bytes = reader->total_bytes();
  ticker.tick({stats.input_bytes, stats.input_bytes, out.total()}, true);
  return {};
}

// llm.c's token files start with a 256 x int32 header: magic 20240520, version (1: uint16 ids,
// 2: uint32 ids), token count. nanoGPT's .bin files are bare ids.
constexpr int32_t kLlmcMagic = 20240520;
constexpr uint64_t kLlmcHeaderBytes = 1024;

struct RawTokenFile {
  uint64_t skip = 0;   // header bytes
  uint64_t bytes = 0;  // id bytes after the header
};

Expected<RawTokenFile> inspect_raw_token_file(const std::string& file, size_t width) {
  KIPP_ASSIGN_OR_RETURN(uint64_t size, file_size(file));
  RawTokenFile out{0, size};
  if (size >= kLlmcHeaderBytes) {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> stream(std::fopen(file.c_str(), "rb"), &std::fclose);
    if (!stream) return make_error(file + ": " + std::strerror(errno));
    int32_t header[3] = {};
    if (std::fread(header, sizeof header, 1, stream.get()) != 1) return make_error(file + ": read error");
    if (header[0] == kLlmcMagic) {
      const size_t header_width = header[1] == 1 ? 2 : header[1] == 2 ? 4 : 0;
      if (header_width == 0)
        return make_error(file + ": llm.c token file of unknown version " + std::to_string(header[1]));
      if (header_width != width) {
        return make_error(file + ": an llm.c version " + std::to_string(header[1]) + " file holds " +
                          (header_width == 2 ? "uint16" : "uint32") + " ids; set data.token_dtype to match");
      }
      out = {kLlmcHeaderBytes, size - kLlmcHeaderBytes};
      if (header[2] < 0 || uint64_t(header[2]) * width != out.bytes) {
        return make_error(file + ": the llm.c header counts " + std::to_string(header[2]) +
                          " tokens but the file holds " + std::to_string(out.bytes / width));
      }
    }
  }
  if (out.bytes % width != 0) {
    return make_error(file + ": " + std::to_string(out.bytes) + " bytes is not a whole number of " +
                      std::to_string(width) + "-byte token ids");
  }
  return out;
}

Status build_from_raw_tokens(const CacheSource& source, const std::vector<std::string>& files,
                             const TrainingTokenizer& tokenizer, const CacheEvents& events, ShardWriter& out,
                             CacheStats& stats) {
  const size_t width = source.raw_type == TokenFileType::U32 ? 4 : 2;
  uint64_t total_bytes = 0;
  std::vector<RawTokenFile> layouts;
  for (const std::string& file : files) {
    KIPP_ASSIGN_OR_RETURN(RawTokenFile layout, inspect_raw_token_file(file, width));
    layouts.push_back(layout);
    total_bytes += layout.bytes;
  }
  ProgressTicker ticker(events);
  std::vector<uint8_t> block(size_t(1) << 22);
  std::vector<uint32_t> ids;
  uint64_t done = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    const std::string& file = files[f];
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> stream(std::fopen(file.c_str(), "rb"), &std::fclose);
    if (!stream) return make_error(file + ": " + std::strerror(errno));
    if (std::fseek(stream.get(), long(layouts[f].skip), SEEK_SET) != 0) return make_error(file + ": seek error");
    uint64_t position = 0;
    while (size_t got = std::fread(block.data(), 1, block.size(), stream.get())) {
      if (events.should_stop && events.should_stop())
        return make_error("stopped while reading the token files; nothing was cached");
      ids.resize(got / width);
      for (size_t i = 0; i < ids.size(); ++i) {
        uint32_t id = 0;
        std::memcpy(&id, block.data() + i * width, width);  // little-endian hosts only (x86-64, arm64)
        if (id >= tokenizer.vocab_size) {
          return make_error(file + ": token " + std::to_string(position + i) + " is id " + std::to_string(id) +
                            ", not below the vocabulary size " + std::to_string(tokenizer.vocab_size));
        }
        ids[i] = id;
      }
      KIPP_RETURN_IF_ERROR(out.append(ids.data(), ids.size()));
      position += ids.size();
      done += got;
      ticker.tick({done, total_bytes, out.total()});
    }
    if (std::ferror(stream.get())) return make_error(file + ": read error");
    ++stats.files;
  }
  stats.documents = files.size();
  stats.counted = out.total();
  stats.input_bytes = total_bytes;
  return {};
}

nlohmann::json stats_json(const CacheStats& stats) {
  return {{"files", stats.files},           {"records", stats.records},        {"malformed", stats.malformed},
          {"all_masked", stats.all_masked}, {"documents", stats.documents},    {"tokens", stats.tokens},
          {"counted", stats.counted},       {"input_bytes", stats.input_bytes}};
}

// Builds killed before they finished (a second Ctrl-C, kill -9) leave KEY.tmp-PID folders whose
// process is gone; they are never completed, so they are removed.
void remove_abandoned_builds(const std::string& cache_root) {
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(cache_root, error)) {
    const std::string name = entry.path().filename().string();
    const size_t at = name.rfind(".tmp-");
    if (at == std::string::npos) continue;
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + at + 5, &end, 10);
    if (pid <= 0 || *end != '\0' || pid == ::getpid()) continue;
    if (::kill(pid_t(pid), 0) != 0 && errno == ESRCH) fs::remove_all(entry.path(), error);
  }
}

}  // namespace

std::string default_cache_root() {
  if (const char* dir = std::getenv("KIPP_CACHE_DIR"); dir && *dir) return join_path(dir, "datasets");
  if (const char* dir = std::getenv("XDG_CACHE_HOME"); dir && *dir)
    return join_path(join_path(dir, "kipp"), "datasets");
  const char* home = std::getenv("HOME");
  return join_path(join_path(home && *home ? home : "/tmp", ".cache/kipp"), "datasets");
}

Expected<TokenCache> TokenCache::open_or_build(const std::string& cache_root, const CacheSource& source,
                                               const TrainingTokenizer& tokenizer, const CacheEvents& events) {
  KIPP_ASSIGN_OR_RETURN(std::vector<std::string> files, expand_inputs(source.inputs));
  KIPP_ASSIGN_OR_RETURN(std::string key, cache_key(source, files, tokenizer));
  const std::string dir = join_path(cache_root, key);
  if (file_exists(join_path(dir, "index.json"))) {
    KIPP_ASSIGN_OR_RETURN(TokenCache cache, open_dir(dir));
    // The cache was built leniently: strict mode must still see the malformed records.
    if (source.dataset.strict && cache.stats().malformed > 0) {
      return make_error(std::to_string(cache.stats().malformed) + " malformed records were skipped when " + dir +
                        " was built; strict mode refuses them (fix the data, or delete the cache to see them again)");
    }
    return cache;
  }

  std::error_code error;
  fs::create_directories(cache_root, error);
  if (error) return make_error("cannot create the dataset cache folder " + cache_root + ": " + error.message());
  remove_abandoned_builds(cache_root);
  const std::string temp = dir + ".tmp-" + std::to_string(::getpid());
  fs::remove_all(temp, error);
  fs::create_directories(temp, error);
  if (error) return make_error("cannot create " + temp + ": " + error.message());
  struct RemoveOnFailure {
    std::string path;
    ~RemoveOnFailure() {
      std::error_code ignored;
      if (!path.empty()) fs::remove_all(path, ignored);
    }
  } cleanup{temp};

  const auto began = Clock::now();
  ShardWriter out(temp);
  CacheStats stats;
  if (source.raw_tokens) {
    KIPP_RETURN_IF_ERROR(build_from_raw_tokens(source, files, tokenizer, events, out, stats));
  } else {
    KIPP_RETURN_IF_ERROR(build_from_records(source, files, tokenizer, events, out, stats));
  }
  KIPP_RETURN_IF_ERROR(out.finish());
  stats.tokens = out.total();
  if (stats.tokens == 0) {
    return make_error("the data gave no tokens (" + std::to_string(stats.records) + " records, " +
                      std::to_string(stats.malformed) + " malformed, " + std::to_string(stats.all_masked) +
                      " conversations without an assistant turn)");
  }
  nlohmann::json index = {
      {"version", kCacheVersion}, {"files", files}, {"stats", stats_json(stats)}, {"content_hash", out.content_hash()}};
  nlohmann::json shards = nlohmann::json::array();
  for (size_t i = 0; i < out.shard_counts().size(); ++i) {
    shards.push_back({{"file", shard_name(i)}, {"tokens", out.shard_counts()[i]}});
  }
  index["shards"] = shards;
  KIPP_RETURN_IF_ERROR(write_text_file_atomic(join_path(temp, "index.json"), index.dump(2) + "\n"));
  fs::rename(temp, dir, error);
  // Another process may have finished the same cache first; its copy is equally good.
  if (error && !file_exists(join_path(dir, "index.json"))) {
    return make_error("cannot move the dataset cache into " + dir + ": " + error.message());
  }
  if (!error) cleanup.path.clear();
  if (events.on_message) {
    char line[160];
    std::snprintf(line, sizeof line, "tokenized %llu records into %llu tokens in %.1f s (cache %s)",
                  static_cast<unsigned long long>(stats.records), static_cast<unsigned long long>(stats.tokens),
                  std::chrono::duration<double>(Clock::now() - began).count(), key.c_str());
    events.on_message(line);
  }
  KIPP_ASSIGN_OR_RETURN(TokenCache cache, open_dir(dir));
  cache.built_now_ = true;
  return cache;
}

Expected<TokenCache> TokenCache::open_dir(const std::string& dir) {
  const std::string index_path = join_path(dir, "index.json");
  KIPP_ASSIGN_OR_RETURN(std::string text, read_text_file(index_path));
  const nlohmann::json index = nlohmann::json::parse(text, nullptr, false);
  auto corrupt = [&](const std::string& what) {
    return make_error(index_path + ": " + what + "; delete " + dir + " to rebuild the cache");
  };
  if (!index.is_object() || !index.contains("version") || index["version"] != kCacheVersion ||
      !index.contains("shards") || !index["shards"].is_array() || !index.contains("stats") ||
      !index["stats"].is_object() || !index.contains("content_hash") || !index["content_hash"].is_string()) {
    return corrupt("not a version " + std::to_string(kCacheVersion) + " dataset cache index");
  }
  TokenCache cache;
  cache.dir_ = dir;
  cache.content_hash_ = index["content_hash"].get<std::string>();
  try {
    const nlohmann::json& stats = index["stats"];
    cache.stats_ = {stats.at("files").get<uint64_t>(),     stats.at("records").get<uint64_t>(),
                    stats.at("malformed").get<uint64_t>(), stats.at("all_masked").get<uint64_t>(),
                    stats.at("documents").get<uint64_t>(), stats.at("tokens").get<uint64_t>(),
                    stats.at("counted").get<uint64_t>(),   stats.at("input_bytes").get<uint64_t>()};
    for (const nlohmann::json& shard : index["shards"]) {
      const std::string name = shard.at("file").get<std::string>();
      const uint64_t tokens = shard.at("tokens").get<uint64_t>();
      if (name.find('/') != std::string::npos) return corrupt("shard name " + name + " is not a plain file name");
      KIPP_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::open(join_path(dir, name)));
      if (mapped.size() != tokens * sizeof(uint32_t)) {
        return corrupt(name + " holds " + std::to_string(mapped.size()) + " bytes, the index says " +
                       std::to_string(tokens) + " tokens");
      }
      cache.shard_starts_.push_back(cache.size_);
      cache.size_ += tokens;
      cache.shards_.push_back(std::move(mapped));
    }
  } catch (const nlohmann::json::exception& error) {
    return corrupt(error.what());
  }
  cache.shard_starts_.push_back(cache.size_);
  if (cache.size_ != cache.stats_.tokens) return corrupt("the shards do not add up to the recorded token count");
  return cache;
}

void TokenCache::read(uint64_t begin, uint64_t count, uint32_t* out) const {
  size_t shard =
      size_t(std::upper_bound(shard_starts_.begin(), shard_starts_.end(), begin) - shard_starts_.begin()) - 1;
  while (count > 0) {
    const uint64_t offset = begin - shard_starts_[shard];
    const uint64_t take = std::min<uint64_t>(count, shard_starts_[shard + 1] - begin);
    std::memcpy(out, shards_[shard].data() + offset * sizeof(uint32_t), take * sizeof(uint32_t));
    out += take;
    begin += take;
    count -= take;
    ++shard;
  }
}

}  // namespace kipp::data
