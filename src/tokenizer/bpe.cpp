#include "tokenizer/bpe.h"

#include <algorithm>
#include <functional>
#include <mutex>
#include <queue>

namespace kipp {
namespace {

// Pieces longer than this are rare (long words, runs of symbols) and are not cached, so one
// huge input cannot flush the cache of common words.
constexpr size_t kMaxCachedPieceBytes = 64;
constexpr size_t kCacheShards = 64;
// Per shard; 64 shards x 4096 entries bounds the cache near 256k pieces (tens of MB).
constexpr size_t kMaxEntriesPerShard = 4096;

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};

}  // namespace

struct BpeModel::Cache {
  struct alignas(64) Shard {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<uint32_t>, StringHash, std::equal_to<>> entries;
  };
  std::array<Shard, kCacheShards> shards;
};

BpeModel::BpeModel(std::array<uint32_t, 256> byte_ids, std::unordered_map<uint64_t, Merge> merges)
    : byte_ids_(byte_ids), merges_(std::move(merges)), cache_(std::make_unique<Cache>()) {}
BpeModel::BpeModel(BpeModel&&) noexcept = default;
BpeModel& BpeModel::operator=(BpeModel&&) noexcept = default;
BpeModel::~BpeModel() = default;

void BpeModel::encode_piece(std::string_view piece, std::vector<uint32_t>& ids) const {
  if (piece.size() == 1) {
    ids.push_back(byte_ids_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  if (piece.size() > kMaxCachedPieceBytes) {
    encode_piece_uncached(piece, ids);
    return;
  }
  const size_t hash = StringHash{}(piece);
  Cache::Shard& shard = cache_->shards[(hash >> 7) % kCacheShards];
  {
    std::lock_guard lock(shard.mutex);
    const auto found = shard.entries.find(piece);
    if (found != shard.entries.end()) {
      ids.insert(ids.end(), found->second.begin(), found->second.end());
      return;
    }
  }
  const size_t first = ids.size();
  encode_piece_uncached(piece, ids);
  std::vector<uint32_t> result(ids.begin() + static_cast<std::ptrdiff_t>(first), ids.end());
  std::lock_guard lock(shard.mutex);
  // Bounded: a full shard starts over, which is simple and keeps the hot words coming back.
  if (shard.entries.size() >= kMaxEntriesPerShard) shard.entries.clear();
  shard.entries.emplace(std::string(piece), std::move(result));
}

void BpeModel::encode_piece_uncached(std::string_view piece, std::vector<uint32_t>& ids) const {
  const size_t n = piece.size();
  if (n == 0) return;
  // Symbols form a doubly linked list over positions; a merged-away symbol has length 0.
  struct Symbol {
    uint32_t id;
    int32_t prev;
    int32_t next;
    uint32_t length;
  };
  std::vector<Symbol> symbols(n);
  for (size_t i = 0; i < n; ++i) {
    symbols[i] = {byte_ids_[static_cast<uint8_t>(piece[i])], static_cast<int32_t>(i) - 1,
                  i + 1 < n ? static_cast<int32_t>(i + 1) : -1, 1};
  }
  // Candidate: merge the symbol at `pos` with its right neighbour into `merged_id`. Ordered
  // by rank, then position, so equal-rank pairs merge left to right.
  struct Candidate {
    uint32_t rank;
    uint32_t pos;
    uint32_t merged_id;
    bool operator>(const Candidate& other) const { return rank != other.rank ? rank > other.rank : pos > other.pos; }
  };
  std::vector<Candidate> storage;
  storage.reserve(n);
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue(std::greater<>{}, std::move(storage));
  const auto consider = [&](int32_t pos) {
    if (pos < 0 || symbols[pos].next < 0) return;
    const auto found = merges_.find(pair_key(symbols[pos].id, symbols[symbols[pos].next].id));
    if (found != merges_.end()) queue.push({found->second.rank, static_cast<uint32_t>(pos), found->second.merged_id});
  };
  for (size_t i = 0; i + 1 < n; ++i) consider(static_cast<int32_t>(i));

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    // Stale candidates: the symbol was merged away, lost its right neighbour, or the pair
    // there is no longer the one this candidate was made for.
    if (left.length == 0 || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    const auto current = merges_.find(pair_key(left.id, right.id));
    if (current == merges_.end() || current->second.merged_id != top.merged_id || current->second.rank != top.rank) {
      continue;
    }
    left.id = top.merged_id;
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = static_cast<int32_t>(top.pos);
    consider(left.prev);
    consider(static_cast<int32_t>(top.pos));
  }
  for (int32_t pos = 0; pos >= 0; pos = symbols[pos].next) ids.push_back(symbols[pos].id);
}

}  // namespace kipp
