#include "backend/cuda/step_plan.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace kipp::cuda {
namespace {

uint32_t pick(std::mt19937& rng, uint32_t n) { return static_cast<uint32_t>(rng() % n); }

// A random eval: items with random starts, lengths, logit counts and block tables covering
// their positions (with spare entries past them).
struct RandomEval {
  std::vector<std::vector<uint32_t>> tokens, tables;
  std::vector<EvalItem> items;

  RandomEval(std::mt19937& rng, size_t count, uint32_t max_tokens) {
    tokens.resize(count);
    tables.resize(count);
    for (size_t i = 0; i < count; ++i) {
      const uint32_t start = pick(rng, 3) == 0 ? 0 : pick(rng, 300);
      const uint32_t n = 1 + pick(rng, max_tokens);
      for (uint32_t t = 0; t < n; ++t) tokens[i].push_back(pick(rng, 1000));
      const uint32_t blocks = (start + n + kKvBlockPositions - 1) / kKvBlockPositions + pick(rng, 3);
      for (uint32_t b = 0; b < blocks; ++b) tables[i].push_back(pick(rng, 10000));
      EvalItem item;
      item.block_table = tables[i];
      item.start = start;
      item.tokens = tokens[i];
      item.logits_count = pick(rng, 2) == 0 ? 1 : pick(rng, n + 1);
      items.push_back(item);
    }
  }
};

// The rows as a plain loop over the items writes them.
struct FlatRow {
  uint32_t item, position, token;
  int64_t logit_row;  // -1: none
};

std::vector<FlatRow> flatten(const std::vector<EvalItem>& items) {
  std::vector<FlatRow> rows;
  for (uint32_t i = 0; i < items.size(); ++i) {
    const auto n = static_cast<int64_t>(items[i].tokens.size());
    for (int64_t t = 0; t < n; ++t) {
      const int64_t first_logit = n - items[i].logits_count;
      rows.push_back(FlatRow{i, items[i].start + static_cast<uint32_t>(t), items[i].tokens[t],
                             t >= first_logit ? t - first_logit : -1});
    }
  }
  return rows;
}

void check_plan(const std::vector<EvalItem>& items, const StepPlanOptions& options) {
  const std::vector<StepPlan> steps = plan_steps(items, options);
  const std::vector<FlatRow> flat = flatten(items);
  size_t next = 0;
  for (const StepPlan& plan : steps) {
    ASSERT_GT(plan.rows(), 0u);
    ASSERT_LE(plan.rows(), options.step_rows);
    // Every step but the last is full.
    if (&plan != &steps.back()) {
      ASSERT_EQ(plan.rows(), options.step_rows);
    }
    std::vector<StepPlan::Logit> logits;
    for (uint32_t r = 0; r < plan.rows(); ++r, ++next) {
      const FlatRow& row = flat.at(next);
      ASSERT_LT(plan.row_items[r], plan.items.size());
      EXPECT_EQ(plan.items[plan.row_items[r]].eval_item, row.item);
      EXPECT_EQ(plan.positions[r], row.position);
      EXPECT_EQ(plan.tokens[r], row.token);
      if (row.logit_row >= 0) logits.push_back({r, row.item, static_cast<uint32_t>(row.logit_row)});
    }
    ASSERT_EQ(plan.logits.size(), logits.size());
    for (size_t i = 0; i < logits.size(); ++i) {
      EXPECT_EQ(plan.logits[i].row, logits[i].row);
      EXPECT_EQ(plan.logits[i].eval_item, logits[i].eval_item);
      EXPECT_EQ(plan.logits[i].logit_row, logits[i].logit_row);
    }
    // Tiles: the rows in order, cut where the item changes or a tile is full.
    uint32_t row = 0;
    for (const StepPlan::Tile& tile : plan.tiles) {
      EXPECT_EQ(tile.first_row, row);
      ASSERT_GE(tile.rows, 1u);
      ASSERT_LE(tile.rows, options.tile_rows);
      for (uint32_t r = tile.first_row; r < tile.first_row + tile.rows; ++r) EXPECT_EQ(plan.row_items[r], tile.item);
      const uint32_t end = tile.first_row + tile.rows;
      if (end < plan.rows() && tile.rows < options.tile_rows) {
        EXPECT_NE(plan.row_items[end], tile.item);
      }
      row = end;
    }
    EXPECT_EQ(row, plan.rows());
    // Items: distinct, in order of their rows; tables the prefix up to the last row's block.
    uint32_t offset = 0;
    for (uint32_t i = 0; i < plan.items.size(); ++i) {
      if (i > 0) {
        EXPECT_LT(plan.items[i - 1].eval_item, plan.items[i].eval_item);
      }
      uint32_t last = 0;
      for (uint32_t r = 0; r < plan.rows(); ++r)
        if (plan.row_items[r] == i) last = std::max(last, plan.positions[r]);
      const StepPlan::Item& item = plan.items[i];
      EXPECT_EQ(item.table_offset, offset);
      EXPECT_EQ(item.table_blocks, last / kKvBlockPositions + 1);
      const std::span<const uint32_t> table = items[item.eval_item].block_table;
      for (uint32_t b = 0; b < item.table_blocks; ++b) EXPECT_EQ(plan.tables.at(offset + b), table[b]);
      offset += item.table_blocks;
    }
    EXPECT_EQ(plan.tables.size(), offset);
    // Splits: within bounds, no more partial results than the scratch holds, and as many as
    // the target asks when nothing else limits them.
    const uint64_t blocks = uint64_t{plan.tiles.size()} * options.kv_heads;
    const uint64_t partials = uint64_t{plan.rows()} * options.num_heads * plan.splits;
    ASSERT_GE(plan.splits, 1u);
    ASSERT_LE(plan.splits, options.max_splits);
    if (plan.splits > 1) {
      EXPECT_LE(partials, options.partial_capacity);
    }
    if (plan.splits > 1) {
      EXPECT_LT(blocks * (plan.splits - 1), options.target_blocks);
    }
    const bool capped = plan.splits == options.max_splits ||
                        uint64_t{plan.rows()} * options.num_heads * (plan.splits + 1) > options.partial_capacity;
    if (!capped) {
      EXPECT_GE(blocks * plan.splits, options.target_blocks);
    }
  }
  EXPECT_EQ(next, flat.size());
}

TEST(CudaStepPlan, RandomBatchesMatchAPlainFlattening) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    StepPlanOptions options;
    options.step_rows = 1 + pick(rng, 300);
    options.tile_rows = 1 + pick(rng, 40);
    options.kv_heads = 1 + pick(rng, 8);
    options.num_heads = options.kv_heads * (1 + pick(rng, 8));
    options.max_splits = 1 + pick(rng, 16);
    options.target_blocks = 1 + pick(rng, 300);
    options.partial_capacity = 1 + pick(rng, 20000);
    const RandomEval eval(rng, 1 + pick(rng, 12), trial % 2 == 0 ? 4 : 200);
    SCOPED_TRACE("trial " + std::to_string(trial));
    check_plan(eval.items, options);
    if (testing::Test::HasFatalFailure()) return;
  }
}

