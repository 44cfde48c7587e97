#include "train/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>

#include "core/files.h"
#include "format/safetensors.h"
#include "train/peft_adapter.h"

namespace kipp::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kCheckpointsFolder = "checkpoints";
constexpr const char* kStepPrefix = "step-";
constexpr const char* kExpAvg = ".exp_avg";
constexpr const char* kExpAvgSq = ".exp_avg_sq";
constexpr int kTrainerStateVersion = 1;

std::string pid_text() { return std::to_string(::getpid()); }

std::string step_folder_name(uint64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "%s%08llu", kStepPrefix, static_cast<unsigned long long>(step));
  return name;
}

std::optional<uint64_t> parse_u64(std::string_view text) {
  uint64_t value = 0;
  const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || result.ec != std::errc() || result.ptr != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<uint64_t> step_of(std::string_view name) {
  const std::string_view prefix = kStepPrefix;
  if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
  return parse_u64(name.substr(prefix.size()));
}

Status filesystem_status(const std::error_code& error, const std::string& what) {
  if (!error) return {};
  return make_error(what + ": " + error.message());
}

// A folder's entries (a rename into it, a new file) survive a crash only once it is fsynced.
Status fsync_folder(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return make_error("cannot open folder " + dir + ": " + std::strerror(errno));
  const int result = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  if (result != 0) return make_error("cannot fsync folder " + dir + ": " + std::strerror(saved));
  return {};
}

std::string parent_folder(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

// A folder written under a temporary name. Whatever that name holds at the end is removed: the
// unfinished folder after a failure, nothing after publish(), the replaced folder after a swap.
class StagingFolder {
 public:
  explicit StagingFolder(std::string path) : path_(std::move(path)) {}
  StagingFolder(const StagingFolder&) = delete;
  StagingFolder& operator=(const StagingFolder&) = delete;
  ~StagingFolder() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }

  const std::string& path() const { return path_; }

  Status create() {
    std::error_code error;
    fs::remove_all(path_, error);  // a crashed process with our pid left it
    if (!error) fs::create_directories(path_, error);
    return filesystem_status(error, "cannot create " + path_);
  }

  // Makes the finished folder appear as `final_path` in one step. An existing folder of that
  // name (a step saved again after a resume) is swapped out atomically, so a link naming it
  // never dangles, and then removed.
  Status publish(const std::string& final_path) {
    KIPP_RETURN_IF_ERROR(fsync_folder(path_));
    std::error_code error;
    const bool replacing = fs::exists(fs::symlink_status(final_path, error));
    const unsigned flags = replacing ? RENAME_EXCHANGE : 0;
    if (::renameat2(AT_FDCWD, path_.c_str(), AT_FDCWD, final_path.c_str(), flags) != 0) {
      return make_error("cannot move " + path_ + " to " + final_path + ": " + std::strerror(errno));
    }
    KIPP_RETURN_IF_ERROR(fsync_folder(parent_folder(final_path)));
    fs::remove_all(path_, error);
    return filesystem_status(error, "cannot remove the replaced folder " + path_);
  }

 private:
  std::string path_;
};

std::span<const uint8_t> tensor_bytes(std::span<const float> values, const ParamTensor& tensor) {
  return {reinterpret_cast<const uint8_t*>(values.data() + tensor.offset), tensor.count * sizeof(float)};
}

// The file holds exactly the layout's tensors under their names + each suffix, all F32 with the
// layout's shapes.
Status check_tensor_set(const SafetensorsFile& file, std::span<const ParamTensor> tensors,
                        std::initializer_list<const char*> suffixes) {
  std::set<std::string, std::less<>> expected;
  for (const ParamTensor& t : tensors) {
    for (const char* suffix : suffixes) {
      const std::string name = t.name + suffix;
      expected.insert(name);
      const SafetensorsTensor* found = file.find(name);
      if (!found) return make_error(file.path() + ": tensor " + name + " is missing");
      if (found->dtype != SafetensorsDtype::F32) {
        return make_error(file.path() + ": tensor " + name + " is " +
                          std::string(safetensors_dtype_name(found->dtype)) + " (expected F32)");
      }
      if (found->shape != t.shape) {
        return make_error(file.path() + ": tensor " + name + " has shape " + shape_text(found->shape) + ", expected " +
                          shape_text(t.shape));
      }
    }
  }
  for (const SafetensorsTensor& tensor : file.tensors()) {
    if (!expected.count(tensor.name)) {
      return make_error(file.path() + ": unexpected tensor " + tensor.name + " (not part of this model)");
    }
  }
  return {};
}

void copy_tensors(const SafetensorsFile& file, std::span<const ParamTensor> tensors, const char* suffix,
                  std::span<float> out) {
  for (const ParamTensor& t : tensors) {
    const std::span<const uint8_t> bytes = file.data(*file.find(t.name + suffix));
    std::memcpy(out.data() + t.offset, bytes.data(), bytes.size());
  }
}

Expected<SafetensorsFile> open_tensors(const std::string& path, std::span<const ParamTensor> tensors,
                                       std::initializer_list<const char*> suffixes) {
  KIPP_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(path));
  KIPP_RETURN_IF_ERROR(check_tensor_set(file, tensors, suffixes));
  return file;
}

