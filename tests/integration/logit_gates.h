// What the logit gates (engine_gates, cuda_engine_gates) share: running the PyTorch reference
// (tools/torch_reference.py) on a token sequence, reading its arrays back, and the row-by-row
// comparison of two logit matrices with its near-tie rule.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/status.h"
#include "gate_report.h"
#include "npy.h"

namespace kipp::gates {

// The python, the reference script and the HF folder of the checkpoint it reads.
struct TorchReference {
  std::string python;
  std::string script;
  std::string hf_dir;
};

inline std::string shell_quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs the reference on `ids` (all positions, plus `flags`) into `dir` and returns it. Earlier
// outputs are removed first so that a failed run cannot leave stale arrays to compare against.
inline Expected<std::filesystem::path> run_torch_reference(const TorchReference& reference,
                                                           const std::filesystem::path& dir,
                                                           std::span<const uint32_t> ids, const std::string& flags) {
  std::error_code error;
  std::filesystem::remove_all(dir, error);
  std::filesystem::create_directories(dir, error);
  if (error) return make_error("cannot create " + dir.string() + ": " + error.message());
  const std::filesystem::path ids_path = dir / "ids.txt", log_path = dir / "reference.log";
  {
    std::ofstream ids_file(ids_path);
    for (uint32_t id : ids) ids_file << id << '\n';
    if (!ids_file) return make_error("cannot write " + ids_path.string());
  }
  const std::string command = shell_quoted(reference.python) + " " + shell_quoted(reference.script) + " --model " +
                              shell_quoted(reference.hf_dir) + " --ids-file " + shell_quoted(ids_path.string()) +
                              " --all-positions " + flags + " --out-dir " + shell_quoted(dir.string()) + " > " +
                              shell_quoted(log_path.string()) + " 2>&1";
  const auto start = std::chrono::steady_clock::now();
  if (std::system(command.c_str()) != 0) {
    auto log = read_text_file(log_path.string());
    return make_error("the reference failed: " + command + "\n" + (log.ok() ? *log : log.message()));
  }
  std::printf("       reference on %zu tokens: %.1f s\n", ids.size(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return dir;
}

// Loads `name`.npy as float32 and checks its shape is [rows, width].
inline Expected<std::vector<float>> load_matrix(const std::filesystem::path& dir, const std::string& name, size_t rows,
                                                size_t width) {
  const std::string path = (dir / (name + ".npy")).string();
  auto array = npy::read_float32(path);
  if (!array.ok()) return array.error();
  if (array->shape != std::vector<size_t>{rows, width})
    return make_error(path + ": shape is not [" + std::to_string(rows) + ", " + std::to_string(width) + "]");
  return std::move(array->values);
}

// Positions whose argmax a comparison judged, when a rate over many comparisons is judged once
// at the end instead of each comparison demanding every position (a short prompt's few
// positions would otherwise turn a rate into "every one").
struct ArgmaxTally {
  size_t rows = 0;
  size_t agreeing = 0;
};

// Row-by-row comparison of two [rows, width] matrices: the worst per-row NMSE against `bound`
// and, for logits, the argmax of every row. Where the argmaxes differ but the expected side's
// own logits of the two tokens are closer than the root-mean-square difference the NMSE bound
// allows that row (sqrt(bound x mean square of the expected row)), the row is a near-tie:
// either token is the right answer within the bound, and it counts as agreeing. With `tally`,
// the rows' agreement is added to it instead of being judged here.
inline void compare_rows(const std::string& what, std::span<const float> actual, std::span<const float> expected,
                         size_t rows, size_t width, double bound, bool same_argmax, ArgmaxTally* tally = nullptr) {
  if (actual.size() != rows * width || expected.size() != rows * width)
    return report(false, what,
                  "sizes differ: " + std::to_string(actual.size()) + " vs " + std::to_string(expected.size()));
  double worst = 0;
  size_t worst_row = 0, argmax_mismatches = 0, near_ties = 0, first_mismatch = 0;
  for (size_t r = 0; r < rows; ++r) {
    const auto a = actual.subspan(r * width, width), b = expected.subspan(r * width, width);
    // Written so that a NaN counts as the worst.
    const double row_nmse = nmse(a, b);
    if (!(row_nmse <= worst)) {
      worst = row_nmse;
      worst_row = r;
    }
    if (!same_argmax || argmax(a) == argmax(b)) continue;
    double mean_square = 0;
    for (const float v : b) mean_square += static_cast<double>(v) * v;
    mean_square /= static_cast<double>(width);
    const double margin = static_cast<double>(b[argmax(b)]) - b[argmax(a)];
    if (margin <= std::sqrt(bound * mean_square)) {
      ++near_ties;
    } else if (argmax_mismatches++ == 0) {
      first_mismatch = r;
    }
  }
  std::string detail = "max NMSE " + scientific(worst) + " (position " + std::to_string(worst_row) + ", bound " +
                       scientific(bound) + ") over " + std::to_string(rows) + " positions";
  if (same_argmax) {
    detail += ", argmax equal at " + std::to_string(rows - argmax_mismatches) + "/" + std::to_string(rows);
    if (near_ties > 0) detail += " (near-ties: " + std::to_string(near_ties) + ")";
    if (argmax_mismatches > 0) detail += " (first difference at position " + std::to_string(first_mismatch) + ")";
  }
  bool agreed = argmax_mismatches == 0;
  if (same_argmax && tally != nullptr) {
    tally->rows += rows;
    tally->agreeing += rows - argmax_mismatches;
    detail += ", judged over all prompts";
    agreed = true;
  }
  report(worst <= bound && agreed, what, detail);
}

}  // namespace kipp::gates
