#include "runtime/engine.h"

#include <algorithm>
#include <numeric>

#include "runtime/block_pool.h"

namespace kipp {
namespace {

constexpr uint32_t kBlock = kKvBlockPositions;

uint32_t blocks_for_positions(uint64_t positions) { return static_cast<uint32_t>((positions + kBlock - 1) / kBlock); }

Status check_permutation(const std::vector<uint32_t>& order, uint32_t blocks) {
  if (order.size() != blocks)
    return make_error("block_order has " + std::to_string(order.size()) + " entries, the session has " +
                      std::to_string(blocks) + " blocks");
  std::vector<bool> seen(blocks, false);
  for (uint32_t b : order) {
    if (b >= blocks || seen[b])
      return make_error("block_order is not a permutation of 0.." + std::to_string(blocks - 1));
    seen[b] = true;
  }
  return ok_status();
}

}  // namespace

Engine::Engine(Model model, const EngineOptions& options) : model_(std::move(model)), options_(options) {}
Engine::~Engine() = default;

Expected<std::unique_ptr<Engine>> Engine::open(const std::string& path, const EngineOptions& options) {
  LoadOptions load;
  load.verify_content_hash = options.verify_content_hash;
  KIPP_ASSIGN_OR_RETURN(Model model, Model::open(path, load));
  std::unique_ptr<Engine> engine(new Engine(std::move(model), options));
  KIPP_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::create(engine->model_.tokenizer()));
  engine->tokenizer_ = std::make_unique<Tokenizer>(std::move(tokenizer));
  BackendOptions backend_options;
  backend_options.max_step_tokens = options.max_step_tokens;
  backend_options.threads = options.threads;
  backend_options.kernels = options.kernels;
  KIPP_ASSIGN_OR_RETURN(engine->backend_, create_backend(options.backend, engine->model_, backend_options));
  if (options.pool_blocks > 0) KIPP_RETURN_IF_ERROR(engine->open_pool(options.pool_blocks));
  return engine;
}

Status Engine::open_pool(uint32_t blocks) {
  if (pool_) return make_error("the engine's K/V pool is already open");
  if (blocks == 0) return make_error("a K/V pool needs at least one block");
  KIPP_ASSIGN_OR_RETURN(pool_storage_, backend_->create_kv_storage(blocks));
  pool_ = std::make_unique<BlockPool>(blocks);
  return ok_status();
}

Expected<std::unique_ptr<Session>> Engine::create_session(const SessionOptions& options) {
  const uint32_t context = config().context_length;
  const uint32_t capacity = options.capacity == 0 ? context : options.capacity;
  if (capacity > context)
    return make_error("session capacity " + std::to_string(capacity) + " exceeds the model's context length " +
                      std::to_string(context));
  if (options.pooled) {
    if (!pool_) return make_error("pooled sessions need an engine opened with pool_blocks > 0");
    if (!options.block_order.empty()) return make_error("block_order applies to private sessions only");
    return std::unique_ptr<Session>(new Session(*this, capacity, nullptr, {}, pool_.get()));
  }
  const uint32_t blocks = blocks_for_positions(capacity);
  std::vector<uint32_t> table(blocks);
  if (options.block_order.empty()) {
    std::iota(table.begin(), table.end(), 0u);
  } else {
    KIPP_RETURN_IF_ERROR(check_permutation(options.block_order, blocks));
    table = options.block_order;
  }
  KIPP_ASSIGN_OR_RETURN(auto storage, backend_->create_kv_storage(blocks));
  return std::unique_ptr<Session>(new Session(*this, capacity, std::move(storage), std::move(table), nullptr));
}

Status Engine::check_tokens(std::span<const uint32_t> tokens) const {
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] >= config().vocab_size)
      return make_error("token id " + std::to_string(tokens[i]) + " at index " + std::to_string(i) +
                        " is out of range (vocabulary size " + std::to_string(config().vocab_size) + ")");
  return ok_status();
}

