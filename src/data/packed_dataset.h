// Sequence packing: a cached token stream (documents already separated by end tokens) cut into
// windows of seq_len + 1 tokens at a stride of seq_len, so every token is a target exactly
// once; a held-out share of the windows (or a separate validation set) for evaluation; and the
// per-epoch window order.
#pragma once

#include <cstdint>
#include <optional>

#include "core/status.h"
#include "data/token_cache.h"

namespace kipp::data {

// Target written for a token that carries no loss (prompt tokens of a conversation).
inline constexpr int32_t kNoTarget = -1;

class PackedDataset {
 public:
  // Validation windows: all of `validation` when given, else the last `validation_fraction` of
  // the training stream's windows.
  static Expected<PackedDataset> create(TokenCache train, std::optional<TokenCache> validation, uint32_t seq_len,
                                        double validation_fraction);

  uint64_t train_count() const { return train_count_; }
  uint64_t validation_count() const { return validation_count_; }
  uint32_t seq_len() const { return seq_len_; }
  const TokenCache& train_cache() const { return train_; }

  // seq_len inputs and targets of training window `index` (< train_count) or validation window
  // `index` (< validation_count); a target is kNoTarget where its token carries no loss.
  void fill_train(uint64_t index, int32_t* inputs, int32_t* targets) const;
  void fill_validation(uint64_t index, int32_t* inputs, int32_t* targets) const;

  // Cross-entropy (nats per counted target) of the validation targets under the unigram
  // distribution of the training targets (add-one smoothed over `vocab_size` ids): the loss a
  // model that ignores context would reach. Counts at most a few tens of millions of tokens.
  double unigram_baseline(uint32_t vocab_size) const;

 private:
  PackedDataset(TokenCache train, std::optional<TokenCache> validation, uint32_t seq_len)
      : train_(std::move(train)), validation_(std::move(validation)), seq_len_(seq_len) {}
  void fill(const TokenCache& cache, uint64_t window, int32_t* inputs, int32_t* targets) const;

  TokenCache train_;
  std::optional<TokenCache> validation_;
  uint32_t seq_len_;
  uint64_t train_count_ = 0, validation_count_ = 0;
};

// The order of `count` training windows in one epoch: a seeded pseudo-random permutation that
// is a pure function of (seed, epoch, position) and needs no memory (a Feistel network over
// the next power of four, cycle-walking back into range), so a run resumed at (epoch, cursor)
// sees exactly the windows an uninterrupted one would, however large the dataset.
class WindowOrder {
 public:
  WindowOrder(uint64_t count, uint64_t seed, uint64_t epoch);
  uint64_t operator[](uint64_t position) const;
  uint64_t count() const { return count_; }

 private:
  uint64_t permute(uint64_t value) const;

  uint64_t count_;
  uint64_t key_;
  uint32_t half_bits_;
};

}  // namespace kipp::data
