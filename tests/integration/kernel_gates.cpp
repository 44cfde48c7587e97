// Gates of the CPU kernels on whole models.
//   kernel_gates simd MODEL.gguf...
//     For each model: the logits of every position of a few prompts from every fast kernel
//     table this CPU runs against the scalar reference table: NMSE <= 1e-5 per position and the
//     same argmax. The fast tables round each product's input (to BF16, or to Q8 codes for
//     quantized weights) where the reference multiplies the FP32 activations, so the bound
//     covers that rounding as well as their sum orders (docs/PERFORMANCE.md, Numerics).
//   kernel_gates quant BF16.gguf Q8_0.gguf AFFINE4.gguf
//     The quantized conversions of one checkpoint against its BF16 conversion, every position
//     of the prompts: Q8_0 must pick the same argmax everywhere with NMSE <= 1e-3 (near
//     lossless); affine4 (4-bit, Q4-class) the same argmax at >= 90% of positions and NMSE <=
//     5e-2. The measured agreement and NMSE are printed (docs/PERFORMANCE.md records them).
// One line per check, then a summary; the exit status is non-zero if any check failed.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gate_report.h"
#include "kernels/cpu/kernels.h"
#include "runtime/engine.h"

namespace {

using namespace kipp;
using gates::report;
using gates::scientific;

const char* const kPrompts[] = {
    "Hello world, this is Kipp speaking.",
    "The lighthouse keeper climbed the spiral stairs every evening at dusk, carrying a lantern, a notebook and a "
    "flask of tea. From the gallery he could see the fishing boats returning to the harbour.",
    "<|im_start|>user\nWhat is two plus two? Answer briefly.<|im_end|>\n<|im_start|>assistant\n",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
};

struct Logits {
  std::vector<float> values;  // positions * vocab
  size_t positions = 0;
};

Expected<std::unique_ptr<Engine>> open(const std::string& path, const std::string& kernels) {
  EngineOptions options;
  options.kernels = kernels;
  options.threads = 2;
  options.verify_content_hash = false;
  return Engine::open(path, options);
}

Expected<Logits> all_logits(Engine& engine, const std::vector<uint32_t>& tokens) {
  Logits logits;
  logits.positions = tokens.size();
  logits.values.resize(tokens.size() * engine.vocab_size());
  KIPP_RETURN_IF_ERROR(engine.eval_stateless(tokens, static_cast<uint32_t>(tokens.size()), logits.values.data()));
  return logits;
}

struct Comparison {
  double worst_nmse = 0;
  size_t positions = 0;
  size_t argmax_equal = 0;
};

// Every prompt through `candidate` and `baseline` (tokenized by the baseline's tokenizer).
Expected<Comparison> compare(Engine& candidate, Engine& baseline) {
  Comparison result;
  const size_t vocab = baseline.vocab_size();
  for (const char* prompt : kPrompts) {
    KIPP_ASSIGN_OR_RETURN(std::vector<uint32_t> tokens, baseline.tokenize(prompt));
    KIPP_ASSIGN_OR_RETURN(Logits expected, all_logits(baseline, tokens));
    KIPP_ASSIGN_OR_RETURN(Logits actual, all_logits(candidate, tokens));
    for (size_t p = 0; p < tokens.size(); ++p) {
      const std::span<const float> a(actual.values.data() + p * vocab, vocab);
      const std::span<const float> e(expected.values.data() + p * vocab, vocab);
      result.worst_nmse = std::max(result.worst_nmse, gates::nmse(a, e));
      result.argmax_equal += gates::argmax(a) == gates::argmax(e) ? 1 : 0;
      ++result.positions;
    }
  }
  return result;
}

std::string describe(const Comparison& c) {
  return "max NMSE " + scientific(c.worst_nmse) + ", argmax equal at " + std::to_string(c.argmax_equal) + "/" +
         std::to_string(c.positions) + " positions";
}

// A fast table against the reference on the trained checkpoint (its BF16, Q8_0 and affine4
// conversions): the input rounding moves the logits far less than this, a wrong kernel far more.
constexpr double kFastTableNmse = 1e-5;

int run_simd(const std::vector<std::string>& models) {
  for (const std::string& path : models) {
    auto reference = open(path, "reference");
    if (!reference.ok()) {
      report(false, path, reference.message());
      continue;
    }
    for (const kernels::KernelTable* table : kernels::available_kernel_tables()) {
      const std::string name = table->name;
      if (name == "reference") continue;
      const std::string what = path + ": " + name + " vs reference kernels";
      auto fast = open(path, name);
      if (!fast.ok()) {
        report(false, what, fast.message());
        continue;
      }
      auto comparison = compare(**fast, **reference);
      if (!comparison.ok()) {
        report(false, what, comparison.message());
        continue;
      }
      const Comparison& c = *comparison;
      report(c.worst_nmse <= kFastTableNmse && c.argmax_equal == c.positions, what,
             describe(c) + " (bound NMSE " + scientific(kFastTableNmse) + ", every argmax)");
    }
  }
  return 0;
}

int run_quant(const std::string& bf16, const std::string& q8_0, const std::string& affine4) {
  auto baseline = open(bf16, "");
  if (!baseline.ok()) {
    report(false, bf16, baseline.message());
    return 0;
  }
  struct Bound {
    const std::string* path;
    const char* name;
    double max_nmse;
    double min_agreement;
  };
  for (const Bound& bound : {Bound{&q8_0, "q8_0", 1e-3, 1.0}, Bound{&affine4, "affine4", 5e-2, 0.9}}) {
    auto quantized = open(*bound.path, "");
    if (!quantized.ok()) {
      report(false, *bound.path, quantized.message());
      continue;
    }
    auto comparison = compare(**quantized, **baseline);
    if (!comparison.ok()) {
      report(false, *bound.path, comparison.message());
      continue;
    }
    const Comparison& c = *comparison;
    const double agreement = static_cast<double>(c.argmax_equal) / static_cast<double>(c.positions);
    report(c.worst_nmse <= bound.max_nmse && agreement >= bound.min_agreement, std::string(bound.name) + " vs bf16",
           describe(c) + " (bounds: NMSE " + scientific(bound.max_nmse) +
               ", agreement >= " + scientific(bound.min_agreement) + ")");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() >= 2 && args[0] == "simd") {
    run_simd(std::vector<std::string>(args.begin() + 1, args.end()));
  } else if (args.size() == 4 && args[0] == "quant") {
    run_quant(args[1], args[2], args[3]);
  } else {
    std::fprintf(stderr, "usage: kernel_gates simd MODEL.gguf... | kernel_gates quant BF16 Q8_0 AFFINE4\n");
    return 2;
  }
  std::printf("kernel_gates: %d checks, %d failed\n", gates::checks_run, gates::checks_failed);
  return gates::checks_failed == 0 && gates::checks_run > 0 ? 0 : 1;
}
