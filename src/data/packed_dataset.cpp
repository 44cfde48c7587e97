#include "data/packed_dataset.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/random.h"

namespace kipp::data {
namespace {

constexpr uint64_t kBaselineTrainTokens = uint64_t(1) << 25;
constexpr uint64_t kBaselineValidationTokens = uint64_t(1) << 23;
constexpr int kFeistelRounds = 4;

}  // namespace

Expected<PackedDataset> PackedDataset::create(TokenCache train, std::optional<TokenCache> validation, uint32_t seq_len,
                                              double validation_fraction) {
  if (seq_len == 0) return make_error("seq_len must be positive");
  auto windows_in = [&](const TokenCache& cache) { return cache.size() > seq_len ? (cache.size() - 1) / seq_len : 0; };
  const uint64_t train_windows = windows_in(train);
  PackedDataset dataset(std::move(train), std::move(validation), seq_len);
  if (dataset.validation_) {
    dataset.train_count_ = train_windows;
    dataset.validation_count_ = windows_in(*dataset.validation_);
    if (dataset.validation_count_ == 0) {
      return make_error("the validation data holds " + std::to_string(dataset.validation_->size()) +
                        " tokens: fewer than one window of seq_len + 1 = " + std::to_string(seq_len + 1));
    }
  } else {
    dataset.validation_count_ = uint64_t(std::floor(double(train_windows) * validation_fraction));
    if (validation_fraction > 0 && dataset.validation_count_ == 0 && train_windows >= 2) dataset.validation_count_ = 1;
    dataset.train_count_ = train_windows - dataset.validation_count_;
  }
  if (dataset.train_count_ == 0) {
    return make_error("the training data holds " + std::to_string(dataset.train_.size()) + " tokens: too few for one " +
                      "training window of seq_len + 1 = " + std::to_string(seq_len + 1) +
                      (dataset.validation_count_ ? " besides the validation share" : "") +
                      "; add data or lower train.seq_len");
  }
  return dataset;
}

// The stored tokens are read straight into the two outputs (int32 and uint32 may alias), the
// targets one token further on, so filling a window allocates nothing.
void PackedDataset::fill(const TokenCache& cache, uint64_t window, int32_t* inputs, int32_t* targets) const {
  auto* input_bits = reinterpret_cast<uint32_t*>(inputs);
  auto* target_bits = reinterpret_cast<uint32_t*>(targets);
  cache.read(window * seq_len_, seq_len_, input_bits);
  cache.read(window * seq_len_ + 1, seq_len_, target_bits);
  for (uint32_t i = 0; i < seq_len_; ++i) {
    inputs[i] = int32_t(input_bits[i] & ~kNoLossBit);
    targets[i] = target_bits[i] & kNoLossBit ? kNoTarget : int32_t(target_bits[i]);
  }
}

void PackedDataset::fill_train(uint64_t index, int32_t* inputs, int32_t* targets) const {
  fill(train_, index, inputs, targets);
}

void PackedDataset::fill_validation(uint64_t index, int32_t* inputs, int32_t* targets) const {
  if (validation_) {
    fill(*validation_, index, inputs, targets);
  } else {
    fill(train_, train_count_ + index, inputs, targets);
  }
}

double PackedDataset::unigram_baseline(uint32_t vocab_size) const {
  std::vector<uint64_t> counts(vocab_size, 0);
  std::vector<int32_t> inputs(seq_len_), targets(seq_len_);
  uint64_t total = 0;
  for (uint64_t w = 0; w < train_count_ && total < kBaselineTrainTokens; ++w) {
    fill_train(w, inputs.data(), targets.data());
    for (int32_t t : targets) {
      if (t != kNoTarget && uint32_t(t) < vocab_size) {
        ++counts[size_t(t)];
        ++total;
      }
    }
  }
  double loss = 0;
  uint64_t scored = 0;
  const double denominator = double(total) + double(vocab_size);
  for (uint64_t w = 0; w < validation_count_ && scored < kBaselineValidationTokens; ++w) {
    fill_validation(w, inputs.data(), targets.data());
    for (int32_t t : targets) {
      if (t == kNoTarget || uint32_t(t) >= vocab_size) continue;
      loss -= std::log((double(counts[size_t(t)]) + 1.0) / denominator);
      ++scored;
    }
  }
  return scored ? loss / double(scored) : std::nan("");
}

WindowOrder::WindowOrder(uint64_t count, uint64_t seed, uint64_t epoch)
    : count_(count), key_(mix64(seed ^ mix64(epoch + 0x5eed))), half_bits_(1) {
  while (half_bits_ < 32 && (uint64_t(1) << (2 * half_bits_)) < count) ++half_bits_;
}

uint64_t WindowOrder::permute(uint64_t value) const {
  const uint64_t mask = (uint64_t(1) << half_bits_) - 1;
  uint64_t left = value >> half_bits_, right = value & mask;
  for (int round = 0; round < kFeistelRounds; ++round) {
    const uint64_t mixed = left ^ (counter_random(key_ + uint64_t(round), right) & mask);
    left = right;
    right = mixed;
  }
  return (left << half_bits_) | right;
}

uint64_t WindowOrder::operator[](uint64_t position) const {
  // A bijection on [0, 4^half_bits) restricted to [0, count) by walking the cycle: still a
  // bijection, and the domain is under four times count, so few steps are needed.
  uint64_t value = permute(position);
  while (value >= count_) value = permute(value);
  return value;
}

}  // namespace kipp::data