Status Engine::eval_batch(std::span<const BatchItem> items) {
  for (size_t i = 0; i < items.size(); ++i) {
    const BatchItem& item = items[i];
    const std::string where = items.size() > 1 ? "batch item " + std::to_string(i) + ": " : std::string();
    if (item.session == nullptr) return make_error(where + "no session");
    if (&item.session->engine_ != this) return make_error(where + "the session belongs to another engine");
    for (size_t j = 0; j < i; ++j)
      if (items[j].session == item.session) return make_error(where + "the session appears twice in one batch");
    if (Status valid = check_tokens(item.tokens); !valid.ok()) return make_error(where + valid.message());
    if (item.logits_count > item.tokens.size())
      return make_error(where + "logits for " + std::to_string(item.logits_count) + " positions asked, only " +
                        std::to_string(item.tokens.size()) + " token(s) evaluated");
    if (item.logits_count > 0 && item.logits == nullptr) return make_error(where + "no logits buffer");
    const uint64_t end = uint64_t{item.session->length()} + item.tokens.size();
    if (end > item.session->capacity())
      return make_error(where + "session would hold " + std::to_string(end) + " positions, its capacity is " +
                        std::to_string(item.session->capacity()));
  }
  // Pooled sessions take their new blocks up front; on an error the ones taken so far go back.
  std::vector<size_t> table_sizes;
  const auto give_back_new_blocks = [&] {
    for (size_t j = 0; j < table_sizes.size(); ++j) {
      Session& rolled_back = *items[j].session;
      if (!rolled_back.pooled()) continue;
      for (size_t b = table_sizes[j]; b < rolled_back.block_table_.size(); ++b)
        pool_->release_private(rolled_back.block_table_[b]);
      rolled_back.block_table_.resize(table_sizes[j]);
    }
  };
  for (size_t i = 0; i < items.size(); ++i) {
    Session& session = *items[i].session;
    table_sizes.push_back(session.block_table_.size());
    if (!session.pooled()) continue;
    const Status reserved = session.reserve(session.length() + static_cast<uint32_t>(items[i].tokens.size()));
    if (!reserved.ok()) {
      give_back_new_blocks();
      return reserved;
    }
  }
  std::vector<EvalItem> work;
  for (const BatchItem& item : items) {
    Session& session = *item.session;
    KvStorage* storage = session.pooled() ? pool_storage_.get() : session.own_storage_.get();
    work.push_back(
        EvalItem{storage, session.block_table_, session.length(), item.tokens, item.logits_count, item.logits});
  }
  // A failed step (a device error) must leave no session changed either, blocks included.
  if (Status evaluated = backend_->eval(work); !evaluated.ok()) {
    give_back_new_blocks();
    return evaluated;
  }
  for (const BatchItem& item : items)
    item.session->tokens_.insert(item.session->tokens_.end(), item.tokens.begin(), item.tokens.end());
  return ok_status();
}

Status Engine::eval_stateless(std::span<const uint32_t> tokens, uint32_t logits_count, float* logits) {
  KIPP_RETURN_IF_ERROR(check_tokens(tokens));
  if (logits_count > tokens.size())
    return make_error("logits for " + std::to_string(logits_count) + " positions asked, only " +
                      std::to_string(tokens.size()) + " token(s) given");
  if (logits_count > 0 && logits == nullptr) return make_error("no logits buffer");
  if (tokens.size() > config().context_length)
    return make_error(std::to_string(tokens.size()) + " tokens exceed the context length " +
                      std::to_string(config().context_length));
  const uint32_t blocks = blocks_for_positions(tokens.size());
  KIPP_ASSIGN_OR_RETURN(auto storage, backend_->create_kv_storage(blocks));
  std::vector<uint32_t> table(blocks);
  std::iota(table.begin(), table.end(), 0u);
  const EvalItem item{storage.get(), table, 0, tokens, logits_count, logits};
  return backend_->eval(std::span<const EvalItem>(&item, 1));
}

Expected<std::vector<uint32_t>> Engine::tokenize(std::string_view text) const {
  return tokenizer_->encode(text, SpecialTokens::Parse);
}

PoolStats Engine::pool_stats() const {
  if (!pool_) return {};
  return PoolStats{pool_->total_blocks(), pool_->free_blocks(), pool_->published_blocks(), pool_->unreferenced_blocks(),
                   pool_->evictions()};
}

// ------------------------------------------------------------------ Session

Session::Session(Engine& engine, uint32_t capacity, std::unique_ptr<KvStorage> storage, std::vector<uint32_t> table,
                 BlockPool* pool)
    : engine_(engine),
      capacity_(capacity),
      own_storage_(std::move(storage)),
      pool_(pool),
      block_table_(std::move(table)) {}

Session::~Session() { release_blocks(true); }

uint64_t Session::kv_storage_bytes() const {
  if (!pooled()) return own_storage_->bytes();
  const KvStorage& slab = *engine_.pool_storage_;
  return block_table_.size() * (slab.bytes() / slab.num_blocks());
}

uint32_t Session::blocks_for(uint64_t positions) const { return blocks_for_positions(positions); }

Status Session::eval(std::span<const uint32_t> tokens, uint32_t logits_count, float* logits) {
  const BatchItem item{this, tokens, logits_count, logits};
  return engine_.eval_batch(std::span<const BatchItem>(&item, 1));
}

Status Session::eval_text(std::string_view text, uint32_t logits_count, float* logits) {
  KIPP_ASSIGN_OR_RETURN(std::vector<uint32_t> tokens, engine_.tokenize(text));
  return eval(tokens, logits_count, logits);
}

