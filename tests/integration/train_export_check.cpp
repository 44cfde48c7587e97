// The exported GGUF serves what the trainer trained: the inference engine's logits on the
// GGUF `kipp convert` made from a training checkpoint equal the trainer's own forward pass on
// that checkpoint (FP32 weights), NMSE <= 5e-5 over the full vocabulary at every position of a
// text prompt, with the same argmax at (nearly) every position.
// Usage: train_export_check CHECKPOINT_DIR MODEL.gguf
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/files.h"
#include "runtime/engine.h"
#include "train/parameters.h"
#include "train/training_model.h"

namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "FAIL: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kipp;
  if (argc != 3) return fail("usage: train_export_check CHECKPOINT_DIR MODEL.gguf");
  const std::string checkpoint = argv[1], gguf = argv[2];

  auto engine = Engine::open(gguf);
  if (!engine) return fail(engine.message());
  const ModelConfig& config = (*engine)->config();
  const std::string prompt =
      "Kipp trains small models of the Qwen3 architecture and serves them: the same forward pass, "
      "the same tokenizer, one file format.";
  auto ids = (*engine)->tokenizer().encode(prompt);
  if (!ids) return fail(ids.message());
  const auto positions = uint32_t(ids->size());
  const size_t vocab = config.vocab_size;

  std::vector<float> served(positions * vocab);
  Status status = (*engine)->eval_stateless(*ids, positions, served.data());
  if (!status) return fail(status.message());

  const train::ParameterLayout layout(config);
  std::vector<float> params(layout.total());
  status = train::load_parameters(layout, checkpoint, params);
  if (!status) return fail(status.message());
  train::TrainingModelOptions options;
  options.max_batch = 1;
  options.seq_len = positions;
  auto model = train::TrainingModel::create(layout, options);
  if (!model) return fail(model.message());
  std::vector<int32_t> inputs(ids->begin(), ids->end());
  std::vector<float> trained(served.size());
  status = (*model)->logits(params, inputs, 1, positions, trained);
  if (!status) return fail(status.message());

  double error = 0, norm = 0;
  uint32_t argmax_equal = 0;
  for (uint32_t p = 0; p < positions; ++p) {
    const float* a = served.data() + p * vocab;
    const float* b = trained.data() + p * vocab;
    size_t best_a = 0, best_b = 0;
    for (size_t v = 0; v < vocab; ++v) {
      error += (double(a[v]) - b[v]) * (double(a[v]) - b[v]);
      norm += double(b[v]) * b[v];
      if (a[v] > a[best_a]) best_a = v;
      if (b[v] > b[best_b]) best_b = v;
    }
    argmax_equal += best_a == best_b;
  }
  const double nmse = error / norm;
  std::printf("positions %u, NMSE %.3e (gate 5e-5), argmax equal at %u/%u positions\n", positions, nmse, argmax_equal,
              positions);
  if (!(nmse <= 5e-5)) return fail("NMSE above 5e-5");
  // BF16 weights may flip a near-tie; more than one flip means a real difference.
  if (argmax_equal + 1 < positions) return fail("argmax differs at more than one position");
  return 0;
}