// ---- config.json ---------------------------------------------------------------------------

// The dimensions fix the tensor set; the constants (theta, eps, token ids, context) are the
// run's to choose.
Expected<ModelConfig> read_model_config(const std::string& dir) {
  const std::string path = join_path(dir, "config.json");
  KIPP_ASSIGN_OR_RETURN(const std::string text, read_text_file(path));
  auto config = parse_hf_config(text);
  if (!config.ok()) return make_error(path + ": " + config.message());
  return config;
}

// ---- trainer_state.json --------------------------------------------------------------------

// JSON has no infinity or NaN; those are stored as strings that Python's float() reads back.
constexpr std::pair<const char*, double> kNonFinite[] = {{"Infinity", std::numeric_limits<double>::infinity()},
                                                         {"-Infinity", -std::numeric_limits<double>::infinity()},
                                                         {"NaN", std::numeric_limits<double>::quiet_NaN()}};

constexpr std::pair<const char*, uint64_t TrainerState::*> kStateCounters[] = {
    {"step", &TrainerState::step},
    {"epoch", &TrainerState::epoch},
    {"data_cursor", &TrainerState::data_cursor},
    {"tokens_seen", &TrainerState::tokens_seen},
    {"skipped_steps", &TrainerState::skipped_steps},
    {"consecutive_bad_steps", &TrainerState::consecutive_bad_steps},
    {"best_step", &TrainerState::best_step}};
constexpr std::pair<const char*, double TrainerState::*> kStateReals[] = {
    {"best_val_loss", &TrainerState::best_val_loss},
    {"last_val_loss", &TrainerState::last_val_loss},
    {"elapsed_seconds", &TrainerState::elapsed_seconds}};

json real_to_json(double value) {
  if (std::isfinite(value)) return value;
  if (std::isnan(value)) return "NaN";
  return value > 0 ? "Infinity" : "-Infinity";
}

std::string trainer_state_json(const TrainerState& state) {
  json out = {{"version", kTrainerStateVersion}, {"rng_state", state.rng_state}};
  for (const auto& [name, field] : kStateCounters) out[name] = state.*field;
  for (const auto& [name, field] : kStateReals) out[name] = real_to_json(state.*field);
  return out.dump(2) + "\n";
}

