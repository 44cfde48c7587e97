// The CUDA backend's host-side schedule of an eval: the items' rows flattened in the CPU
// backend's order and cut into steps, each step's attention tiles, logit rows and block tables,
// and the one metadata buffer a step's kernels read (uploaded in one copy). Plain C++: no CUDA
// type, so it is tested without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"

namespace kipp::cuda {

struct StepPlanOptions {
  uint32_t step_rows = 1024;  // rows per step at most
  uint32_t tile_rows = 32;    // consecutive rows of one item per attention tile at most
  uint32_t num_heads = 1;
  uint32_t kv_heads = 1;
  // Attention splits each tile's context into this many parts at most, enough of them for
  // about `target_blocks` thread blocks, while rows * num_heads * splits <= partial_capacity.
  uint32_t max_splits = 16;
  uint32_t target_blocks = 264;
  uint64_t partial_capacity = 1;
};

// One step. Rows are numbered within the step; `items` maps the step's own item numbers to the
// eval's, and every per-row and per-tile item is a step item number.
struct StepPlan {
  struct Item {
    uint32_t eval_item;     // index into the eval's items
    uint32_t table_offset;  // its block table's first entry in `tables`
    uint32_t table_blocks;  // blocks covering the item's positions up to its last row here
  };
  struct Tile {
    uint32_t first_row;
    uint32_t rows;
    uint32_t item;
  };
  struct Logit {
    uint32_t row;        // the step row whose logits these are
    uint32_t eval_item;  // where they go: that item's logits, row `logit_row`
    uint32_t logit_row;
  };
  std::vector<uint32_t> tokens, positions, row_items;  // per row
  std::vector<Tile> tiles;
  std::vector<Item> items;
  std::vector<Logit> logits;
  std::vector<uint32_t> tables;  // the items' block tables, one after another
  uint32_t splits = 1;           // attention's parts per tile context

  uint32_t rows() const { return static_cast<uint32_t>(tokens.size()); }
  uint32_t max_rows_per_item() const;
};

std::vector<StepPlan> plan_steps(std::span<const EvalItem> items, const StepPlanOptions& options);

// What the kernels take on trust and would otherwise fault on (or corrupt another sequence's
// K/V with): every item has storage, positions below `max_positions` (the rows of the RoPE
// table), and a block table covering its positions with blocks of its storage.
Status check_eval_items(std::span<const EvalItem> items, uint32_t max_positions);

// The step metadata's place in one buffer: per-row, per-tile, per-item and per-logit arrays of
// fixed capacity (so the device addresses never change and a captured graph stays valid), the
// items' K/V base addresses, and the block tables last (only their used part is copied).
struct StepMetadataLayout {
  uint32_t row_capacity = 0;    // rows, tiles, items and logits per step at most
  uint64_t table_capacity = 0;  // block table entries per step at most
  // Byte offsets of the arrays (uint32 unless said).
  uint64_t tokens = 0, positions = 0, row_items = 0;
  uint64_t tile_first_rows = 0, tile_rows = 0, tile_items = 0;
  uint64_t item_table_offsets = 0;
  uint64_t logit_rows = 0;
  uint64_t kv_bases = 0;  // uint64 device addresses
  uint64_t tables = 0;
  uint64_t bytes = 0;  // the whole buffer

  static StepMetadataLayout make(uint32_t row_capacity, uint64_t table_capacity);
  // Bytes a step's upload copies: everything before the tables and the tables it uses.
  uint64_t used_bytes(const StepPlan& plan) const { return tables + plan.tables.size() * sizeof(uint32_t); }
};

// Writes the plan into `buffer` (layout.bytes bytes, 8-byte aligned); kv_base[i] is the device
// address of eval item i's K/V storage. The plan must fit the layout's capacities.
void pack_step_metadata(const StepPlan& plan, const StepMetadataLayout& layout, std::span<const uint64_t> kv_base,
                        uint8_t* buffer);

}  // namespace kipp::cuda
