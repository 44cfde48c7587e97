// `kipp bench`: the engine's prefill, decode and batched decode speeds on one model, each set
// against a limit this same command measures on this machine (read bandwidth for decode, peak
// multiply-add rate for prefill), with memory use and the machine facts a result needs to be
// compared. A table on stdout, progress on stderr, or one JSON document with --json.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/cuda/cuda_device.h"
#include "cli/backend_flag.h"
#include "cli/bench_report.h"
#include "cli/bench_runs.h"
#include "cli/commands.h"
#include "cli/verify_flag.h"
#include "core/files.h"
#include "core/machine_info.h"
#include "core/process_stats.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/machine_probe.h"
#include "runtime/engine.h"

namespace kipp::cli {
namespace {

constexpr const char* kBenchFooter = R"(
Measures, on --threads threads (0: one per hardware thread):
  probes   the memory read bandwidth (a STREAM-like sum over 512 MiB, best and median of 10
           passes, and one more pass before each decode token) and the peak multiply-add rate
           of FP32 FMA, the BF16 dot product (avx512_bf16) and the int8 dot product
           (avx512_vnni); skipped with --no-probe
  prefill  per --prompt-len L: --repeats fresh sessions each evaluating L pseudo-random ids in
           one step (logits of the last only); median, min and max tokens/s, and the FLOP rate
           as a fraction of the peak of the instruction the weights' type calls for
           (bf16 -> bf16 dot, q8_0/affine4 -> int8 dot, f32/f16 -> fp32 FMA)
  decode   after a prompt of the first --prompt-len, --gen tokens one eval each (argmax fed
           back); tokens/s over the per-token times, bytes read per token (every weight read
           per token + K/V at the run's mean context) and their rate against the bandwidth
           of the passes taken between the tokens (the same moments of a shared host):
           median token over median pass, and each token over the pass just before it
  batch    per --batch size N: N sessions with the same prompt length, then --gen eval_batch
           steps of one token each, each in the round of a decode token; aggregate tokens/s
           and its ratio to the decode token of its round, per step (sizes 0 and 1 skip it)
  memory   resident size at the end with every session open, and the peak since the first
           probes (neither counts a probe's buffer); K/V bytes per token and per decode session

--backend cuda runs the engine on the GPU: the host probes are replaced by the card's own
ceilings, measured in the same run (a 1 GiB device-to-device copy, bytes read + written per
second, and an 8192^3 cuBLASLt BF16 product; medians after warm-up); decode is set against the
copy and prefill against the BF16 product, and a "device" section (name, compute capability,
driver and runtime, memory after loading, ceilings) joins the JSON (--no-probe does not skip
them). Prefill 512 and 2048, batches of 8, 32 and 128 on a GPU:
  kipp bench --backend cuda -m qwen3-0.6b-bf16.gguf --prompt-len 512,2048 --batch 8,32,128

--json prints one JSON document (machine, command, model, every figure with its unit in the
key) on stdout instead of the table; --json FILE writes it to FILE and keeps the table.
docs/BENCH.md explains every figure and formula. Errors exit with status 2.

Examples:
  kipp bench --kernels
  kipp bench -m qwen3-0.6b-bf16.gguf --threads 2
  kipp bench -m qwen3-0.6b-q8_0.gguf --prompt-len 512 --gen 64 --json bench/results/x.json)";

constexpr int kExitError = 2;

int bench_fail(const std::string& message) {
  fail(message);
  return kExitError;
}

struct BenchArgs {
  std::string model;
  std::string prompt_lengths = "64,512";
  uint32_t generate = 128;
  uint32_t threads = 0;
  std::string batch_sizes = "8";
  BackendKind backend = BackendKind::Cpu;
  uint32_t repeats = 3;
  bool json = false;
  std::string json_file;  // empty: stdout
  bool no_probe = false;
  bool no_verify = false;
  bool list_kernels = false;
};

// The kernel tables this CPU runs, best last, and the one a run would use (KIPP_KERNELS or the
// best): what a user checks before and instead of a benchmark.
int list_kernel_tables() {
  const char* chosen = kernels::cpu_kernels().name;
  std::printf("kernel tables this CPU runs (best last):\n");
  for (const kernels::KernelTable* table : kernels::available_kernel_tables())
    if (std::string(table->name) == chosen)
      std::printf("  %-18s <- in use\n", table->name);
    else
      std::printf("  %s\n", table->name);
  const char* wanted = std::getenv("KIPP_KERNELS");
  if (wanted != nullptr && kernels::find_kernel_table(wanted) == nullptr)
    std::printf("KIPP_KERNELS=%s names no table this CPU runs; the best one is used\n", wanted);
  return 0;
}

// Comma-separated counts of at least `least` (0 or 1), for `option`.
Expected<std::vector<uint32_t>> parse_counts(const std::string& text, const std::string& option, uint32_t least,
                                             const char* example) {
  const auto bad = [&] {
    return make_error(option + " '" + text + "': expected " + (least == 0 ? "counts" : "token counts of at least 1") +
                      " separated by commas, e.g. " + example);
  };
  std::vector<uint32_t> lengths;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    if (item.empty() || item.size() > 9 || item.find_first_not_of("0123456789") != std::string::npos) return bad();
    const auto value = static_cast<uint32_t>(std::stoul(item));
    if (value < least) return bad();
    lengths.push_back(value);
    start = end + 1;
  }
  return lengths;
}

// Checked before the engine sizes its scratch by the longest prompt (reads the metadata only).
Status check_context(const std::string& path, uint32_t longest, uint32_t decode_prompt, uint32_t generate) {
  LoadOptions metadata_only;
  metadata_only.verify_content_hash = false;
  KIPP_ASSIGN_OR_RETURN(const Model model, Model::open(path, metadata_only));
  const uint32_t context = model.config().context_length;
  if (longest > context)
    return make_error("--prompt-len " + std::to_string(longest) + " exceeds the model's context length " +
                      std::to_string(context));
  if (uint64_t{decode_prompt} + generate > context)
    return make_error("decode needs --prompt-len " + std::to_string(decode_prompt) + " (the first) + --gen " +
                      std::to_string(generate) + " positions, more than the model's context length " +
                      std::to_string(context));
  return ok_status();
}

int run_bench(const BenchArgs& args) {
  if (args.list_kernels) return list_kernel_tables();
  if (args.model.empty()) return bench_fail("-m/--model is required: the Kipp GGUF to benchmark");
  auto lengths = parse_counts(args.prompt_lengths, "--prompt-len", 1, "64,512");
  if (!lengths.ok()) return bench_fail(lengths.message());
  auto batch_sizes = parse_counts(args.batch_sizes, "--batch", 0, "8,32,128");
  if (!batch_sizes.ok()) return bench_fail(batch_sizes.message());
  if (args.generate == 0) return bench_fail("--gen must be at least 1: decode needs a token to time");
  if (args.repeats == 0) return bench_fail("--repeats must be at least 1");

  BenchResult result;
  result.machine = read_machine_info();
  result.command = read_command_line();
  result.threads = args.threads == 0 ? result.machine.hardware_threads : args.threads;
  const uint32_t longest = *std::max_element(lengths->begin(), lengths->end());
  // One step holds the longest prompt (a prefill is one pass over the weights) and a batch.
  result.max_step_tokens = std::max(longest, *std::max_element(batch_sizes->begin(), batch_sizes->end()));

  const uint32_t decode_prompt = lengths->front();
  if (Status fits = check_context(args.model, longest, decode_prompt, args.generate); !fits.ok())
    return bench_fail(fits.message());

  std::fprintf(stderr, "opening %s\n", args.model.c_str());
  EngineOptions options;
  options.backend = args.backend;
  options.threads = result.threads;
  options.max_step_tokens = result.max_step_tokens;
  options.verify_content_hash = !args.no_verify;
  auto opened = Engine::open(args.model, options);
  if (!opened.ok()) return bench_fail(opened.message());
  Engine& engine = **opened;

  // On a GPU the host's bandwidth and peaks say nothing of the engine's speed: the card's own
  // ceilings stand in for them.
  const bool on_device = args.backend != BackendKind::Cpu;
  if (on_device) {
    auto info = cuda_device_info();
    if (!info.ok()) return bench_fail(info.message());
    const BackendMemory loaded = engine.backend().memory();
    std::fprintf(stderr, "measuring the ceilings of %s (device copy, BF16 product)\n", info->name.c_str());
    auto ceilings = measure_cuda_ceilings();
    if (!ceilings.ok()) return bench_fail(ceilings.message());
    result.device = BenchDevice{*info, loaded, *ceilings};
  } else if (!args.no_probe) {
    std::fprintf(stderr, "probing read bandwidth and peak multiply-add rates on %u threads\n", result.threads);
    auto bandwidth = kernels::read_bandwidth(result.threads);
    if (!bandwidth.ok()) return bench_fail(bandwidth.message());
    result.bandwidth = *bandwidth;
    result.peaks = kernels::peak_multiply_add(result.threads);
    result.peak_rss_reset = reset_peak_rss();
  }

  std::fprintf(stderr, "warming up\n");
  if (Status warm = warm_up(engine, std::min<uint32_t>(decode_prompt, 16)); !warm.ok())
    return bench_fail("warm-up: " + warm.message());
  for (uint32_t length : *lengths) {
    auto run = run_prefill(engine, length, args.repeats);
    if (!run.ok()) return bench_fail("prefill: " + run.message());
    result.prefills.push_back(*run);
  }
  // The peak so far, before the probe alongside decode holds its buffer; from here on only the
  // sessions grow, so the end of the run (the probe freed) is the rest of the peak.
  auto before_decode = read_process_memory();
  if (!before_decode.ok()) return bench_fail(before_decode.message());
  std::unique_ptr<kernels::BandwidthProbe> alongside;
  if (!args.no_probe && !on_device) {
    auto probe = kernels::BandwidthProbe::create(result.threads);
    if (!probe.ok()) return bench_fail(probe.message());
    alongside = std::move(*probe);
  }
  auto runs = run_decode(engine, decode_prompt, args.generate, *batch_sizes, std::move(alongside));
  if (!runs.ok()) return bench_fail("decode: " + runs.message());
  result.decode = runs->decode;
  result.batches = runs->batches;
  result.memory = {runs->memory_at_end.rss_bytes,
                   std::max(before_decode->peak_rss_bytes, runs->memory_at_end.rss_bytes)};

  if (!args.json) {
    print_bench_table(engine, result);
    return 0;
  }
  const std::string text = bench_json(engine, result).dump(2) + "\n";
  if (args.json_file.empty()) {
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  const Status written = write_file_atomic(
      args.json_file, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  if (!written.ok()) return bench_fail(written.message());
  print_bench_table(engine, result);
  std::fprintf(stderr, "wrote %s\n", args.json_file.c_str());
  return 0;
}

}  // namespace

void register_bench(CLI::App& app, Action& action) {
  auto* command = app.add_subcommand("bench", "Measure prefill, decode and batch speed against this machine's limits");
  command->footer(kBenchFooter);
  auto args = std::make_shared<BenchArgs>();
  command->add_option("-m,--model", args->model, "Kipp GGUF to benchmark (required)");
  command
      ->add_option("--prompt-len", args->prompt_lengths,
                   "Prefill lengths in tokens, comma-separated; the first is also the decode prompt")
      ->capture_default_str();
  command->add_option("--gen", args->generate, "Tokens to decode one at a time (and batch steps)")
      ->capture_default_str();
  command->add_option("--threads", args->threads, "Threads for the engine and the probes; 0: one per hardware thread")
      ->capture_default_str();
  command
      ->add_option("--batch", args->batch_sizes,
                   "Sequences decoded together through eval_batch, comma-separated sizes; 0 or 1 skips it")
      ->capture_default_str();
  add_backend_option(*command, args->backend);
  command->add_option("--repeats", args->repeats, "Prefill runs per length (median, min, max)")->capture_default_str();
  auto* json_option =
      command->add_option("--json", args->json_file, "Print JSON instead of the table, or write it to FILE")
          ->expected(0, 1)
          ->type_name("[FILE]");
  command->add_flag(
      "--no-probe", args->no_probe,
      "Skip the host's bandwidth and peak probes (no fractions on the cpu; cuda measures its ceilings anyway)");
  add_no_verify_flag(*command, args->no_verify);
  command->add_flag("--kernels", args->list_kernels,
                    "List the kernel tables this CPU runs and the one in use (KIPP_KERNELS or the best), and exit");
  command->callback([&action, args, json_option] {
    BenchArgs chosen = *args;
    chosen.json = json_option->count() > 0;
    action = [chosen] { return run_bench(chosen); };
  });
}

}  // namespace kipp::cli