Expected<TrainerState> parse_trainer_state(const std::string& path) {
  KIPP_ASSIGN_OR_RETURN(const std::string text, read_text_file(path));
  const json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return make_error(path + ": not a JSON object");
  auto field = [&](const char* name) -> Expected<const json*> {
    const auto it = root.find(name);
    if (it == root.end()) return make_error(path + ": missing field '" + name + "'");
    return &*it;
  };
  KIPP_ASSIGN_OR_RETURN(const json* version, field("version"));
  if (*version != kTrainerStateVersion) {
    return make_error(path + ": version " + version->dump() + " (expected " + std::to_string(kTrainerStateVersion) +
                      ")");
  }
  TrainerState state;
  for (const auto& [name, member] : kStateCounters) {
    KIPP_ASSIGN_OR_RETURN(const json* value, field(name));
    if (!value->is_number_unsigned()) {
      return make_error(path + ": '" + name + "' must be a non-negative integer, found " + value->dump());
    }
    state.*member = value->get<uint64_t>();
  }
  for (const auto& [name, member] : kStateReals) {
    KIPP_ASSIGN_OR_RETURN(const json* value, field(name));
    const auto special = std::find_if(std::begin(kNonFinite), std::end(kNonFinite),
                                      [&](const auto& entry) { return *value == entry.first; });
    if (value->is_number()) {
      state.*member = value->get<double>();
    } else if (special != std::end(kNonFinite)) {
      state.*member = special->second;
    } else {
      return make_error(path + ": '" + name + "' must be a number, \"Infinity\", \"-Infinity\" or \"NaN\", found " +
                        value->dump());
    }
  }
  KIPP_ASSIGN_OR_RETURN(const json* rng, field("rng_state"));
  if (!rng->is_string()) return make_error(path + ": 'rng_state' must be a string, found " + rng->dump());
  state.rng_state = rng->get<std::string>();
  return state;
}

// ---- Files of a checkpoint -----------------------------------------------------------------

Status save_optimizer(const std::string& path, std::span<const ParamTensor> trained, const CheckpointData& data) {
  std::vector<SafetensorsWriteTensor> tensors;
  for (const ParamTensor& t : trained) {
    tensors.push_back({t.name + kExpAvg, SafetensorsDtype::F32, t.shape, tensor_bytes(data.adam_m, t)});
    tensors.push_back({t.name + kExpAvgSq, SafetensorsDtype::F32, t.shape, tensor_bytes(data.adam_v, t)});
  }
  return write_safetensors(path, tensors, {{"format", "pt"}, {"adam_steps", std::to_string(data.adam_steps)}});
}

Expected<uint64_t> read_adam_steps(const SafetensorsFile& file) {
  const auto it = file.metadata().find("adam_steps");
  if (it == file.metadata().end()) return make_error(file.path() + ": metadata 'adam_steps' is missing");
  const auto steps = parse_u64(it->second);
  if (!steps) {
    return make_error(file.path() + ": metadata 'adam_steps' is '" + it->second +
                      "' (expected a non-negative integer)");
  }
  return *steps;
}

// ---- The run folder's links and step folders ----------------------------------------------

// The step folder a link of the run names ("" when there is no such link).
std::string link_target(const std::string& run_dir, const char* link) {
  std::error_code error;
  const fs::path target = fs::read_symlink(join_path(run_dir, link), error);
  return error ? std::string() : target.filename().string();
}

Status point_link(const std::string& run_dir, const char* link, const std::string& folder_name) {
  const std::string temp = join_path(run_dir, std::string(".") + link + ".tmp-" + pid_text());
  const std::string path = join_path(run_dir, link);
  std::error_code error;
  fs::remove(temp, error);
  fs::create_directory_symlink(fs::path(kCheckpointsFolder) / folder_name, temp, error);
  KIPP_RETURN_IF_ERROR(filesystem_status(error, "cannot create link " + temp));
  fs::rename(temp, path, error);  // rename(2) replaces the old link in one step
  if (error) {
    const std::string reason = error.message();
    fs::remove(temp, error);
    return make_error("cannot replace " + path + " with a link: " + reason);
  }
  return fsync_folder(run_dir);
}

struct StepFolder {
  uint64_t step;
  std::string name;
};

