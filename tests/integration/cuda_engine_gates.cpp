// Gates of the CUDA engine against the CPU engine, and against the PyTorch reference
// (tools/torch_reference.py) as a second oracle:
//   cuda_engine_gates MODELS_DIR PYTHON REFERENCE_SCRIPT SCRATCH_DIR
// MODELS_DIR holds {tiny,qwen3-0.6b}-{bf16,q8_0,affine4}.gguf and the checkpoints the BF16 ones
// were converted from ({tiny,qwen3-0.6b}-hf). Without a usable GPU it prints "SKIPPED: <why>" and
// exits 77. Per model and weight type, CUDA against the CPU, same argmax (near-ties as in
// logit_gates.h) and full-logit NMSE <= 1e-4:
//   prefill of 1, 67 and 512 tokens (every position's logits for 67, the last one's for 1 and
//   512); 32 cached decode steps, both engines fed the CPU's greedy token, each step judged.
// On CUDA alone: eval_batch of sessions of different lengths vs each alone (1e-4, same argmax);
// a reversed block table vs the identity (bitwise: same device, same work); a pooled session
// adopting a published prefix, multi-row logits vs one position at a time, truncate and
// re-eval, and eval_stateless, each vs a plain session (1e-4, same argmax: the row counts of the
// steps differ, so the products may take other paths). For the BF16 models, every position of
// the 67-token prompt on CUDA vs the reference at engine_gates' fast-table bounds.
// One line per check with the measured NMSE, then a summary; exit status 1 if any failed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/cuda/cuda_device.h"
#include "gate_report.h"
#include "logit_gates.h"
#include "runtime/engine.h"

