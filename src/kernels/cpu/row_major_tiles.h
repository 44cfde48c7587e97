// The order in which the row-major BF16 products (matrices left as stored) walk their tiles:
// output blocks of `per_block` weight rows; within a block, tiles of up to `max_rows` input rows,
// each over the block's outputs in steps of tile_width(rows). Each tile's weights are loaded once
// for all its input rows, and a block stays in cache while every row tile passes over it.
#pragma once

#include <algorithm>
#include <cstddef>

namespace kipp::kernels {

// visit(first_row, rows, first_output, outputs, fetch) for every tile. `fetch` is true for the
// first and last row tiles of a block: they ask for the next block, so it streams in while this
// one is multiplied (the hardware prefetchers fall behind when several rows share each weight
// load); every tile fetching would slow prefill with requests for lines already on their way.
template <class TileWidth, class Visit>
inline void for_each_row_major_tile(size_t weight_rows, size_t input_rows, size_t per_block, size_t max_rows,
                                    const TileWidth& tile_width, const Visit& visit) {
  for (size_t block = 0; block < weight_rows; block += per_block) {
    const size_t block_end = std::min(weight_rows, block + per_block);
    for (size_t row = 0; row < input_rows;) {
      const size_t rows = std::min(max_rows, input_rows - row);
      const size_t width = tile_width(rows);
      const bool fetch = row == 0 || row + rows == input_rows;
      for (size_t o = block; o < block_end; o += width) visit(row, rows, o, std::min(width, block_end - o), fetch);
      row += rows;
    }
  }
}

}  // namespace kipp::kernels