Expected<std::vector<StepFolder>> step_folders(const std::string& checkpoints) {
  std::vector<StepFolder> out;
  std::error_code error;
  for (fs::directory_iterator it(checkpoints, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (const auto step = step_of(name); step && it->is_directory(error) && !it->is_symlink(error)) {
      out.push_back({*step, name});
    }
  }
  KIPP_RETURN_IF_ERROR(filesystem_status(error, "cannot list " + checkpoints));
  std::sort(out.begin(), out.end(), [](const StepFolder& a, const StepFolder& b) { return a.step > b.step; });
  return out;
}

// Renamed out of the step-N namespace first, so a crash mid-removal leaves a temporary folder
// (which remove_partial_checkpoints clears) rather than a half-deleted checkpoint.
Status retire(const std::string& checkpoints, const std::string& name) {
  const std::string doomed = join_path(checkpoints, "." + name + ".del-" + pid_text());
  std::error_code error;
  fs::rename(join_path(checkpoints, name), doomed, error);
  if (!error) fs::remove_all(doomed, error);
  return filesystem_status(error, "cannot remove old checkpoint " + join_path(checkpoints, name));
}

Status prune(const std::string& run_dir, uint32_t keep_last) {
  const std::string checkpoints = join_path(run_dir, kCheckpointsFolder);
  KIPP_ASSIGN_OR_RETURN(const std::vector<StepFolder> folders, step_folders(checkpoints));
  const std::string latest = link_target(run_dir, "latest"), best = link_target(run_dir, "best");
  for (size_t i = keep_last; i < folders.size(); ++i) {
    if (folders[i].name == latest || folders[i].name == best) continue;
    KIPP_RETURN_IF_ERROR(retire(checkpoints, folders[i].name));
  }
  return {};
}

Status check_sizes(uint64_t total, const CheckpointData& data) {
  if (data.params.size() != total) {
    return make_error("checkpoint: " + std::to_string(data.params.size()) + " parameters for a layout of " +
                      std::to_string(total));
  }
  const bool has_optimizer = !data.adam_m.empty() || !data.adam_v.empty();
  if (has_optimizer && (data.adam_m.size() != total || data.adam_v.size() != total)) {
    return make_error("checkpoint: AdamW moments of " + std::to_string(data.adam_m.size()) + " and " +
                      std::to_string(data.adam_v.size()) + " values for a layout of " + std::to_string(total));
  }
  return {};
}

}  // namespace

std::string hf_config_json(const ModelConfig& config) {
  // The keys of an official Qwen3 config.json (tools/make_synthetic.py build_config), FP32;
  // nlohmann's object keeps them sorted, as the official files have them.
  json out = {{"architectures", {"Qwen3ForCausalLM"}},
              {"attention_bias", false},
              {"attention_dropout", 0.0},
              {"hidden_act", "silu"},
              {"model_type", "qwen3"},
              {"rope_scaling", nullptr},
              {"sliding_window", nullptr},
              {"torch_dtype", "float32"},
              {"transformers_version", "4.51.0"},
              {"use_cache", true},
              {"use_sliding_window", false}};
  visit_config_fields(
      config, [&out](const ModelConfigField& field, const auto& value) { out[std::string(field.hf_key)] = value; });
  // Without a sliding window every layer counts as a full-attention one.
  out["max_window_layers"] = config.num_layers;
  return out.dump(2) + "\n";
}

Status write_model_folder(const std::string& dir, const ParameterLayout& layout, std::span<const float> params,
                          const std::string& tokenizer_json, const std::string& tokenizer_config_json) {
  if (params.size() != layout.total()) {
    return make_error(dir + ": " + std::to_string(params.size()) + " parameters for a layout of " +
                      std::to_string(layout.total()));
  }
  if (tokenizer_json.empty()) return make_error(dir + ": no tokenizer.json text to write");
  std::error_code error;
  fs::create_directories(dir, error);
  KIPP_RETURN_IF_ERROR(filesystem_status(error, "cannot create " + dir));
  KIPP_RETURN_IF_ERROR(write_text_file_atomic(join_path(dir, "config.json"), hf_config_json(layout.config())));
  KIPP_RETURN_IF_ERROR(save_parameters(layout, params, join_path(dir, "model.safetensors")));
  return write_tokenizer_files(dir, tokenizer_json, tokenizer_config_json);
}