TEST(CudaStepPlan, DecodeStepsHaveOneTilePerItem) {
  std::mt19937 rng(3);
  const RandomEval eval(rng, 40, 1);
  StepPlanOptions options;
  options.step_rows = 1024;
  const std::vector<StepPlan> steps = plan_steps(eval.items, options);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].tiles.size(), steps[0].items.size());
  EXPECT_EQ(steps[0].max_rows_per_item(), 1u);
}

TEST(CudaStepPlan, PackedMetadataReadsBackAsThePlan) {
  std::mt19937 rng(11);
  const RandomEval eval(rng, 9, 50);
  StepPlanOptions options;
  options.step_rows = 64;
  std::vector<uint64_t> bases;
  for (size_t i = 0; i < eval.items.size(); ++i) bases.push_back(0x7f0000000000ull + i * 0x100000ull);
  for (const StepPlan& plan : plan_steps(eval.items, options)) {
    const StepMetadataLayout layout = StepMetadataLayout::make(options.step_rows, plan.tables.size() + 5);
    std::vector<uint64_t> storage(layout.bytes / 8 + 1, 0);
    auto* buffer = reinterpret_cast<uint8_t*>(storage.data());
    pack_step_metadata(plan, layout, bases, buffer);
    const auto word = [&](uint64_t offset, size_t i) {
      uint32_t value;
      std::memcpy(&value, buffer + offset + i * 4, 4);
      return value;
    };
    EXPECT_EQ(layout.used_bytes(plan), layout.tables + plan.tables.size() * 4);
    EXPECT_LE(layout.used_bytes(plan), layout.bytes);
    for (uint32_t r = 0; r < plan.rows(); ++r) {
      EXPECT_EQ(word(layout.tokens, r), plan.tokens[r]);
      EXPECT_EQ(word(layout.positions, r), plan.positions[r]);
      EXPECT_EQ(word(layout.row_items, r), plan.row_items[r]);
    }
    for (size_t t = 0; t < plan.tiles.size(); ++t) {
      EXPECT_EQ(word(layout.tile_first_rows, t), plan.tiles[t].first_row);
      EXPECT_EQ(word(layout.tile_rows, t), plan.tiles[t].rows);
      EXPECT_EQ(word(layout.tile_items, t), plan.tiles[t].item);
    }
    for (size_t i = 0; i < plan.items.size(); ++i) {
      EXPECT_EQ(word(layout.item_table_offsets, i), plan.items[i].table_offset);
      uint64_t base;
      std::memcpy(&base, buffer + layout.kv_bases + i * 8, 8);
      EXPECT_EQ(base, bases[plan.items[i].eval_item]);
    }
    for (size_t i = 0; i < plan.logits.size(); ++i) EXPECT_EQ(word(layout.logit_rows, i), plan.logits[i].row);
    for (size_t i = 0; i < plan.tables.size(); ++i) EXPECT_EQ(word(layout.tables, i), plan.tables[i]);
    // Arrays do not overlap and device reads of them are aligned.
    const uint64_t offsets[] = {layout.tokens,    layout.positions,  layout.row_items,          layout.tile_first_rows,
                                layout.tile_rows, layout.tile_items, layout.item_table_offsets, layout.logit_rows,
                                layout.kv_bases,  layout.tables};
    for (size_t i = 0; i + 1 < std::size(offsets); ++i) {
      EXPECT_EQ(offsets[i] % 16, 0u);
      const uint64_t size = offsets[i] == layout.kv_bases ? options.step_rows * 8ull : options.step_rows * 4ull;
      EXPECT_LE(offsets[i] + size, offsets[i + 1]);
    }
  }
}

