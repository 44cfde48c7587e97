#include "backend/cuda/step_plan.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace kipp::cuda {

uint32_t StepPlan::max_rows_per_item() const {
  std::vector<uint32_t> counts(items.size(), 0);
  for (uint32_t item : row_items) ++counts[item];
  return counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
}

namespace {

// The attention splits for a step: enough thread blocks to fill the GPU when the tiles alone do
// not, bounded by the partial results' scratch.
uint32_t choose_splits(const StepPlan& plan, const StepPlanOptions& options) {
  const uint64_t blocks = uint64_t{plan.tiles.size()} * options.kv_heads;
  if (blocks == 0) return 1;
  uint64_t splits = std::clamp<uint64_t>((options.target_blocks + blocks - 1) / blocks, 1, options.max_splits);
  const uint64_t queries = uint64_t{plan.rows()} * options.num_heads;
  splits = std::min(splits, std::max<uint64_t>(1, options.partial_capacity / std::max<uint64_t>(1, queries)));
  return static_cast<uint32_t>(std::max<uint64_t>(1, splits));
}

void finish_step(StepPlan& plan, std::span<const EvalItem> items, const StepPlanOptions& options) {
  // Each step item's table: the blocks up to its last row's position in this step.
  std::vector<uint32_t> last_position(plan.items.size(), 0);
  for (uint32_t r = 0; r < plan.rows(); ++r) last_position[plan.row_items[r]] = plan.positions[r];
  for (size_t i = 0; i < plan.items.size(); ++i) {
    StepPlan::Item& item = plan.items[i];
    item.table_offset = static_cast<uint32_t>(plan.tables.size());
    item.table_blocks = last_position[i] / kKvBlockPositions + 1;
    const std::span<const uint32_t> table = items[item.eval_item].block_table;
    plan.tables.insert(plan.tables.end(), table.begin(), table.begin() + item.table_blocks);
  }
  plan.splits = choose_splits(plan, options);
}

}  // namespace

std::vector<StepPlan> plan_steps(std::span<const EvalItem> items, const StepPlanOptions& options) {
  std::vector<StepPlan> steps;
  const uint32_t step_rows = std::max<uint32_t>(1, options.step_rows);
  const uint32_t tile_rows = std::max<uint32_t>(1, options.tile_rows);
  for (size_t i = 0; i < items.size(); ++i) {
    const EvalItem& item = items[i];
    const size_t count = item.tokens.size();
    for (size_t t = 0; t < count; ++t) {
      if (steps.empty() || steps.back().rows() == step_rows) steps.emplace_back();
      StepPlan& plan = steps.back();
      const auto row = plan.rows();
      if (plan.items.empty() || plan.items.back().eval_item != i)
        plan.items.push_back(StepPlan::Item{static_cast<uint32_t>(i), 0, 0});
      const auto step_item = static_cast<uint32_t>(plan.items.size() - 1);
      plan.tokens.push_back(item.tokens[t]);
      plan.positions.push_back(item.start + static_cast<uint32_t>(t));
      plan.row_items.push_back(step_item);
      if (!plan.tiles.empty() && plan.tiles.back().item == step_item && plan.tiles.back().rows < tile_rows)
        ++plan.tiles.back().rows;
      else
        plan.tiles.push_back(StepPlan::Tile{row, 1, step_item});
      if (t + item.logits_count >= count)
        plan.logits.push_back(
            StepPlan::Logit{row, static_cast<uint32_t>(i), static_cast<uint32_t>(t + item.logits_count - count)});
    }
  }
  for (StepPlan& plan : steps) finish_step(plan, items, options);
  return steps;
}

Status check_eval_items(std::span<const EvalItem> items, uint32_t max_positions) {
  for (size_t i = 0; i < items.size(); ++i) {
    const EvalItem& item = items[i];
    if (item.tokens.empty()) continue;
    const std::string name = "eval item " + std::to_string(i);
    if (item.kv == nullptr) return make_error(name + " has no K/V storage");
    const uint64_t end = uint64_t{item.start} + item.tokens.size();
    if (end > max_positions)
      return make_error(name + " reaches position " + std::to_string(end - 1) + ", past the context of " +
                        std::to_string(max_positions));
    const uint64_t blocks = (end + kKvBlockPositions - 1) / kKvBlockPositions;
    if (item.block_table.size() < blocks)
      return make_error(name + " has a block table of " + std::to_string(item.block_table.size()) + " blocks for " +
                        std::to_string(end) + " positions");
    const uint32_t physical = item.kv->num_blocks();
    for (uint64_t b = 0; b < blocks; ++b)
      if (item.block_table[b] >= physical)
        return make_error(name + " names block " + std::to_string(item.block_table[b]) + " of a storage of " +
                          std::to_string(physical));
  }
  return ok_status();
}

StepMetadataLayout StepMetadataLayout::make(uint32_t row_capacity, uint64_t table_capacity) {
  StepMetadataLayout layout;
  layout.row_capacity = row_capacity;
  layout.table_capacity = table_capacity;
  uint64_t next = 0;
  const auto take = [&](uint64_t& offset, uint64_t bytes) {
    offset = next;
    next += (bytes + 15) / 16 * 16;
  };
  const uint64_t words = uint64_t{row_capacity} * sizeof(uint32_t);
  take(layout.tokens, words);
  take(layout.positions, words);
  take(layout.row_items, words);
  take(layout.tile_first_rows, words);
  take(layout.tile_rows, words);
  take(layout.tile_items, words);
  take(layout.item_table_offsets, words);
  take(layout.logit_rows, words);
  take(layout.kv_bases, uint64_t{row_capacity} * sizeof(uint64_t));
  take(layout.tables, table_capacity * sizeof(uint32_t));
  layout.bytes = next;
  return layout;
}

void pack_step_metadata(const StepPlan& plan, const StepMetadataLayout& layout, std::span<const uint64_t> kv_base,
                        uint8_t* buffer) {
  const auto put = [&](uint64_t offset, const std::vector<uint32_t>& values) {
    if (!values.empty()) std::memcpy(buffer + offset, values.data(), values.size() * sizeof(uint32_t));
  };
  put(layout.tokens, plan.tokens);
  put(layout.positions, plan.positions);
  put(layout.row_items, plan.row_items);
  std::vector<uint32_t> first_rows, tile_rows, tile_items, table_offsets, logit_rows;
  for (const StepPlan::Tile& tile : plan.tiles) {
    first_rows.push_back(tile.first_row);
    tile_rows.push_back(tile.rows);
    tile_items.push_back(tile.item);
  }
  std::vector<uint64_t> bases;
  for (const StepPlan::Item& item : plan.items) {
    table_offsets.push_back(item.table_offset);
    bases.push_back(kv_base[item.eval_item]);
  }
  for (const StepPlan::Logit& logit : plan.logits) logit_rows.push_back(logit.row);
  put(layout.tile_first_rows, first_rows);
  put(layout.tile_rows, tile_rows);
  put(layout.tile_items, tile_items);
  put(layout.item_table_offsets, table_offsets);
  put(layout.logit_rows, logit_rows);
  if (!bases.empty()) std::memcpy(buffer + layout.kv_bases, bases.data(), bases.size() * sizeof(uint64_t));
  put(layout.tables, plan.tables);
}

}  // namespace kipp::cuda