Status write_tokenizer_files(const std::string& dir, const std::string& tokenizer_json,
                             const std::string& tokenizer_config_json) {
  KIPP_RETURN_IF_ERROR(write_text_file_atomic(join_path(dir, "tokenizer.json"), tokenizer_json));
  if (tokenizer_config_json.empty()) return {};
  return write_text_file_atomic(join_path(dir, "tokenizer_config.json"), tokenizer_config_json);
}

namespace {

// A checkpoint of either kind: `write_weights` fills the staging folder with the weights' files.
Expected<std::string> save_any_checkpoint(const std::string& run_dir, std::span<const ParamTensor> tensors,
                                          uint64_t total, const CheckpointData& data, bool is_best, uint32_t keep_last,
                                          const std::function<Status(const std::string& dir)>& write_weights) {
  KIPP_RETURN_IF_ERROR(check_sizes(total, data));
  const std::string checkpoints = join_path(run_dir, kCheckpointsFolder);
  const std::string name = step_folder_name(data.state.step);
  StagingFolder staging(join_path(checkpoints, "." + name + ".tmp-" + pid_text()));
  KIPP_RETURN_IF_ERROR(staging.create());
  KIPP_RETURN_IF_ERROR(write_weights(staging.path()));
  if (!data.adam_m.empty()) {
    KIPP_RETURN_IF_ERROR(save_optimizer(join_path(staging.path(), "optimizer.safetensors"), tensors, data));
  }
  KIPP_RETURN_IF_ERROR(
      write_text_file_atomic(join_path(staging.path(), "trainer_state.json"), trainer_state_json(data.state)));
  const std::string folder = join_path(checkpoints, name);
  KIPP_RETURN_IF_ERROR(staging.publish(folder));
  // `best` moves first: a crash between the two leaves `latest` one checkpoint behind (resume
  // redoes that step) rather than a `best` older than the loss the state records.
  if (is_best) KIPP_RETURN_IF_ERROR(point_link(run_dir, "best", name));
  KIPP_RETURN_IF_ERROR(point_link(run_dir, "latest", name));
  KIPP_RETURN_IF_ERROR(prune(run_dir, keep_last));
  return folder;
}

// The optimizer state and trainer state of a checkpoint of either kind (weights read by the caller).
Status load_training_state(const std::string& dir, std::span<const ParamTensor> tensors, uint64_t total,
                           LoadedCheckpoint& out) {
  const std::string optimizer_path = join_path(dir, "optimizer.safetensors");
  if (!file_exists(optimizer_path)) {
    return make_error(optimizer_path +
                      " is missing: this folder has weights but no optimizer state, so it cannot be "
                      "resumed (start a new run from its weights with --init)");
  }
  KIPP_ASSIGN_OR_RETURN(const SafetensorsFile optimizer, open_tensors(optimizer_path, tensors, {kExpAvg, kExpAvgSq}));
  KIPP_ASSIGN_OR_RETURN(out.adam_steps, read_adam_steps(optimizer));
  out.adam_m.resize(total);
  out.adam_v.resize(total);
  copy_tensors(optimizer, tensors, kExpAvg, out.adam_m);
  copy_tensors(optimizer, tensors, kExpAvgSq, out.adam_v);
  KIPP_ASSIGN_OR_RETURN(out.state, parse_trainer_state(join_path(dir, "trainer_state.json")));
  return {};
}

}  // namespace

Expected<std::string> save_checkpoint(const std::string& run_dir, const ParameterLayout& layout,
                                      const CheckpointData& data, bool is_best, uint32_t keep_last) {
  return save_any_checkpoint(
      run_dir, layout.tensors(), layout.total(), data, is_best, keep_last, [&](const std::string& dir) {
        return write_model_folder(dir, layout, data.params, data.tokenizer_json, data.tokenizer_config_json);
      });
}

