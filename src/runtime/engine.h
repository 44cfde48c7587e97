// The public C++ engine: a model opened on an explicitly chosen backend, sessions that hold one
// sequence's K/V through a block table, single and batched evaluation, and the pooled mode in
// which sessions share full, immutable 32-token prefix blocks. (include/kipp.h wraps this as C.)
//
// Not thread-safe: one thread drives an Engine and its sessions at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace kipp {

class BlockPool;
class Session;

struct EngineOptions {
  BackendKind backend = BackendKind::Cpu;
  // Blocks of the model-owned K/V slab that pooled sessions draw from; 0 disables pooled mode.
  uint32_t pool_blocks = 0;
  uint32_t max_step_tokens = 128;
  uint32_t threads = 0;      // 0: one per hardware thread (see BackendOptions)
  std::string kernels = {};  // CPU kernel table by name; empty: the fastest (see BackendOptions)
  bool verify_content_hash = true;
};

struct SessionOptions {
  // Positions the session can hold; 0 means the model's context length. A private session
  // allocates all of its K/V here, once.
  uint32_t capacity = 0;
  // Draw blocks from the engine's shared pool instead of owning them (needs pool_blocks > 0).
  bool pooled = false;
  // Private sessions only: logical block b lives in physical block block_order[b] (a
  // permutation); empty means the identity. A test hook: results must not depend on it.
  std::vector<uint32_t> block_order;
};

// One session's share of a batched eval.
struct BatchItem {
  Session* session = nullptr;
  std::span<const uint32_t> tokens;
  uint32_t logits_count = 1;
  float* logits = nullptr;  // logits_count * vocab floats
};

struct PoolStats {
  uint32_t total_blocks = 0;
  uint32_t free_blocks = 0;
  uint32_t published_blocks = 0;     // immutable, content-addressed
  uint32_t unreferenced_blocks = 0;  // published and evictable
  uint64_t evictions = 0;
};

class Engine {
 public:
  static Expected<std::unique_ptr<Engine>> open(const std::string& path, const EngineOptions& options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const ModelConfig& config() const { return model_.config(); }
  const Model& model() const { return model_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const Backend& backend() const { return *backend_; }
  uint32_t vocab_size() const { return model_.config().vocab_size; }

  Expected<std::unique_ptr<Session>> create_session(const SessionOptions& options = {});

  // Evaluates several sessions in one step (each weight read once for all of them). Either
  // every item is applied or, on an error, no session changes.
  Status eval_batch(std::span<const BatchItem> items);

  // No cache: evaluates `tokens` from position 0 in a temporary K/V buffer (rounded to BF16
  // exactly as a session's cache) and writes the logits of the last `logits_count` positions.
  Status eval_stateless(std::span<const uint32_t> tokens, uint32_t logits_count, float* logits);

  // Every id is in the vocabulary; the error names the first bad one and its index.
  Status check_tokens(std::span<const uint32_t> tokens) const;

  // Text and token inputs converge here: special tokens in `text` are parsed.
  Expected<std::vector<uint32_t>> tokenize(std::string_view text) const;

  // Activations of later evals go to `observer` (null: none); see ActivationObserver.
  void set_activation_observer(ActivationObserver* observer) { backend_->set_activation_observer(observer); }

  // Turns pooled mode on after open (EngineOptions::pool_blocks was 0) with a slab of `blocks`
  // blocks, so a pool can be sized from the memory the backend leaves free. Once only.
  Status open_pool(uint32_t blocks);

  bool pooled_mode() const { return pool_ != nullptr; }
  PoolStats pool_stats() const;

 private:
  friend class Session;
  Engine(Model model, const EngineOptions& options);

  Model model_;
  EngineOptions options_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<KvStorage> pool_storage_;
  std::unique_ptr<BlockPool> pool_;
};

class Session {
 public:
  ~Session();  // publishes full blocks to the pool (pooled mode)
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  uint32_t length() const { return static_cast<uint32_t>(tokens_.size()); }
  uint32_t capacity() const { return capacity_; }
  bool pooled() const { return pool_ != nullptr; }
  std::span<const uint32_t> tokens() const { return tokens_; }
  // K/V bytes the session holds: all of its private storage, or its pooled blocks.
  uint64_t kv_storage_bytes() const;
  // Blocks the Session shares with the pool (adopted or published), from the start.
  uint32_t shared_blocks() const { return shared_blocks_; }

  // Appends `tokens` at the session's length and writes the logits of the last `logits_count`
  // of them (row by row) into `logits`. An error (bad id, over capacity, pool exhausted,
  // logits_count > tokens) leaves the session unchanged.
  Status eval(std::span<const uint32_t> tokens, uint32_t logits_count, float* logits);
  // Tokenizes `text` (special tokens parsed) and evaluates it like eval().
  Status eval_text(std::string_view text, uint32_t logits_count, float* logits);

  // Keeps the first n positions (n <= length).
  Status truncate(uint32_t n);
  // Empties the session; in pooled mode its full blocks are published first.
  void reset();
  // Pooled, empty sessions: adopts the longest published prefix of `tokens` made of whole
  // blocks, leaving at least one token to evaluate (so the caller gets its logits). Returns the
  // positions adopted; the caller then evaluates tokens[result:].
  Expected<uint32_t> match_prefix(std::span<const uint32_t> tokens);

 private:
  friend class Engine;
  Session(Engine& engine, uint32_t capacity, std::unique_ptr<KvStorage> storage, std::vector<uint32_t> table,
          BlockPool* pool);
  uint32_t blocks_for(uint64_t positions) const;
  // Pooled: makes the block table cover `positions`, taking blocks from the pool.
  Status reserve(uint32_t positions);
  void release_blocks(bool publish);

  Engine& engine_;
  uint32_t capacity_;
  std::unique_ptr<KvStorage> own_storage_;  // private sessions
  BlockPool* pool_;                         // pooled sessions
  std::vector<uint32_t> block_table_;
  uint32_t shared_blocks_ = 0;
  std::vector<uint32_t> tokens_;
};

}  // namespace kipp