// A storage of `blocks` blocks that holds nothing (check_eval_items only asks its size).
class CountedStorage final : public KvStorage {
 public:
  explicit CountedStorage(uint32_t blocks) : blocks_(blocks) {}
  uint32_t num_blocks() const override { return blocks_; }
  uint64_t bytes() const override { return 0; }
  void copy_block(uint32_t, uint32_t) override {}

 private:
  uint32_t blocks_;
};

TEST(CudaStepPlan, EvalItemsTheKernelsWouldFaultOnAreRefused) {
  CountedStorage storage(4);
  const std::vector<uint32_t> tokens(10, 1), table = {3, 0, 2};
  EvalItem item;
  item.kv = &storage;
  item.block_table = table;
  item.tokens = tokens;
  item.start = 86;  // positions 86..95: the last of three blocks
  EXPECT_TRUE(check_eval_items({&item, 1}, 96).ok());
  EXPECT_FALSE(check_eval_items({&item, 1}, 95).ok());  // position 95 has no RoPE row
  item.start = 87;                                      // position 96 needs a fourth block
  EXPECT_FALSE(check_eval_items({&item, 1}, 200).ok());
  item.start = 86;
  CountedStorage smaller(3);  // block 3 is past it
  item.kv = &smaller;
  EXPECT_FALSE(check_eval_items({&item, 1}, 96).ok());
  item.kv = nullptr;
  EXPECT_FALSE(check_eval_items({&item, 1}, 96).ok());
  item.tokens = {};  // nothing to run: nothing to check
  EXPECT_TRUE(check_eval_items({&item, 1}, 96).ok());
}

}  // namespace
}  // namespace kipp::cuda