Expected<std::string> save_checkpoint(const std::string& run_dir, const AdapterLayout& adapters,
                                      const std::string& base, const CheckpointData& data, bool is_best,
                                      uint32_t keep_last) {
  return save_any_checkpoint(run_dir, adapters.tensors(), adapters.total(), data, is_best, keep_last,
                             [&](const std::string& dir) -> Status {
                               KIPP_RETURN_IF_ERROR(save_peft_adapter(dir, adapters, data.params, base));
                               return write_tokenizer_files(dir, data.tokenizer_json, data.tokenizer_config_json);
                             });
}

Expected<LoadedCheckpoint> load_checkpoint(const std::string& dir, const ParameterLayout& layout) {
  if (file_exists(join_path(dir, kAdapterConfigFile))) {
    return make_error(dir + " holds LoRA adapters, not a model: set train.lora as the run that wrote it did");
  }
  KIPP_ASSIGN_OR_RETURN(const ModelConfig config, read_model_config(dir));
  KIPP_RETURN_IF_ERROR(check_model_dimensions(layout.config(), config, join_path(dir, "config.json"), true));

  LoadedCheckpoint out;
  KIPP_ASSIGN_OR_RETURN(const SafetensorsFile model,
                        open_tensors(join_path(dir, "model.safetensors"), layout.tensors(), {""}));
  out.params.resize(layout.total());
  copy_tensors(model, layout.tensors(), "", out.params);
  KIPP_RETURN_IF_ERROR(load_training_state(dir, layout.tensors(), layout.total(), out));
  return out;
}

Expected<LoadedCheckpoint> load_checkpoint(const std::string& dir, const AdapterLayout& adapters) {
  if (!file_exists(join_path(dir, kAdapterConfigFile))) {
    return make_error(dir + " holds no LoRA adapters (no " + kAdapterConfigFile +
                      "): it is a full model's checkpoint, which train.lora cannot continue");
  }
  KIPP_ASSIGN_OR_RETURN(PeftAdapter adapter, load_peft_adapter(dir, adapters.config()));
  if (!(adapter.options == adapters.options())) {
    return make_error(join_path(dir, kAdapterConfigFile) +
                      ": the adapters were trained with another train.lora (rank, alpha, dropout or targets); "
                      "keep the run's train.lora to resume it");
  }
  LoadedCheckpoint out;
  out.params = std::move(adapter.values);
  KIPP_RETURN_IF_ERROR(load_training_state(dir, adapters.tensors(), adapters.total(), out));
  return out;
}