namespace {

using namespace kipp;
namespace fs = std::filesystem;
using gates::ArgmaxTally;
using gates::compare_rows;
using gates::report;
using gates::scientific;

constexpr int kSkipped = 77;  // CTest's SKIP_RETURN_CODE
constexpr double kCpuNmse = 1e-4;
constexpr uint32_t kDecodeSteps = 32;
constexpr uint32_t kPrefillLengths[] = {1, 67, 512};
constexpr uint32_t kAllRowsLength = 67;  // the prefill whose every position is compared
// The longest step: a 512-token prefill runs as one step on both engines, so the GPU's
// many-row product paths are gated too.
constexpr uint32_t kMaxStepTokens = 512;

// engine_gates' bounds for the fast tables, which round product inputs to BF16 as the CUDA
// products do (tests/cmake/engine_gates.cmake explains them): NMSE and argmax agreement.
struct ReferenceBounds {
  double nmse;
  double min_agreement;
};

struct ModelCase {
  const char* name;
  ReferenceBounds reference;
};
constexpr ModelCase kModels[] = {{"tiny", {5e-5, 0.98}}, {"qwen3-0.6b", {2e-3, 0.95}}};
constexpr const char* kQuants[] = {"bf16", "q8_0", "affine4"};

// Ordinary text, repeated as needed: real token statistics, spanning many K/V blocks.
constexpr const char* kText =
    "The lighthouse keeper climbed the spiral stairs every evening at dusk, carrying a lantern, a notebook and a "
    "flask of tea. From the gallery he could see the fishing boats returning to the harbour, the gulls circling "
    "above the nets, and far to the west the dark line of the storm that the radio had promised for midnight. ";

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

bool bitwise_equal(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

// The first `count` ids of kText repeated.
std::vector<uint32_t> text_ids(const Engine& engine, size_t count) {
  auto once = engine.tokenize(kText);
  std::vector<uint32_t> ids;
  if (!once.ok() || once->empty()) return ids;
  while (ids.size() < count) ids.insert(ids.end(), once->begin(), once->end());
  ids.resize(count);
  return ids;
}

Expected<std::unique_ptr<Engine>> open_engine(const std::string& path, BackendKind backend, uint32_t pool_blocks = 0) {
  EngineOptions options;
  options.backend = backend;
  options.max_step_tokens = kMaxStepTokens;
  options.pool_blocks = pool_blocks;
  options.verify_content_hash = false;  // the models are made where the gate runs
  return Engine::open(path, options);
}

// The logits of the last `rows` positions of `ids`, evaluated in one fresh private session.
Expected<std::vector<float>> eval_rows(Engine& engine, std::span<const uint32_t> ids, uint32_t rows,
                                       std::vector<uint32_t> block_order = {}) {
  SessionOptions options;
  options.capacity = static_cast<uint32_t>(ids.size());
  options.block_order = std::move(block_order);
  KIPP_ASSIGN_OR_RETURN(auto session, engine.create_session(options));
  std::vector<float> logits(size_t{rows} * engine.vocab_size());
  KIPP_RETURN_IF_ERROR(session->eval(ids, rows, logits.data()));
  return logits;
}

// Compares `what` when both sides evaluated, else reports the error.
void compare_results(const std::string& what, const Expected<std::vector<float>>& actual,
                     const Expected<std::vector<float>>& expected, size_t rows, size_t vocab, double bound) {
  if (!actual.ok()) return report(false, what, "cuda: " + actual.message());
  if (!expected.ok()) return report(false, what, "expected side: " + expected.message());
  compare_rows(what, *actual, *expected, rows, vocab, bound, true);
}

void gate_prefill(const std::string& label, Engine& cuda, Engine& cpu, std::span<const uint32_t> ids) {
  for (const uint32_t length : kPrefillLengths) {
    const uint32_t rows = length == kAllRowsLength ? length : 1;
    const auto prompt = ids.first(length);
    compare_results(label + ": prefill " + std::to_string(length) + (rows > 1 ? " (all positions)" : " (last)"),
                    eval_rows(cuda, prompt, rows), eval_rows(cpu, prompt, rows), rows, cuda.vocab_size(), kCpuNmse);
  }
}

// The prompt, then kDecodeSteps single tokens through each engine's cache, both fed the CPU's
// greedy choice; every step's logits compared.
void gate_decode(const std::string& label, Engine& cuda, Engine& cpu, std::span<const uint32_t> prompt) {
  const size_t vocab = cuda.vocab_size();
  const std::string what = label + ": " + std::to_string(kDecodeSteps) + " cached decode steps";
  SessionOptions options;
  options.capacity = static_cast<uint32_t>(prompt.size()) + kDecodeSteps;
  auto on_cuda = cuda.create_session(options);
  auto on_cpu = cpu.create_session(options);
  if (!on_cuda.ok() || !on_cpu.ok()) return report(false, what, "cannot create the sessions");
  std::vector<float> cuda_rows(kDecodeSteps * vocab), cpu_rows(kDecodeSteps * vocab), cpu_last(vocab);
  Status status = (*on_cpu)->eval(prompt, 1, cpu_last.data());
  if (status.ok()) status = (*on_cuda)->eval(prompt, 0, nullptr);
  for (uint32_t step = 0; status.ok() && step < kDecodeSteps; ++step) {
    const uint32_t next = static_cast<uint32_t>(gates::argmax(cpu_last));
    const std::span<const uint32_t> token(&next, 1);
    status = (*on_cuda)->eval(token, 1, cuda_rows.data() + step * vocab);
    if (status.ok()) status = (*on_cpu)->eval(token, 1, cpu_rows.data() + step * vocab);
    std::copy_n(cpu_rows.data() + step * vocab, vocab, cpu_last.data());
  }
  if (!status.ok()) return report(false, what, status.message());
  compare_rows(what, cuda_rows, cpu_rows, kDecodeSteps, vocab, kCpuNmse, true);
}

// eval_batch of three sessions of different lengths (all positions), then one batched decode
// token each, against the same work session by session.
void gate_batch(const std::string& label, Engine& cuda, std::span<const uint32_t> ids) {
  const size_t vocab = cuda.vocab_size();
  const std::vector<std::span<const uint32_t>> prompts{ids.first(1), ids.first(kAllRowsLength), ids.first(100)};
  const uint32_t next = ids[200];
  const std::span<const uint32_t> token(&next, 1);
  std::vector<std::unique_ptr<Session>> batched, alone;
  std::vector<std::vector<float>> batched_rows, alone_rows, batched_step, alone_step;
  std::vector<BatchItem> items;
  for (const auto& prompt : prompts) {
    SessionOptions options;
    options.capacity = static_cast<uint32_t>(prompt.size()) + 1;
    auto a = cuda.create_session(options);
    auto b = cuda.create_session(options);
    if (!a.ok() || !b.ok()) return report(false, label + ": eval_batch", "cannot create the sessions");
    batched.push_back(std::move(*a));
    alone.push_back(std::move(*b));
    batched_rows.emplace_back(prompt.size() * vocab);
    alone_rows.emplace_back(prompt.size() * vocab);
    batched_step.emplace_back(vocab);
    alone_step.emplace_back(vocab);
  }
  for (size_t i = 0; i < prompts.size(); ++i)
    items.push_back(
        BatchItem{batched[i].get(), prompts[i], static_cast<uint32_t>(prompts[i].size()), batched_rows[i].data()});
  Status status = cuda.eval_batch(items);
  for (size_t i = 0; status.ok() && i < prompts.size(); ++i)
    items[i] = BatchItem{batched[i].get(), token, 1, batched_step[i].data()};
  if (status.ok()) status = cuda.eval_batch(items);
  for (size_t i = 0; status.ok() && i < prompts.size(); ++i) {
    status = alone[i]->eval(prompts[i], static_cast<uint32_t>(prompts[i].size()), alone_rows[i].data());
    if (status.ok()) status = alone[i]->eval(token, 1, alone_step[i].data());
  }
  if (!status.ok()) return report(false, label + ": eval_batch", status.message());
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string sequence = " (" + std::to_string(prompts[i].size()) + " tokens)";
    compare_rows(label + ": eval_batch prefill vs isolated" + sequence, batched_rows[i], alone_rows[i],
                 prompts[i].size(), vocab, kCpuNmse, true);
    compare_rows(label + ": eval_batch decode step vs isolated" + sequence, batched_step[i], alone_step[i], 1, vocab,
                 kCpuNmse, true);
  }
}

// The cache's bookkeeping on CUDA: block tables, multi-row logits, truncate, stateless eval.
void gate_invariants(const std::string& label, Engine& cuda, std::span<const uint32_t> ids) {
  const size_t vocab = cuda.vocab_size();
  const auto prompt = ids.first(100);
  const size_t n = prompt.size();
  const auto plain = eval_rows(cuda, prompt, static_cast<uint32_t>(n));
  if (!plain.ok()) return report(false, label + ": plain eval", plain.message());

  const uint32_t blocks = static_cast<uint32_t>((n + kKvBlockPositions - 1) / kKvBlockPositions);
  std::vector<uint32_t> reversed;
  for (uint32_t b = 0; b < blocks; ++b) reversed.push_back(blocks - 1 - b);
  const auto scrambled = eval_rows(cuda, prompt, static_cast<uint32_t>(n), reversed);
  report(scrambled.ok() && bitwise_equal(*scrambled, *plain), label + ": reversed block table vs identity (bitwise)",
         scrambled.ok() ? std::to_string(blocks) + " blocks, all " + std::to_string(n) + " positions"
                        : scrambled.message());

  {
    SessionOptions options;
    options.capacity = static_cast<uint32_t>(n);
    auto session = cuda.create_session(options);
    std::vector<float> one_at_a_time(n * vocab);
    Status status = session.ok() ? Status() : Status(session.error());
    for (size_t p = 0; status.ok() && p < n; ++p)
      status = (*session)->eval(prompt.subspan(p, 1), 1, one_at_a_time.data() + p * vocab);
    if (!status.ok()) {
      report(false, label + ": one position at a time", status.message());
    } else {
      compare_rows(label + ": multi-row logits vs one position at a time", *plain, one_at_a_time, n, vocab, kCpuNmse,
                   true);
    }
  }
  {
    const size_t keep = 50;
    SessionOptions options;
    options.capacity = static_cast<uint32_t>(n);
    auto session = cuda.create_session(options);
    std::vector<float> again((n - keep) * vocab);
    Status status = session.ok() ? (*session)->eval(prompt, 0, nullptr) : Status(session.error());
    if (status.ok()) status = (*session)->truncate(static_cast<uint32_t>(keep));
    if (status.ok()) status = (*session)->eval(prompt.subspan(keep), static_cast<uint32_t>(n - keep), again.data());
    if (!status.ok()) {
      report(false, label + ": truncate and re-eval", status.message());
    } else {
      compare_rows(label + ": truncate to " + std::to_string(keep) + " and re-eval vs plain", again,
                   std::span<const float>(*plain).subspan(keep * vocab), n - keep, vocab, kCpuNmse, true);
    }
  }
  {
    std::vector<float> stateless(n * vocab);
    const Status status = cuda.eval_stateless(prompt, static_cast<uint32_t>(n), stateless.data());
    if (!status.ok()) {
      report(false, label + ": eval_stateless", status.message());
    } else {
      compare_rows(label + ": eval_stateless vs session", stateless, *plain, n, vocab, kCpuNmse, true);
    }
  }
}

// A pooled session adopting the prefix another published, against the plain evaluation.
void gate_pooled(const std::string& label, const std::string& path, std::span<const uint32_t> ids,
                 std::span<const float> expected_last) {
  const std::string what = label + ": pooled shared prefix vs unshared";
  auto engine = open_engine(path, BackendKind::Cuda, /*pool_blocks=*/8);
  if (!engine.ok()) return report(false, what, engine.message());
  const auto prompt = ids.first(100);
  SessionOptions pooled;
  pooled.pooled = true;
  pooled.capacity = static_cast<uint32_t>(prompt.size());
  auto first = (*engine)->create_session(pooled);
  auto second = (*engine)->create_session(pooled);
  if (!first.ok() || !second.ok()) return report(false, what, "cannot create the pooled sessions");
  Status status = (*first)->eval(prompt, 0, nullptr);
  if (!status.ok()) return report(false, what, status.message());
  (*first)->reset();
  auto adopted = (*second)->match_prefix(prompt);
  if (!adopted.ok()) return report(false, what, adopted.message());
  const size_t expected_adopted = (prompt.size() - 1) / kKvBlockPositions * kKvBlockPositions;
  if (*adopted != expected_adopted)
    return report(false, what,
                  "adopted " + std::to_string(*adopted) + " positions, expected " + std::to_string(expected_adopted));
  std::vector<float> last((*engine)->vocab_size());
  status = (*second)->eval(prompt.subspan(*adopted), 1, last.data());
  if (!status.ok()) return report(false, what, status.message());
  compare_rows(what + " (" + std::to_string(*adopted) + " positions adopted)", last, expected_last, 1, last.size(),
               kCpuNmse, true);
}

// Every position of the 67-token prompt on CUDA against the reference.
void gate_reference(const std::string& label, Engine& cuda, const gates::TorchReference& reference,
                    const fs::path& scratch, std::span<const uint32_t> ids, const ReferenceBounds& bounds) {
  const auto prompt = ids.first(kAllRowsLength);
  const auto logits = eval_rows(cuda, prompt, kAllRowsLength);
  if (!logits.ok()) return report(false, label + ": reference", logits.message());
  auto dir = gates::run_torch_reference(reference, scratch / label, prompt, "--round-kv-bf16 --round-inputs-bf16");
  if (!dir.ok()) return report(false, label + ": reference", dir.message());
  const auto expected = gates::load_matrix(*dir, "logits", kAllRowsLength, cuda.vocab_size());
  if (!expected.ok()) return report(false, label + ": reference", expected.message());
  ArgmaxTally tally;
  compare_rows(label + ": cuda vs PyTorch reference, all " + std::to_string(kAllRowsLength) + " positions", *logits,
               *expected, kAllRowsLength, cuda.vocab_size(), bounds.nmse, true, &tally);
  const double agreement =
      tally.rows == 0 ? 0.0 : static_cast<double>(tally.agreeing) / static_cast<double>(tally.rows);
  report(tally.rows > 0 && agreement >= bounds.min_agreement, label + ": argmax agreement with the reference",
         std::to_string(tally.agreeing) + "/" + std::to_string(tally.rows) + " positions, at least " +
             scientific(bounds.min_agreement) + " required");
}

void gate_model(const fs::path& models, const ModelCase& model, const char* quant,
                const gates::TorchReference& reference_tool, const fs::path& scratch) {
  const std::string label = std::string(model.name) + "-" + quant;
  const std::string path = (models / (label + ".gguf")).string();
  const auto start = std::chrono::steady_clock::now();
  auto cpu = open_engine(path, BackendKind::Cpu);
  if (!cpu.ok()) return report(false, label + ": open on the cpu", cpu.message());
  auto cuda = open_engine(path, BackendKind::Cuda);
  if (!cuda.ok()) return report(false, label + ": open on cuda", cuda.message());
  const std::vector<uint32_t> ids = text_ids(**cuda, 512);
  if (ids.size() != 512) return report(false, label + ": tokenize", "the text gives no tokens");
  const BackendMemory memory = (*cuda)->backend().memory();
  std::printf("       %s on %s: weights %.1f MiB, scratch %.1f MiB, %.1f of %.1f GiB free\n", label.c_str(),
              memory.device.c_str(), static_cast<double>(memory.weight_bytes) / (1 << 20),
              static_cast<double>(memory.scratch_bytes) / (1 << 20),
              static_cast<double>(memory.device_free_bytes) / (1 << 30),
              static_cast<double>(memory.device_total_bytes) / (1 << 30));

  gate_prefill(label, **cuda, **cpu, ids);
  gate_decode(label, **cuda, **cpu, std::span<const uint32_t>(ids).first(kAllRowsLength));
  gate_batch(label, **cuda, ids);
  gate_invariants(label, **cuda, ids);
  const auto last = eval_rows(**cuda, std::span<const uint32_t>(ids).first(100), 1);
  if (last.ok())
    gate_pooled(label, path, ids, *last);
  else
    report(false, label + ": plain eval", last.message());
  if (std::string(quant) == "bf16") {
    const gates::TorchReference reference{reference_tool.python, reference_tool.script,
                                          (models / (std::string(model.name) + "-hf")).string()};
    gate_reference(label, **cuda, reference, scratch, ids, model.reference);
  }
  std::printf("       %s: %.1f s\n", label.c_str(), seconds_since(start));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: cuda_engine_gates MODELS_DIR PYTHON REFERENCE_SCRIPT SCRATCH_DIR\n");
    return 2;
  }
  const auto device = cuda_device_info();
  if (!device.ok()) {
    std::printf("SKIPPED: %s\n", device.message().c_str());
    return kSkipped;
  }
  std::printf("cuda_engine_gates: %s (compute %d.%d, driver %d, runtime %d), models in %s\n", device->name.c_str(),
              device->compute_major, device->compute_minor, device->driver_version, device->runtime_version, argv[1]);
  const fs::path models = argv[1], scratch = argv[4];
  const gates::TorchReference reference_tool{argv[2], argv[3], {}};
  const auto start = std::chrono::steady_clock::now();
  for (const ModelCase& model : kModels)
    for (const char* quant : kQuants) gate_model(models, model, quant, reference_tool, scratch);
  std::printf("cuda_engine_gates: %d checks, %d failed, %.1f s\n", gates::checks_run, gates::checks_failed,
              seconds_since(start));
  return gates::checks_failed == 0 && gates::checks_run > 0 ? 0 : 1;
}
