// The training gates' comparison of a flat FP32 buffer (parameters, gradients or adapters)
// against a reference's safetensors, tensor by tensor, as one PASS/FAIL line.
#pragma once

#include <cmath>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "format/safetensors.h"
#include "gate_report.h"
#include "train/parameters.h"

namespace kipp::gates {

// Worst of max|actual - expected| / max|expected| over `tensors`, one line per check.
inline void compare_tensors(const std::string& what, std::span<const train::ParamTensor> tensors,
                            std::span<const float> actual, const SafetensorsFile& expected, double tolerance) {
  double worst = 0;
  std::string worst_name = "(none)";
  for (const train::ParamTensor& t : tensors) {
    const SafetensorsTensor* ref = expected.find(t.name);
    if (!ref || ref->dtype != SafetensorsDtype::F32 || ref->shape != t.shape) {
      return report(false, what, "reference lacks an F32 tensor " + t.name + " of the layout's shape");
    }
    std::vector<float> values(t.count);
    std::memcpy(values.data(), expected.data(*ref).data(), t.count * sizeof(float));
    double max_ref = 0, max_diff = 0;
    for (uint64_t i = 0; i < t.count; ++i) {
      max_ref = std::max(max_ref, std::fabs(double(values[i])));
      const double diff = std::fabs(double(actual[t.offset + i]) - double(values[i]));
      if (!(diff <= max_diff)) max_diff = diff;  // a NaN counts as the worst
    }
    const double relative = max_ref > 0 ? max_diff / max_ref : max_diff;
    if (!(relative <= worst)) {
      worst = relative;
      worst_name = t.name;
    }
  }
  report(worst <= tolerance, what,
         "worst " + scientific(worst) + " (" + worst_name + ", bound " + scientific(tolerance) + ") over " +
             std::to_string(tensors.size()) + " tensors");
}

}  // namespace kipp::gates
