// The content-addressed pool of K/V blocks behind pooled sessions. It only does bookkeeping on
// block ids of the model-owned slab; the backend's KvStorage holds the data.
//
// A block is free, private (one session is writing it) or published: full, immutable and found
// by the chained hash of its 32 token ids (seeded with its parent block's hash, so equal blocks
// under different prefixes differ). Published blocks count the sessions using them; those at
// zero are kept for reuse and evicted least recently released first when a block is needed.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace kipp {

inline constexpr uint32_t kNoBlock = UINT32_MAX;
inline constexpr uint64_t kRootBlockHash = 0x6b697070'706f6f6cull;  // the chain's seed

uint64_t chain_block_hash(uint64_t parent_hash, std::span<const uint32_t> tokens);

class BlockPool {
 public:
  explicit BlockPool(uint32_t num_blocks);

  // `count` private blocks appended to `out`, all or none: free blocks first, then evicting
  // unreferenced published ones. The error names how many blocks are in use.
  Status acquire(uint32_t count, std::vector<uint32_t>& out);
  void release_private(uint32_t block);

  // The published block with this chain hash, parent and tokens, if any (not referenced yet).
  std::optional<uint32_t> find(uint64_t hash, uint32_t parent, std::span<const uint32_t> tokens) const;
  // A session starts using a published block.
  void add_reference(uint32_t block);
  // Sessions stop using published blocks; those left unused become evictable, the first of
  // `blocks` the most recently used (so a chain's leaves are evicted before its root).
  void drop_references(std::span<const uint32_t> blocks);

  // Turns a full private block into a published one referenced once by the caller. If an
  // identical block is already published, `block` is freed and that one (now referenced once
  // more) returned. kNoBlock: another block owns the hash (a 64-bit collision); `block` is freed.
  uint32_t publish(uint32_t block, uint64_t hash, uint32_t parent, std::span<const uint32_t> tokens);

  uint32_t total_blocks() const { return static_cast<uint32_t>(blocks_.size()); }
  uint32_t free_blocks() const { return static_cast<uint32_t>(free_.size()); }
  uint32_t published_blocks() const { return static_cast<uint32_t>(by_hash_.size()); }
  uint32_t unreferenced_blocks() const { return static_cast<uint32_t>(evictable_.size()); }
  uint64_t evictions() const { return evictions_; }

 private:
  enum class State : uint8_t { Free, Private, Published };
  struct Block {
    State state = State::Free;
    uint32_t references = 0;
    uint64_t hash = 0;
    uint32_t parent = kNoBlock;
    std::vector<uint32_t> tokens;
    std::list<uint32_t>::iterator evictable_position;
  };
  void evict(uint32_t block);

  std::vector<Block> blocks_;
  std::vector<uint32_t> free_;
  std::unordered_map<uint64_t, uint32_t> by_hash_;
  std::list<uint32_t> evictable_;  // front: least recently released
  uint64_t evictions_ = 0;
};

}  // namespace kipp
