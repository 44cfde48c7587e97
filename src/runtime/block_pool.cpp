#include "runtime/block_pool.h"

#include <algorithm>
#include <string>

#include <xxhash.h>

namespace kipp {

uint64_t chain_block_hash(uint64_t parent_hash, std::span<const uint32_t> tokens) {
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), parent_hash);
}

BlockPool::BlockPool(uint32_t num_blocks) : blocks_(num_blocks) {
  free_.reserve(num_blocks);
  for (uint32_t b = num_blocks; b-- > 0;) free_.push_back(b);
}

Status BlockPool::acquire(uint32_t count, std::vector<uint32_t>& out) {
  if (count > free_.size() + evictable_.size())
    return make_error("KV pool exhausted: " + std::to_string(count) + " block(s) needed, " +
                      std::to_string(free_.size() + evictable_.size()) + " of " + std::to_string(blocks_.size()) +
                      " available (the rest are in use by sessions)");
  for (uint32_t i = 0; i < count; ++i) {
    if (free_.empty()) evict(evictable_.front());
    const uint32_t block = free_.back();
    free_.pop_back();
    blocks_[block].state = State::Private;
    out.push_back(block);
  }
  return ok_status();
}

void BlockPool::release_private(uint32_t block) {
  blocks_[block].state = State::Free;
  free_.push_back(block);
}

std::optional<uint32_t> BlockPool::find(uint64_t hash, uint32_t parent, std::span<const uint32_t> tokens) const {
  const auto found = by_hash_.find(hash);
  if (found == by_hash_.end()) return std::nullopt;
  const Block& block = blocks_[found->second];
  if (block.parent != parent || !std::equal(tokens.begin(), tokens.end(), block.tokens.begin(), block.tokens.end()))
    return std::nullopt;
  return found->second;
}

void BlockPool::add_reference(uint32_t block) {
  Block& entry = blocks_[block];
  if (entry.references++ == 0) evictable_.erase(entry.evictable_position);
}

void BlockPool::drop_references(std::span<const uint32_t> blocks) {
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    Block& entry = blocks_[*it];
    if (--entry.references == 0) entry.evictable_position = evictable_.insert(evictable_.end(), *it);
  }
}

uint32_t BlockPool::publish(uint32_t block, uint64_t hash, uint32_t parent, std::span<const uint32_t> tokens) {
  if (const auto existing = find(hash, parent, tokens)) {
    release_private(block);
    add_reference(*existing);
    return *existing;
  }
  if (by_hash_.contains(hash)) {  // a 64-bit collision with other content: keep the first
    release_private(block);
    return kNoBlock;
  }
  Block& entry = blocks_[block];
  entry.state = State::Published;
  entry.references = 1;  // the publishing session's, dropped by the caller with its others
  entry.hash = hash;
  entry.parent = parent;
  entry.tokens.assign(tokens.begin(), tokens.end());
  by_hash_.emplace(hash, block);
  return block;
}

void BlockPool::evict(uint32_t block) {
  Block& entry = blocks_[block];
  evictable_.erase(entry.evictable_position);
  by_hash_.erase(entry.hash);
  entry.tokens.clear();
  entry.parent = kNoBlock;
  ++evictions_;
  release_private(block);
}

}  // namespace kipp