Status Session::reserve(uint32_t positions) {
  const uint32_t needed = blocks_for(positions);
  if (needed <= block_table_.size()) return ok_status();
  return pool_->acquire(needed - static_cast<uint32_t>(block_table_.size()), block_table_);
}

Status Session::truncate(uint32_t n) {
  if (n > length())
    return make_error("cannot truncate a session of " + std::to_string(length()) + " positions to " +
                      std::to_string(n));
  if (pooled()) {
    const uint32_t keep_blocks = blocks_for(n);
    // A kept, partly cut block that is shared gets a private copy: it is about to be appended to.
    const bool copy_last = n % kBlock != 0 && keep_blocks <= shared_blocks_;
    std::vector<uint32_t> dropped;  // shared blocks let go, root first (so leaves are evicted first)
    if (copy_last) {
      // The copy goes into a private block this cut frees when there is one, so truncating never
      // fails for want of a block with a full pool; else into one from the pool, taken before
      // anything changes so that an exhausted pool leaves the session as it was.
      uint32_t copy = kNoBlock;
      if (block_table_.size() > shared_blocks_) {
        copy = block_table_.back();
        block_table_.pop_back();
      } else {
        std::vector<uint32_t> fresh;
        KIPP_RETURN_IF_ERROR(pool_->acquire(1, fresh));
        copy = fresh[0];
      }
      const uint32_t shared = block_table_[keep_blocks - 1];
      engine_.pool_storage_->copy_block(shared, copy);
      dropped.push_back(shared);
      block_table_[keep_blocks - 1] = copy;
    }
    const uint32_t still_shared = std::min(shared_blocks_, copy_last ? keep_blocks - 1 : keep_blocks);
    for (uint32_t b = keep_blocks; b < block_table_.size(); ++b) {
      if (b < shared_blocks_) {
        dropped.push_back(block_table_[b]);
      } else {
        pool_->release_private(block_table_[b]);
      }
    }
    pool_->drop_references(dropped);
    block_table_.resize(keep_blocks);
    shared_blocks_ = still_shared;
  }
  tokens_.resize(n);
  return ok_status();
}

void Session::release_blocks(bool publish) {
  if (!pooled()) return;
  std::vector<uint32_t> held;  // published blocks the Session references, root first
  uint32_t parent = kNoBlock;
  uint64_t parent_hash = kRootBlockHash;
  bool chain_intact = publish;
  const uint32_t full_blocks = length() / kBlock;
  for (uint32_t b = 0; b < block_table_.size(); ++b) {
    const uint32_t block = block_table_[b];
    const bool shared = b < shared_blocks_;
    if (chain_intact && b < full_blocks) {
      const auto slice = std::span<const uint32_t>(tokens_).subspan(size_t{b} * kBlock, kBlock);
      const uint64_t hash = chain_block_hash(parent_hash, slice);
      const uint32_t published = shared ? block : pool_->publish(block, hash, parent, slice);
      if (published == kNoBlock) {
        chain_intact = false;
        continue;
      }
      held.push_back(published);
      parent = published;
      parent_hash = hash;
    } else if (shared) {
      held.push_back(block);
    } else {
      pool_->release_private(block);
    }
  }
  pool_->drop_references(held);
  block_table_.clear();
  shared_blocks_ = 0;
}

void Session::reset() {
  release_blocks(true);
  tokens_.clear();
}

Expected<uint32_t> Session::match_prefix(std::span<const uint32_t> tokens) {
  if (!pooled()) return make_error("match_prefix needs a pooled session");
  if (length() != 0)
    return make_error("match_prefix needs an empty session (it has " + std::to_string(length()) + " positions)");
  KIPP_RETURN_IF_ERROR(engine_.check_tokens(tokens));
  const size_t limit = std::min<size_t>(tokens.empty() ? 0 : tokens.size() - 1, capacity_);
  uint32_t parent = kNoBlock;
  uint64_t parent_hash = kRootBlockHash;
  uint32_t adopted = 0;
  while ((adopted + 1) * size_t{kBlock} <= limit) {
    const auto slice = tokens.subspan(size_t{adopted} * kBlock, kBlock);
    const uint64_t hash = chain_block_hash(parent_hash, slice);
    const auto found = pool_->find(hash, parent, slice);
    if (!found) break;
    pool_->add_reference(*found);
    block_table_.push_back(*found);
    parent = *found;
    parent_hash = hash;
    ++adopted;
  }
  shared_blocks_ = adopted;
  tokens_.assign(tokens.begin(), tokens.begin() + size_t{adopted} * kBlock);
  return adopted * kBlock;
}

}  // namespace kipp
