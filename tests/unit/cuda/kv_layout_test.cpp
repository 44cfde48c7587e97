#include <gtest/gtest.h>

#include <vector>

#include "kernels/kv_block_layout.h"
#include "model/model_config.h"

namespace kipp {
namespace {

// Every element of a block belongs to exactly one (layer, K or V, head, position, dim), and the
// block is exactly the model's K/V bytes per token times the block's positions.
TEST(KvBlockLayout, OffsetsTileTheBlockExactly) {
  ModelConfig config;
  config.num_layers = 3;
  config.num_kv_heads = 2;
  config.head_dim = 64;
  const KvBlockLayout layout{config.num_layers, config.num_kv_heads, config.head_dim};
  ASSERT_EQ(layout.block_elements() * sizeof(uint16_t), config.kv_bytes_per_token() * kernels::kKvBlockPositions);
  std::vector<int> owners(layout.block_elements(), 0);
  for (size_t l = 0; l < config.num_layers; ++l)
    for (size_t h = 0; h < config.num_kv_heads; ++h)
      for (uint32_t p = 0; p < kernels::kKvBlockPositions; ++p)
        for (size_t d = 0; d < config.head_dim; ++d) {
          ++owners.at(layout.k(l, h) + layout.slot(p) + d);
          ++owners.at(layout.v(l, h) + layout.slot(p) + d);
        }
  for (int owner : owners) ASSERT_EQ(owner, 1);
  EXPECT_EQ(KvBlockLayout::block_of(31), 0u);
  EXPECT_EQ(KvBlockLayout::block_of(32), 1u);
  EXPECT_EQ(layout.slot(33), config.head_dim);
}

// The arrangement the CPU's attention reads through kernels::KvLayerView with position_stride
// head_dim: a head's K rows of a block together, then (after all heads' K) its V rows.
TEST(KvBlockLayout, MatchesTheCpuViewOfOneHead) {
  const KvBlockLayout layout{2, 4, 128};
  const size_t head = kernels::kKvBlockPositions * 128;
  EXPECT_EQ(layout.k(1, 2), 1 * (2 * 4 * head) + 2 * head);
  EXPECT_EQ(layout.v(1, 2), 1 * (2 * 4 * head) + 4 * head + 2 * head);
  EXPECT_EQ(layout.slot(5), 5u * 128);
}

}  // namespace
}  // namespace kipp
