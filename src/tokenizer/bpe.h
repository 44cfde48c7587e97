// Byte-level BPE by merge rank on token ids: a piece's bytes start as the 256 single-byte
// tokens, then the adjacent pair with the lowest merge rank is merged (leftmost first among
// equal ranks) until no adjacent pair has a merge. Runs in O(n log n) per piece with a
// min-heap over candidate pairs and a linked list of live symbols, so a piece of thousands of
// characters (a long run of digits-free letters, base64, ...) stays cheap. Results are cached
// per piece in a bounded, sharded cache that concurrent encoders share.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kipp {

class BpeModel {
 public:
  struct Merge {
    uint32_t rank;
    uint32_t merged_id;
  };

  // `byte_ids[b]`: the id of the token for byte b. `merges`: (left id, right id) -> merge.
  BpeModel(std::array<uint32_t, 256> byte_ids, std::unordered_map<uint64_t, Merge> merges);
  BpeModel(BpeModel&&) noexcept;
  BpeModel& operator=(BpeModel&&) noexcept;
  ~BpeModel();

  // Appends the ids of one pre-tokenized piece (raw bytes). Thread-safe.
  void encode_piece(std::string_view piece, std::vector<uint32_t>& ids) const;
  // The same without the cache (tests compare the two; the cache only stores results).
  void encode_piece_uncached(std::string_view piece, std::vector<uint32_t>& ids) const;

  static uint64_t pair_key(uint32_t left, uint32_t right) { return (static_cast<uint64_t>(left) << 32) | right; }

 private:
  struct Cache;
  std::array<uint32_t, 256> byte_ids_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::unique_ptr<Cache> cache_;
};

}  // namespace kipp
