// The training config: every shipped config loads, every key is checked (type, range, relation
// to other keys), an unknown key or a bad value is an error naming its full path, relative paths
// resolve by where they were written, and to_yaml round-trips.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/files.h"
#include "train/init_source.h"
#include "train/train_config.h"
#include "unit/helpers/gguf_blueprint.h"
#include "unit/helpers/test_assertions.h"

namespace kipp::train {
using kipp::test_support::has_substr;

namespace {

namespace fs = std::filesystem;

// The two keys every config must set, given the way the shipped configs expect them.
const std::vector<std::string> kRequired = {"tokenizer=/data/tokenizer.json", "data.train=[/data/a.txt]"};

Expected<TrainConfig> parse(const std::string& yaml, std::vector<std::string> overrides = {}) {
  overrides.insert(overrides.begin(), kRequired.begin(), kRequired.end());
  return parse_train_config(yaml, overrides, "/configs");
}

std::string error_of(const std::string& yaml, std::vector<std::string> overrides = {}) {
  auto config = parse(yaml, std::move(overrides));
  EXPECT_FALSE(config.ok()) << yaml;
  return config.ok() ? std::string() : config.message();
}

TEST(TrainConfig, EmptyConfigGetsTheDefaultsAndResolvesHeadDim) {
  auto config = parse("");
  ASSERT_TRUE(config.ok()) << config.message();
  TrainConfig expected;
  expected.model.dims.head_dim = 64;  // 768 / 12
  expected.tokenizer = "/data/tokenizer.json";
  expected.data.train = {"/data/a.txt"};
  expected.run_dir = fs::absolute("runs/run").lexically_normal().string();
  EXPECT_TRUE(*config == expected) << to_yaml(*config);
}

TEST(TrainConfig, DerivedOptionsCarryTheKeys) {
  auto config = parse(
      "model: {vocab_size: 1000, d_model: 128, n_heads: 4, n_kv_heads: 2, head_dim: 48, d_ff: 384,\n"
      "        max_seq_len: 512, norm_eps: 1.0e-5, rope_theta: 500000, weight_tying: false,\n"
      "        init_std: 0.01, scaled_residual_init: true}\n"
      "train: {lr: 0.002, min_lr: 0.0001, warmup_steps: 7, max_steps: 70, schedule: linear,\n"
      "        beta1: 0.8, beta2: 0.99, eps: 1.0e-7, weight_decay: 0.05, decay_embeddings: false,\n"
      "        seed: 9}\n");
  ASSERT_TRUE(config.ok()) << config.message();
  const ModelConfig model = config->model_config(3, 4);
  EXPECT_EQ(model.vocab_size, 1000u);
  EXPECT_EQ(model.hidden_size, 128u);
  EXPECT_EQ(model.num_layers, 12u);
  EXPECT_EQ(model.num_heads, 4u);
  EXPECT_EQ(model.num_kv_heads, 2u);
  EXPECT_EQ(model.head_dim, 48u);
  EXPECT_EQ(model.ffn_size, 384u);
  EXPECT_EQ(model.context_length, 512u);
  EXPECT_EQ(model.rms_norm_eps, 1.0e-5);
  EXPECT_EQ(model.rope_theta, 500000.0);
  EXPECT_FALSE(model.tie_embeddings);
  EXPECT_EQ(model.bos_token_id, 3u);
  EXPECT_EQ(model.eos_token_id, 4u);
  EXPECT_TRUE(model.validate().ok()) << model.validate().message();

  const ScheduleOptions schedule = config->schedule();
  EXPECT_EQ(schedule.kind, ScheduleKind::Linear);
  EXPECT_EQ(schedule.max_lr, 0.002);
  EXPECT_EQ(schedule.min_lr, 0.0001);
  EXPECT_EQ(schedule.warmup_steps, 7u);
  EXPECT_EQ(schedule.total_steps, 70u);
  const AdamWOptions adamw = config->adamw();
  EXPECT_EQ(adamw.beta1, 0.8);
  EXPECT_EQ(adamw.beta2, 0.99);
  EXPECT_EQ(adamw.eps, 1.0e-7);
  EXPECT_EQ(adamw.weight_decay, 0.05);
  EXPECT_FALSE(adamw.decay_embeddings);
  const InitOptions init = config->init();
  EXPECT_EQ(init.seed, 9u);
  EXPECT_EQ(init.std, 0.01);
  EXPECT_TRUE(init.scaled_residual);
}

TEST(TrainConfig, UnknownKeysNameTheirPathAndTheNearestKnownKey) {
  EXPECT_TRUE(
      has_substr(error_of("train:\n  max_stepz: 3\n"), "train.max_stepz: unknown key (did you mean train.max_steps?)"));
  EXPECT_TRUE(has_substr(error_of("trian:\n  lr: 0.1\n"), "trian: unknown section (did you mean train?)"));
  EXPECT_TRUE(has_substr(error_of("model:\n  lr: 0.1\n"), "model.lr: unknown key (did you mean train.lr?)"));
  EXPECT_TRUE(has_substr(error_of("model:\n  flash_attention: true\n"),
                         "model.flash_attention: unknown key (configs/training.yaml lists every key)"));
  EXPECT_TRUE(has_substr(error_of("tokenizr: x.json\n"), "tokenizr: unknown section (did you mean tokenizer?)"));
  // Every problem is reported, one line each.
  const std::string several = error_of("train:\n  max_stepz: 3\n  lr: fast\neval:\n  evry: 2\n");
  EXPECT_TRUE(has_substr(several, "train.max_stepz: unknown key"));
  EXPECT_TRUE(has_substr(several, "\ntrain.lr: expected a positive number, got 'fast'"));
  EXPECT_TRUE(has_substr(several, "\neval.evry: unknown key (did you mean eval.every?)"));
}

TEST(TrainConfig, OverridesOfUnknownKeysAndMalformedOverridesAreErrors) {
  EXPECT_TRUE(has_substr(error_of("", {"train.max_stepz=3"}),
                         "--set train.max_stepz: unknown key (did you mean train.max_steps?)"));
  EXPECT_TRUE(has_substr(error_of("", {"optimizer.lr=3"}), "--set optimizer.lr: unknown key (did you mean train.lr?)"));
  EXPECT_TRUE(has_substr(error_of("", {"train.max_steps"}), "--set train.max_steps: expected section.key=value"));
  EXPECT_TRUE(has_substr(error_of("", {"max_steps=20"}),
                         "--set max_steps=20: expected section.key=value, e.g. --set train.max_steps=20 "
                         "(did you mean train.max_steps?)"));
  EXPECT_TRUE(has_substr(error_of("", {"=3"}), "--set =3: expected section.key=value"));
  EXPECT_TRUE(has_substr(error_of("", {"data.train=[a.txt"}), "--set data.train=[a.txt: not a YAML value: line 1"));
}

TEST(TrainConfig, OverridesApplyBeforeValidation) {
  // lr below min_lr in the file is fine when an override fixes it; later overrides win.
  auto config = parse("train:\n  lr: 1.0e-5\n  min_lr: 1.0e-4\n",
                      {"train.lr=0.01", "train.max_steps=700", "train.max_steps=900"});
  ASSERT_TRUE(config.ok()) << config.message();
  EXPECT_EQ(config->train.lr, 0.01);
  EXPECT_EQ(config->train.max_steps, 900u);
  EXPECT_TRUE(has_substr(error_of("", {"train.max_steps=abc"}),
                         "--set train.max_steps: expected a positive integer, got 'abc'"));
}

TEST(TrainConfig, ValuesAreTypeChecked) {
  EXPECT_TRUE(
      has_substr(error_of("train:\n  max_steps: abc\n"), "train.max_steps: expected a positive integer, got 'abc'"));
  EXPECT_TRUE(
      has_substr(error_of("train:\n  max_steps: 1.5\n"), "train.max_steps: expected a positive integer, got '1.5'"));
  EXPECT_TRUE(has_substr(error_of("train:\n  lr: [1, 2]\n"), "train.lr: expected a positive number, got a list"));
  EXPECT_TRUE(has_substr(error_of("train:\n  lr:\n"), "train.lr: expected a positive number, got nothing"));
  EXPECT_TRUE(
      has_substr(error_of("model:\n  weight_tying: yes\n"), "model.weight_tying: expected true or false, got 'yes'"));
  EXPECT_TRUE(has_substr(error_of("model:\n  vocab_size: big\n"),
                         "model.vocab_size: expected a positive integer or auto, got 'big'"));
  EXPECT_TRUE(has_substr(error_of("train:\n  schedule: exponential\n"),
                         "train.schedule: unknown schedule 'exponential' (expected cosine, linear or constant)"));
  EXPECT_TRUE(
      has_substr(error_of("train:\n  precision: fp16\n"), "train.precision: expected fp32 or bf16, got 'fp16'"));
  EXPECT_TRUE(has_substr(error_of("data:\n  format: xml\n"),
                         "data.format: expected auto or text or jsonl or csv or "
                         "parquet or alpaca or sharegpt or openai or tokens, got 'xml'"));
  EXPECT_TRUE(has_substr(error_of("data:\n  chat_format: klingon\n"), "data.chat_format: expected qwen3 or chatml"));
  EXPECT_TRUE(
      has_substr(error_of("eval:\n  sample_prompts: hello\n"), "eval.sample_prompts: expected a list of strings"));
  EXPECT_TRUE(
      has_substr(error_of("data:\n  token_dtype: int8\n"), "data.token_dtype: expected uint16 or uint32, got 'int8'"));
  EXPECT_TRUE(has_substr(error_of("", {"data.train=a.txt"}),
                         "data.train: expected a list of files such as [a.txt, b.txt], got 'a.txt'"));
  EXPECT_TRUE(has_substr(error_of("", {"tokenizer={path: x}"}), "--set tokenizer: expected a path, got a mapping"));
  EXPECT_TRUE(has_substr(error_of("train: 5\n"), "train: expected a section of key: value lines, got '5'"));
  EXPECT_TRUE(has_substr(error_of("- a\n- b\n"), "expected sections of key: value lines"));
  EXPECT_TRUE(has_substr(error_of("train:\n  lr: 0.1\n  lr: 0.2\n"), "train.lr: given twice"));
  EXPECT_TRUE(has_substr(error_of("train:\n  lr: [0.1\n"), "line 3, column 1: end of sequence flow not found"));
}

TEST(TrainConfig, ValuesAreRangeChecked) {
  EXPECT_TRUE(
      has_substr(error_of("train:\n  max_steps: 0\n"), "train.max_steps: expected a positive integer, got '0'"));
  EXPECT_TRUE(
      has_substr(error_of("train:\n  micro_batch: -4\n"), "train.micro_batch: expected a positive integer, got '-4'"));
  EXPECT_TRUE(has_substr(error_of("train:\n  seq_len: 5000000000\n"),
                         "train.seq_len: expected a positive integer, got '5000000000' (at most 4294967295)"));
  EXPECT_TRUE(has_substr(error_of("train:\n  lr: 0\n"), "train.lr: expected a positive number, got '0'"));
  EXPECT_TRUE(has_substr(error_of("train:\n  lr: nan\n"), "train.lr: expected a positive number, got 'nan'"));
  EXPECT_TRUE(has_substr(error_of("train:\n  beta1: 1.0\n"), "train.beta1: expected a number in [0, 1), got '1.0'"));
  EXPECT_TRUE(has_substr(error_of("train:\n  beta2: -0.5\n"), "train.beta2: expected a number in [0, 1), got '-0.5'"));
  EXPECT_TRUE(
      has_substr(error_of("train:\n  grad_clip: -1\n"), "train.grad_clip: expected a non-negative number, got '-1'"));
  EXPECT_TRUE(has_substr(error_of("data:\n  validation_fraction: 1\n"),
                         "data.validation_fraction: expected a number in [0, 1), got '1'"));
  EXPECT_TRUE(has_substr(error_of("model:\n  norm_eps: 2\n"), "model.norm_eps: expected a number in (0, 1], got '2'"));
  EXPECT_TRUE(has_substr(error_of("model:\n  vocab_size: -1\n"),
                         "model.vocab_size: expected a positive integer or auto, got '-1'"));
  const std::string width = error_of("model:\n  d_model: 100\n");
  EXPECT_TRUE(has_substr(width, "model.d_model: expected a positive multiple of 32, got '100': GGUF quantizes"));
  EXPECT_TRUE(has_substr(error_of("model:\n  d_ff: 1000\n"), "model.d_ff: expected a positive multiple of 32"));
  EXPECT_TRUE(has_substr(error_of("model:\n  head_dim: 63\n"),
                         "model.head_dim: expected a positive multiple of 2 or auto, got '63': rotary"));
}

TEST(TrainConfig, KeysAreCheckedAgainstEachOther) {
  EXPECT_TRUE(
      has_substr(error_of("train:\n  lr: 1.0e-4\n  min_lr: 1.0e-3\n"), "train.min_lr: 0.001 is above train.lr 1e-04"));
  EXPECT_TRUE(has_substr(error_of("model:\n  max_seq_len: 128\ntrain:\n  seq_len: 256\n"),
                         "train.seq_len: 256 is longer than model.max_seq_len 128"));
  EXPECT_TRUE(has_substr(error_of("train:\n  max_steps: 10\n  warmup_steps: 20\n"),
                         "train.warmup_steps: 20 is more than train.max_steps 10"));
  EXPECT_TRUE(has_substr(error_of("model:\n  n_heads: 12\n  n_kv_heads: 5\n"),
                         "model.n_kv_heads: n_heads 12 is not a multiple of n_kv_heads 5"));
  EXPECT_TRUE(has_substr(error_of("model:\n  d_model: 96\n  n_heads: 5\n  n_kv_heads: 1\n"),
                         "model.head_dim: auto means d_model / n_heads, but d_model 96 is not a multiple of "
                         "n_heads 5"));
  EXPECT_TRUE(has_substr(error_of("model:\n  d_model: 96\n  n_heads: 32\n  n_kv_heads: 1\n"),
                         "model.head_dim: auto gives d_model / n_heads = 3, which is odd"));
  EXPECT_TRUE(has_substr(error_of("model:\n  n_heads: 3\n  n_kv_heads: 1\n  head_dim: 66\n"),
                         "model.head_dim: n_heads * head_dim = 198 is not a multiple of 32"));
}

TEST(TrainConfig, KitAiKeysWithOtherValuesAreRefusedWithTheReason) {
  EXPECT_TRUE(has_substr(error_of("model:\n  dropout: 0.1\n"),
                         "model.dropout: this architecture has no dropout; only 0 is accepted, got '0.1'"));
  EXPECT_TRUE(has_substr(error_of("model:\n  activation: gelu\n"),
                         "model.activation: Qwen3's feed-forward is SwiGLU; only swiglu is accepted, got 'gelu'"));
  EXPECT_TRUE(has_substr(error_of("model:\n  bias: true\n"),
                         "model.bias: Qwen3's projections have no bias; only false is accepted, got 'true'"));
  auto accepted = parse("model:\n  dropout: 0\n  activation: swiglu\n  bias: false\n");
  EXPECT_TRUE(accepted.ok()) << accepted.message();
  EXPECT_TRUE(parse("model:\n  dropout: 0.0\n").ok());
}

TEST(TrainConfig, MissingTokenizerAndDataSayHowToSetThem) {
  auto config = parse_train_config("model:\n  d_model: 384\n", {}, "");
  ASSERT_FALSE(config.ok());
  EXPECT_TRUE(
      has_substr(config.message(), "tokenizer: required: the path of an HF tokenizer.json, e.g. --set tokenizer="));
  EXPECT_TRUE(has_substr(config.message(),
                         "data.train: no training files; list them in the config or with --set data.train=[FILE,...]"));
  EXPECT_TRUE(has_substr(error_of("", {"data.train=[]"}), "data.train: no training files"));
  EXPECT_TRUE(has_substr(error_of("", {"run.dir="}), "run.dir: required"));
}

TEST(TrainConfig, LoadedFileErrorsNameTheFile) {
  testing::TempDir dir;
  const std::string path = dir.file("bad.yaml");
  ASSERT_TRUE(write_text_file_atomic(path, "train:\n  max_steps: many\n").ok());
  auto config = load_train_config(path, kRequired);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.message(), path + ": train.max_steps: expected a positive integer, got 'many'");
  auto missing = load_train_config(dir.file("none.yaml"), {});
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(has_substr(missing.message(), "none.yaml"));
}

TEST(TrainConfig, RelativePathsResolveAgainstTheFileOrTheWorkingDirectory) {
  testing::TempDir dir;
  const std::string path = dir.file("run.yaml");
  ASSERT_TRUE(write_text_file_atomic(path,
                                     "tokenizer: tok/tokenizer.json\ndata:\n  train: [a.txt, /abs/b.txt]\n"
                                     "run:\n  dir: runs/x\n")
                  .ok());
  const fs::path folder = fs::path(dir.path()).lexically_normal();
  const fs::path cwd = fs::current_path();
  auto from_file = load_train_config(path, {});
  ASSERT_TRUE(from_file.ok()) << from_file.message();
  EXPECT_EQ(from_file->tokenizer, (folder / "tok/tokenizer.json").string());
  EXPECT_EQ(from_file->data.train, (std::vector<std::string>{(folder / "a.txt").string(), "/abs/b.txt"}));
  EXPECT_EQ(from_file->run_dir, (cwd / "runs/x").string());  // an output: the working directory

  auto from_command_line = load_train_config(path, {"tokenizer=other.json", "data.train=[../c.txt]"});
  ASSERT_TRUE(from_command_line.ok()) << from_command_line.message();
  EXPECT_EQ(from_command_line->tokenizer, (cwd / "other.json").string());
  EXPECT_EQ(from_command_line->data.train, (std::vector<std::string>{(cwd / "../c.txt").lexically_normal().string()}));
}

TEST(TrainConfig, ToYamlRoundTrips) {
  auto config = parse(
      "model: {vocab_size: 50000, d_model: 320, n_layers: 3, n_heads: 5, n_kv_heads: 1, d_ff: 864,\n"
      "        max_seq_len: 4096, norm_eps: 1.0e-5, rope_theta: 1000000, weight_tying: false,\n"
      "        init_std: 0.0123456789, scaled_residual_init: true}\n"
      "data: {format: tokens, token_dtype: uint32, validation_fraction: 0.1,\n"
      "       seed: 18446744073709551615}\n"
      "train: {seq_len: 300, micro_batch: 3, grad_accum: 5, max_steps: 123456, schedule: constant,\n"
      "        lr: 0.1, min_lr: 0.030000000000000002, warmup_steps: 17, weight_decay: 0,\n"
      "        beta1: 0, beta2: 0.999, eps: 1.0e-12, decay_embeddings: false, grad_clip: 0,\n"
      "        seed: 77, threads: 3, recompute_blocks: true, precision: bf16,\n"
      "        max_bad_steps: 2}\n"
      "eval: {every: 0, batches: 1}\n"
      "checkpoint: {every: 0, keep_last: 9}\n"
      "log: {every: 1}\n",
      {"tokenizer='/odd path: #1/tokenizer.json'", "data.train=['/x/a.bin', '/y/b c.bin']", "run.dir=/runs/'q'"});
  ASSERT_TRUE(config.ok()) << config.message();
  EXPECT_EQ(config->model.dims.head_dim, 64u);
  const std::string yaml = to_yaml(*config);
  auto again = parse_train_config(yaml, {}, "/somewhere/else");
  ASSERT_TRUE(again.ok()) << again.message() << "\n" << yaml;
  EXPECT_TRUE(*again == *config) << yaml;
  EXPECT_EQ(to_yaml(*again), yaml);

  // Defaults (vocab auto) round-trip too, and the file names every key.
  auto defaults = parse("");
  ASSERT_TRUE(defaults.ok());
  const std::string default_yaml = to_yaml(*defaults);
  EXPECT_TRUE(has_substr(default_yaml, "vocab_size: auto"));
  EXPECT_TRUE(has_substr(default_yaml, "dropout: 0.0"));
  auto defaults_again = parse_train_config(default_yaml, {}, "");
  ASSERT_TRUE(defaults_again.ok()) << defaults_again.message();
  EXPECT_TRUE(*defaults_again == *defaults) << default_yaml;
}

TEST(TrainConfigLora, NestedKeysParseWithDefaultsForTheRest) {
  auto off = parse("");
  ASSERT_TRUE(off.ok()) << off.message();
  EXPECT_FALSE(off->train.lora.enabled());
  EXPECT_EQ(off->train.lora.targets.size(), kAllLoraTargets.size());

  auto config = parse("train:\n  lr: 2.0e-4\n  lora:\n    rank: 16\n    targets: [q, v, gate_proj]\n");
  ASSERT_TRUE(config.ok()) << config.message();
  const LoraOptions& lora = config->train.lora;
  EXPECT_EQ(lora.rank, 16u);
  EXPECT_EQ(lora.alpha, LoraOptions{}.alpha);
  EXPECT_EQ(lora.dropout, 0.0);
  EXPECT_EQ(lora.targets, (std::vector<LoraTarget>{LoraTarget::Q, LoraTarget::V, LoraTarget::Gate}));
  EXPECT_EQ(config->train.lr, 2e-4);

  // Each nested key can be set from the command line; the later value wins.
  auto overridden =
      parse("train: {lora: {rank: 4}}", {"train.lora.rank=8", "train.lora.alpha=3", "train.lora.dropout=0.1"});
  ASSERT_TRUE(overridden.ok()) << overridden.message();
  EXPECT_EQ(overridden->train.lora.rank, 8u);
  EXPECT_EQ(overridden->train.lora.alpha, 3.0);
  EXPECT_EQ(overridden->train.lora.dropout, 0.1);
  EXPECT_EQ(overridden->train.lora.scale(), 3.0 / 8.0);
}

TEST(TrainConfigLora, EveryBadValueIsOneErrorNamingTheKey) {
  const std::string message = error_of(
      "train:\n  lora:\n    rank: -1\n    alpha: 0\n    dropout: 1\n    targets: [q, q, x, {a: 1}]\n    rnak: 3\n");
  EXPECT_TRUE(has_substr(message, "train.lora.rank: expected a non-negative integer, got '-1'")) << message;
  EXPECT_TRUE(has_substr(message, "train.lora.alpha: expected a positive number, got '0'")) << message;
  EXPECT_TRUE(has_substr(message, "train.lora.dropout: expected a number in [0, 1), got '1'")) << message;
  EXPECT_TRUE(has_substr(message, "train.lora.targets[1]: 'q' is listed twice")) << message;
  EXPECT_TRUE(has_substr(message, "train.lora.targets[2]: 'x' is not a LoRA target (q, k, v, o, gate, up, down)"))
      << message;
  EXPECT_TRUE(has_substr(message, "train.lora.targets[3]: expected a LoRA target, got a mapping")) << message;
  EXPECT_TRUE(has_substr(message, "train.lora.rnak: unknown key (did you mean train.lora.rank?)")) << message;
  EXPECT_EQ(std::count(message.begin(), message.end(), '\n'), 6) << message;

  EXPECT_TRUE(
      has_substr(error_of("train: {lora: 16}"), "train.lora: expected a section of key: value lines, got '16'"));
  EXPECT_TRUE(has_substr(error_of("train: {lora: {targets: []}}"),
                         "train.lora.targets: expected a non-empty list of q, k, v, o, gate, up, down, got a list"));
  EXPECT_TRUE(has_substr(error_of("", {"train.lora=16"}),
                         "--set train.lora: a group of keys; set them one by one, e.g. --set train.lora.rank=VALUE"));
  EXPECT_TRUE(has_substr(error_of("", {"train.lora.targets=[q, w]"}), "--set train.lora.targets[1]: 'w' is not"));
}

std::vector<std::string> shipped_configs() {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(fs::path(KIPP_SOURCE_DIR) / "configs")) {
    if (entry.path().extension() == ".yaml") out.push_back(entry.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(TrainConfig, EveryShippedConfigLoads) {
  const std::vector<std::string> configs = shipped_configs();
  ASSERT_GE(configs.size(), 4u);
  for (const std::string& path : configs) {
    auto config = load_train_config(path, kRequired);
    EXPECT_TRUE(config.ok()) << path << ": " << (config.ok() ? "" : config.message());
    // Without the two required keys each says how to set them (unless it names its own data).
    auto bare = load_train_config(path, {});
    if (bare.ok()) {
      EXPECT_FALSE(bare->data.train.empty() || bare->tokenizer.empty()) << path;
      continue;
    }
    EXPECT_TRUE(has_substr(bare.message(), "--set data.train=[FILE,...]"));
  }
}

TEST(TrainConfig, SmallIsTheKitAiConfig) {
  auto config = load_train_config(std::string(KIPP_SOURCE_DIR) + "/configs/small.yaml", kRequired);
  ASSERT_TRUE(config.ok()) << config.message();
  const ModelSection& m = config->model;
  EXPECT_EQ(m.dims.vocab_size, 32000u);
  EXPECT_EQ(m.dims.hidden_size, 768u);
  EXPECT_EQ(m.dims.num_layers, 12u);
  EXPECT_EQ(m.dims.num_heads, 12u);
  EXPECT_EQ(m.dims.num_kv_heads, 4u);
  EXPECT_EQ(m.dims.head_dim, 64u);
  EXPECT_EQ(m.dims.ffn_size, 2048u);
  EXPECT_EQ(m.dims.context_length, 2048u);
  EXPECT_EQ(m.dims.rms_norm_eps, 1e-6);
  EXPECT_EQ(m.dims.rope_theta, 10000.0);
  EXPECT_TRUE(m.dims.tie_embeddings);
  EXPECT_EQ(m.init_std, 0.02);
  EXPECT_EQ(config->train.lr, 3e-4);
  EXPECT_EQ(config->train.min_lr, 3e-5);
}

// Every key of a node tree as dotted paths, nested groups (train.lora) included.
void add_key_paths(const YAML::Node& node, const std::string& prefix, std::set<std::string>& out) {
  for (const auto& entry : node) {
    const std::string name = prefix.empty() ? entry.first.Scalar() : prefix + "." + entry.first.Scalar();
    if (entry.second.IsMap()) {
      add_key_paths(entry.second, name, out);
    } else {
      out.insert(name);
    }
  }
}

std::set<std::string> key_paths(const YAML::Node& root) {
  std::set<std::string> out;
  add_key_paths(root, "", out);
  return out;
}

TEST(TrainConfig, ReferenceConfigListsEveryKeyWithItsDefault) {
  const std::string path = std::string(KIPP_SOURCE_DIR) + "/configs/training.yaml";
  auto config = load_train_config(path, kRequired);
  ASSERT_TRUE(config.ok()) << config.message();
  auto defaults = parse("");
  ASSERT_TRUE(defaults.ok());
  EXPECT_TRUE(*config == *defaults) << to_yaml(*config);
  auto text = read_text_file(path);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(key_paths(YAML::Load(*text)), key_paths(YAML::Load(to_yaml(*defaults))));
}

// --init: a source config written by hand (the shape of Qwen3-0.6B, whose head width is not
// d_model / n_heads) fills the model section; a key the user gives must equal it.
InitSource qwen3_like_source() {
  return InitSource{.name = "Qwen/Qwen3-0.6B",
                    .path = "/models/qwen3",
                    .config = ModelConfig{.hidden_size = 1024,
                                          .num_layers = 28,
                                          .num_heads = 16,
                                          .num_kv_heads = 8,
                                          .head_dim = 128,
                                          .ffn_size = 3072,
                                          .vocab_size = 151936,
                                          .context_length = 40960,
                                          .rope_theta = 1000000,
                                          .rms_norm_eps = 1e-6,
                                          .tie_embeddings = true,
                                          .bos_token_id = 151643,
                                          .eos_token_id = 151645},
                    .tokenizer = "/models/qwen3/tokenizer.json"};
}

Expected<TrainConfig> parse_with_init(const std::string& yaml, std::vector<std::string> overrides = {}) {
  overrides.insert(overrides.begin(), "data.train=[/data/a.txt]");
  overrides.push_back("train.seq_len=128");
  const InitSource init = qwen3_like_source();
  return parse_train_config(yaml, overrides, "/configs", &init);
}

TEST(TrainConfigInit, FillsEveryModelKeyAndTheTokenizerFromTheSource) {
  auto config = parse_with_init("");
  ASSERT_TRUE(config.ok()) << config.message();
  ModelConfig expected = qwen3_like_source().config;
  EXPECT_TRUE(config->model_config(expected.bos_token_id, expected.eos_token_id) == expected) << to_yaml(*config);
  EXPECT_EQ(config->tokenizer, "/models/qwen3/tokenizer.json");
  // The saved run config carries the values, so a resume needs no source.
  auto reread = parse_train_config(to_yaml(*config), {}, "");
  ASSERT_TRUE(reread.ok()) << reread.message();
  EXPECT_TRUE(*reread == *config);
}

TEST(TrainConfigInit, KeysThatAgreeOrSayAutoAreAccepted) {
  auto config = parse_with_init(
      "model: {d_model: 1024, n_layers: 28, rope_theta: 1.0e6, norm_eps: 1.0e-6, weight_tying: true,\n"
      "        vocab_size: auto, head_dim: auto}\n"
      "tokenizer: /other/tokenizer.json\n",
      {"model.n_kv_heads=8"});
  ASSERT_TRUE(config.ok()) << config.message();
  EXPECT_EQ(config->model.dims.vocab_size, 151936u);
  EXPECT_EQ(config->model.dims.head_dim, 128u);
  EXPECT_EQ(config->tokenizer, "/other/tokenizer.json");
}

TEST(TrainConfigInit, EachDisagreeingKeyIsOneErrorWithBothValues) {
  EXPECT_EQ(parse_with_init("model:\n  rope_theta: 10000\n").message(),
            "model.rope_theta: the config says 10000 but Qwen/Qwen3-0.6B has 1000000");
  EXPECT_EQ(parse_with_init("", {"model.d_model=768"}).message(),
            "--set model.d_model: set to 768 but Qwen/Qwen3-0.6B has 1024");
  EXPECT_EQ(parse_with_init("model: {weight_tying: false}\n").message(),
            "model.weight_tying: the config says false but Qwen/Qwen3-0.6B has true");
  EXPECT_EQ(parse_with_init("model: {vocab_size: 151669}\n").message(),
            "model.vocab_size: the config says 151669 but Qwen/Qwen3-0.6B has 151936");
  EXPECT_EQ(parse_with_init("model: {norm_eps: 1.0e-5}\n").message(),
            "model.norm_eps: the config says 1e-05 but Qwen/Qwen3-0.6B has 1e-06");
  EXPECT_EQ(parse_with_init("model: {head_dim: 64, n_heads: 16}\n").message(),
            "model.head_dim: the config says 64 but Qwen/Qwen3-0.6B has 128");
  // Two disagreements: two lines, in declaration order.
  EXPECT_EQ(parse_with_init("model: {n_layers: 12, max_seq_len: 2048}\n").message(),
            "model.n_layers: the config says 12 but Qwen/Qwen3-0.6B has 28\n"
            "model.max_seq_len: the config says 2048 but Qwen/Qwen3-0.6B has 40960");
}

TEST(TrainConfigInit, ReadsTheSourceConfigOfAnHfFolder) {
  testing::TempDir dir;
  const std::string folder = dir.path() + "/ckpt";
  fs::create_directories(folder);
  ASSERT_TRUE(write_text_file_atomic(folder + "/config.json",
                                     R"({"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"],
      "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
      "head_dim": 32, "intermediate_size": 128, "vocab_size": 1000, "max_position_embeddings": 512,
      "rope_theta": 500000, "rms_norm_eps": 1e-5, "tie_word_embeddings": false,
      "bos_token_id": 1, "eos_token_id": [2, 3]})")
                  .ok());
  auto source = read_init_source("mine", folder);
  ASSERT_TRUE(source.ok()) << source.message();
  EXPECT_TRUE(source->config == (ModelConfig{.hidden_size = 64,
                                             .num_layers = 2,
                                             .num_heads = 4,
                                             .num_kv_heads = 2,
                                             .head_dim = 32,
                                             .ffn_size = 128,
                                             .vocab_size = 1000,
                                             .context_length = 512,
                                             .rope_theta = 500000,
                                             .rms_norm_eps = 1e-5,
                                             .tie_embeddings = false,
                                             .bos_token_id = 1,
                                             .eos_token_id = 2}));
  EXPECT_TRUE(source->tokenizer.empty());  // the folder has none
  auto missing = read_init_source("gone", dir.path() + "/nothing");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(has_substr(missing.message(), "not a GGUF file nor a checkpoint folder with config.json"));
}

}  // namespace
}  // namespace kipp::train

namespace kipp::train {
namespace {

TEST(TrainConfigLora, ShippedLoraConfigTrainsRank16AdaptersOnEveryProjection) {
  auto config = load_train_config(std::string(KIPP_SOURCE_DIR) + "/configs/lora-qwen3-0.6b.yaml", kRequired);
  ASSERT_TRUE(config.ok()) << config.message();
  const LoraOptions& lora = config->train.lora;
  EXPECT_EQ(lora.rank, 16u);
  EXPECT_EQ(lora.alpha, 32.0);
  EXPECT_EQ(lora.dropout, 0.05);
  EXPECT_EQ(lora.targets, std::vector<LoraTarget>(kAllLoraTargets.begin(), kAllLoraTargets.end()));
  EXPECT_EQ(config->train.lr, 2e-4);
  EXPECT_EQ(config->data.chat_format, "qwen3");
}

}  // namespace
}  // namespace kipp::train
