#include <gtest/gtest.h>

#include "kernels/cuda/forward_kernels.h"
#include "kernels/kv_block_layout.h"

namespace kipp::cuda {
namespace {

// The parts of a tile's context, in split order, are consecutive runs that cover exactly the
// blocks from the first to the one holding the tile's last position, none longer than an even
// share: every visible position is attended once, by one part.
TEST(CudaAttentionSplits, PartsCoverTheTilesBlocksOnceInOrder) {
  for (uint32_t first = 0; first < 300; first += 7)
    for (uint32_t rows = 1; rows <= 70; rows += 3)
      for (uint32_t splits = 1; splits <= 17; ++splits) {
        const auto blocks = static_cast<uint32_t>(KvBlockLayout::block_of(first + rows - 1) + 1);
        uint32_t next = 0;
        for (uint32_t split = 0; split < splits; ++split) {
          const BlockRange range = attention_split_blocks(first, rows, splits, split);
          ASSERT_EQ(range.begin, next) << first << " " << rows << " " << splits << " " << split;
          ASSERT_LE(range.begin, range.end);
          ASSERT_LE(range.end - range.begin, (blocks + splits - 1) / splits);
          next = range.end;
        }
        ASSERT_EQ(next, blocks) << first << " " << rows << " " << splits;
      }
}

}  // namespace
}  // namespace kipp::cuda