Status remove_partial_checkpoints(const std::string& run_dir) {
  const std::string checkpoints = join_path(run_dir, kCheckpointsFolder);
  std::error_code error;
  if (!fs::is_directory(checkpoints, error)) return {};
  // A step folder newer than `latest` that `best` does not name was renamed into place by a
  // save that crashed before moving the links: the resumed run writes it again.
  const auto latest = step_of(link_target(run_dir, "latest"));
  const std::string best = link_target(run_dir, "best");
  std::vector<std::string> leftovers;
  for (fs::directory_iterator it(checkpoints, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    const auto step = step_of(name);
    const bool staging = name.rfind(std::string(".") + kStepPrefix, 0) == 0;
    if (staging || (latest && step && *step > *latest && name != best)) leftovers.push_back(name);
  }
  KIPP_RETURN_IF_ERROR(filesystem_status(error, "cannot list " + checkpoints));
  for (const std::string& name : leftovers) {
    fs::remove_all(join_path(checkpoints, name), error);
    KIPP_RETURN_IF_ERROR(filesystem_status(error, "cannot remove " + join_path(checkpoints, name)));
  }
  for (fs::directory_iterator it(run_dir, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(".latest.tmp-", 0) == 0 || name.rfind(".best.tmp-", 0) == 0) {
      std::error_code ignored;
      fs::remove(it->path(), ignored);
    }
  }
  return filesystem_status(error, "cannot list " + run_dir);
}

namespace {

// "out/" names the folder "out": the temporary sibling goes next to it, not inside.
std::string folder_path(const std::string& out_dir) {
  const fs::path out(out_dir);
  return (out.has_filename() ? out : out.parent_path()).string();
}

}  // namespace

Status check_new_folder(const std::string& out_dir) {
  const std::string folder = folder_path(out_dir);
  std::error_code error;
  if (fs::exists(fs::symlink_status(folder, error))) return make_error(folder + " already exists; choose a new folder");
  return {};
}

Status write_new_folder(const std::string& out_dir, const std::function<Status(const std::string& dir)>& fill) {
  KIPP_RETURN_IF_ERROR(check_new_folder(out_dir));
  const std::string folder = folder_path(out_dir);
  std::error_code error;
  fs::create_directories(parent_folder(folder), error);
  KIPP_RETURN_IF_ERROR(filesystem_status(error, "cannot create the folder of " + folder));
  StagingFolder staging(folder + ".tmp-" + pid_text());
  KIPP_RETURN_IF_ERROR(staging.create());
  KIPP_RETURN_IF_ERROR(fill(staging.path()));
  return staging.publish(folder);
}

Status average_checkpoints(const std::vector<std::string>& dirs, const std::string& out_dir) {
  if (dirs.size() < 2) return make_error("averaging needs at least two checkpoint folders");
  // Refused before any weight is read.
  KIPP_RETURN_IF_ERROR(check_new_folder(out_dir));
  for (const std::string& dir : dirs) {
    if (file_exists(join_path(dir, kAdapterConfigFile))) {
      return make_error(dir +
                        " holds LoRA adapters: they cannot be averaged (the mean of several B A products is not the "
                        "product of the mean B and A); merge one with kipp lora merge instead");
    }
  }
  KIPP_ASSIGN_OR_RETURN(const ModelConfig config, read_model_config(dirs[0]));
  const ParameterLayout layout(config);
  std::vector<SafetensorsFile> sources;
  for (const std::string& dir : dirs) {
    KIPP_ASSIGN_OR_RETURN(const ModelConfig other, read_model_config(dir));
    KIPP_RETURN_IF_ERROR(check_model_dimensions(config, other, join_path(dir, "config.json"), true));
    if (!(other == config)) {
      std::string fields;
      visit_config_members([&](const ModelConfigField& field, auto member) {
        if (other.*member != config.*member)
          fields += std::string(fields.empty() ? "" : ", ") + std::string(field.hf_key);
      });
      return make_error(join_path(dir, "config.json") + " differs from " + join_path(dirs[0], "config.json") + " in " +
                        fields + "; only checkpoints of one model can be averaged");
    }
    KIPP_ASSIGN_OR_RETURN(SafetensorsFile file,
                          open_tensors(join_path(dir, "model.safetensors"), layout.tensors(), {""}));
    sources.push_back(std::move(file));
  }

  // Summed in double and rounded once, so the mean of two is the exactly rounded (a + b) / 2.
  std::vector<float> mean(layout.total()), values;
  std::vector<double> sum;
  for (const ParamTensor& t : layout.tensors()) {
    sum.assign(t.count, 0.0);
    values.resize(t.count);
    for (const SafetensorsFile& source : sources) {
      std::memcpy(values.data(), source.data(*source.find(t.name)).data(), t.count * sizeof(float));
      for (uint64_t i = 0; i < t.count; ++i) sum[i] += values[i];
    }
    for (uint64_t i = 0; i < t.count; ++i) mean[t.offset + i] = static_cast<float>(sum[i] / double(sources.size()));
  }

  KIPP_ASSIGN_OR_RETURN(const std::string tokenizer_json, read_text_file(join_path(dirs[0], "tokenizer.json")));
  const std::string tokenizer_config_path = join_path(dirs[0], "tokenizer_config.json");
  std::string tokenizer_config_json;
  if (file_exists(tokenizer_config_path)) {
    KIPP_ASSIGN_OR_RETURN(tokenizer_config_json, read_text_file(tokenizer_config_path));
  }

  return write_new_folder(out_dir, [&](const std::string& dir) {
    return write_model_folder(dir, layout, mean, tokenizer_json, tokenizer_config_json);
  });
}

Expected<TrainerState> load_trainer_state(const std::string& dir) {
  return parse_trainer_state(join_path(dir, "trainer_state.json"));
}

}  // namespace kipp::train
