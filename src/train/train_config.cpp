#include "train/train_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <string_view>
#include <type_traits>

#include "chat/chat_template.h"
#include "core/files.h"

namespace kipp::train {
namespace {

namespace fs = std::filesystem;

// ---- How each key's value is checked -------------------------------------------------------

// An integer of at least `min` that is a multiple of `multiple` (`why` says who needs that).
// `auto_zero` keys also take `auto` (or 0), kept as 0 until something resolves it.
struct Count {
  uint64_t min;
  uint64_t multiple;
  const char* why;
  bool auto_zero;
};

constexpr Count kPositiveInt{1, 1, "", false};
constexpr Count kNonNegativeInt{0, 1, "", false};

// A number in an interval; an infinite bound is no bound.
struct Real {
  double lo, hi;
  bool lo_open, hi_open;
};

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr Real kPositiveReal{0, kInf, true, true};
constexpr Real kNonNegativeReal{0, kInf, false, true};
constexpr Real kFraction{0, 1, false, true};

// A word from a fixed set.
struct Choice {
  std::vector<std::string_view> words;
};

// Relative input paths name files next to the config; outputs (run.dir) follow the working
// directory, as an output path on a command line does.
enum class PathBase { ConfigFolder, WorkingDirectory };

// A string (or list of strings) taken as written: not a path, not from a fixed set.
struct PlainText {};
constexpr PlainText kPlainText;

// A KitAI model key this architecture has exactly one value for: accepted so that a seed config
// loads, with any other value refused and the reason given.
struct Fixed {
  const char* value;  // as written back by to_yaml
  const char* reason;
  bool (*accepts)(std::string_view text);
};

// The whole text is one number (no sign for unsigned types, no trailing characters).
template <typename T>
bool parse_whole(std::string_view text, T& value) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size();
}

bool is_zero(std::string_view text) {
  double value = 1;
  return parse_whole(text, value) && value == 0;
}
bool is_swiglu(std::string_view text) { return text == "swiglu"; }
bool is_false(std::string_view text) { return text == "false" || text == "False" || text == "FALSE"; }

const Fixed kNoDropout{"0.0", "this architecture has no dropout; only 0 is accepted", is_zero};
const Fixed kSwiGlu{"swiglu", "Qwen3's feed-forward is SwiGLU; only swiglu is accepted", is_swiglu};
const Fixed kNoBias{"false", "Qwen3's projections have no bias; only false is accepted", is_false};

// Every key, in file order. Reading, writing and the list of known keys all walk this one
// table; a dotted name is "section.key", a plain one a top-level key.
template <typename Config, typename Visit>
void visit_fields(Config& c, Visit&& visit) {
  // The model's own fields, with the rules ModelConfig::validate applies to them.
  visit_config_fields(c.model.dims, [&visit](const ModelConfigField& field, auto& value) {
    using T = std::decay_t<decltype(value)>;
    if (field.yaml_key == nullptr) return;
    if constexpr (std::is_same_v<T, uint32_t>) {
      const std::string_view why = field.multiple_why;
      visit(field.yaml_key, value, Count{1, field.multiple, why.empty() ? "" : why.data(), field.yaml_auto});
    } else if constexpr (std::is_same_v<T, double>) {
      visit(field.yaml_key, value, Real{0, field.at_most, true, field.at_most == kInf});
    } else {
      visit(field.yaml_key, value);
    }
  });
  visit("model.init_std", c.model.init_std, kPositiveReal);
  visit("model.scaled_residual_init", c.model.scaled_residual_init);
  visit("model.dropout", kNoDropout);
  visit("model.activation", kSwiGlu);
  visit("model.bias", kNoBias);
  visit("tokenizer", c.tokenizer, PathBase::ConfigFolder);
  visit("data.format", c.data.format,
        Choice{{"auto", "text", "jsonl", "csv", "parquet", "alpaca", "sharegpt", "openai", "tokens"}});
  visit("data.train", c.data.train, PathBase::ConfigFolder);
  visit("data.validation", c.data.validation, PathBase::ConfigFolder);
  visit("data.text_field", c.data.text_field, kPlainText);
  visit("data.document_separator", c.data.document_separator, kPlainText);
  visit("data.chat_format", c.data.chat_format, Choice{chat_format_names()});
  visit("data.token_dtype", c.data.token_dtype, Choice{{"uint16", "uint32"}});
  visit("data.validation_fraction", c.data.validation_fraction, kFraction);
  visit("data.seed", c.data.seed, kNonNegativeInt);
  visit("data.shuffle_buffer", c.data.shuffle_buffer, kNonNegativeInt);
  visit("data.cache_dir", c.data.cache_dir, PathBase::WorkingDirectory);
  visit("data.strict", c.data.strict);
  visit("train.seq_len", c.train.seq_len, kPositiveInt);
  visit("train.micro_batch", c.train.micro_batch, kPositiveInt);
  visit("train.grad_accum", c.train.grad_accum, kPositiveInt);
  visit("train.max_steps", c.train.max_steps, kPositiveInt);
  visit("train.schedule", c.train.schedule);
  visit("train.lr", c.train.lr, kPositiveReal);
  visit("train.min_lr", c.train.min_lr, kNonNegativeReal);
  visit("train.warmup_steps", c.train.warmup_steps, kNonNegativeInt);
  visit("train.weight_decay", c.train.weight_decay, kNonNegativeReal);
  visit("train.beta1", c.train.beta1, kFraction);
  visit("train.beta2", c.train.beta2, kFraction);
  visit("train.eps", c.train.eps, kPositiveReal);
  visit("train.decay_embeddings", c.train.decay_embeddings);
  visit("train.grad_clip", c.train.grad_clip, kNonNegativeReal);
  visit("train.seed", c.train.seed, kNonNegativeInt);
  visit("train.threads", c.train.threads, kNonNegativeInt);
  visit("train.recompute_blocks", c.train.recompute_blocks);
  visit("train.precision", c.train.precision);
  visit("train.device", c.train.device);
  visit("train.max_bad_steps", c.train.max_bad_steps, kPositiveInt);
  visit("train.allreduce_overlap", c.train.allreduce_overlap);
  visit("train.lora.rank", c.train.lora.rank, kNonNegativeInt);
  visit("train.lora.alpha", c.train.lora.alpha, kPositiveReal);
  visit("train.lora.dropout", c.train.lora.dropout, kFraction);
  visit("train.lora.targets", c.train.lora.targets);
  visit("eval.every", c.eval.every, kNonNegativeInt);
  visit("eval.batches", c.eval.batches, kPositiveInt);
  visit("eval.sample_prompts", c.eval.sample_prompts, kPlainText);
  visit("eval.sample_tokens", c.eval.sample_tokens, kPositiveInt);
  visit("eval.sample_temperature", c.eval.sample_temperature, kNonNegativeReal);
  visit("checkpoint.every", c.checkpoint.every, kNonNegativeInt);
  visit("checkpoint.keep_last", c.checkpoint.keep_last, kPositiveInt);
  visit("log.every", c.log.every, kPositiveInt);
  visit("run.dir", c.run_dir, PathBase::WorkingDirectory);
}

constexpr std::string_view kScheduleNames[] = {"cosine", "linear", "constant"};

// parse_schedule_kind stays the one map between names and kinds.
std::string_view schedule_name(ScheduleKind kind) {
  for (std::string_view name : kScheduleNames) {
    if (parse_schedule_kind(name).value() == kind) return name;
  }
  return kScheduleNames[0];
}

std::string section_of(std::string_view name) {
  const size_t dot = name.find('.');
  return std::string(dot == std::string_view::npos ? std::string_view() : name.substr(0, dot));
}

std::string key_of(std::string_view name) {
  const size_t dot = name.find('.');
  return std::string(dot == std::string_view::npos ? name : name.substr(dot + 1));
}

const std::vector<std::string>& known_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    TrainConfig config;
    visit_fields(config, [&](const char* name, auto&&...) { out.emplace_back(name); });
    return out;
  }();
  return names;
}

bool is_known(std::string_view name) {
  const auto& names = known_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

// A section (`train`) or a nested group of keys (`train.lora`).
bool is_section(std::string_view name) {
  for (const std::string& known : known_names()) {
    if (known.size() > name.size() && known.starts_with(name) && known[name.size()] == '.') return true;
  }
  return false;
}

// "train.lora.rank=VALUE": the first key of the group `group`, as an example.
std::string known_under(std::string_view group) {
  for (const std::string& known : known_names()) {
    if (known.starts_with(std::string(group) + ".")) return known + "=VALUE";
  }
  return std::string(group) + ".KEY=VALUE";
}

// Optimal string alignment distance: edits, with a swap of neighbours counted as one.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// " (did you mean train.max_steps?)" when an unknown name is an obvious near miss: a small typo
// of a name at the same place, or a key that exists under another section.
std::string suggestion(std::string_view unknown) {
  std::vector<std::string> candidates = known_names();
  for (const std::string& name : known_names()) {
    if (!section_of(name).empty()) candidates.push_back(section_of(name));
  }
  const std::string section = section_of(unknown), key = key_of(unknown);
  std::string best;
  size_t best_distance = 3;  // at most two edits...
  for (const std::string& name : candidates) {
    if (section_of(name) != section) continue;
    const size_t distance = edit_distance(key, key_of(name));
    if (distance < best_distance && 2 * distance < key.size()) {  // ...and less than half the name
      best = name;
      best_distance = distance;
    }
  }
  if (best.empty()) {
    size_t matches = 0;
    for (const std::string& name : known_names()) {
      if (key_of(name) == key && section_of(name) != section && ++matches == 1) best = name;
    }
    if (matches > 1) best.clear();  // eval.every or log.every: not obvious
  }
  return best.empty() ? " (configs/training.yaml lists every key)" : " (did you mean " + best + "?)";
}

// ---- Reading values ------------------------------------------------------------------------

std::string found_text(const YAML::Node& node) {
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  if (!node.IsScalar()) return "nothing";
  return "'" + node.Scalar() + "'";
}

std::string count_text(const Count& rule) {
  std::string text = rule.min == 0 ? "a non-negative " : "a positive ";
  text += rule.multiple > 1 ? "multiple of " + std::to_string(rule.multiple) : std::string("integer");
  return rule.auto_zero ? text + " or auto" : text;
}

std::string number_text(double value) {
  char text[32];
  const auto result = std::to_chars(text, text + sizeof text, value);
  return std::string(text, result.ptr);
}

std::string real_text(const Real& rule) {
  if (rule.lo == 0 && rule.hi == kInf) return rule.lo_open ? "a positive number" : "a non-negative number";
  return std::string("a number in ") + (rule.lo_open ? "(" : "[") + number_text(rule.lo) + ", " + number_text(rule.hi) +
         (rule.hi_open ? ")" : "]");
}

Expected<uint64_t> read_count(const YAML::Node& node, const Count& rule, uint64_t max) {
  const std::string expected = "expected " + count_text(rule) + ", got " + found_text(node);
  if (!node.IsScalar()) return make_error(expected);
  if (rule.auto_zero && node.Scalar() == "auto") return uint64_t{0};
  uint64_t value = 0;
  if (!parse_whole(node.Scalar(), value)) return make_error(expected);
  if (rule.auto_zero && value == 0) return value;
  if (value < rule.min) return make_error(expected);
  if (value > max) return make_error(expected + " (at most " + std::to_string(max) + ")");
  if (value % rule.multiple != 0) return make_error(expected + ": " + rule.why);
  return value;
}

bool in_range(double value, const Real& rule) {
  const bool above = rule.lo_open ? value > rule.lo : value >= rule.lo;
  const bool below = rule.hi_open ? value < rule.hi : value <= rule.hi;
  return above && below;  // false for NaN
}

Expected<double> read_real(const YAML::Node& node, const Real& rule) {
  double value = 0;
  if (!node.IsScalar() || !parse_whole(node.Scalar(), value) || !in_range(value, rule)) {
    return make_error("expected " + real_text(rule) + ", got " + found_text(node));
  }
  return value;
}

Expected<bool> read_bool(const YAML::Node& node) {
  if (node.IsScalar()) {
    const std::string& text = node.Scalar();
    if (text == "true" || text == "True" || text == "TRUE") return true;
    if (is_false(text)) return false;
  }
  return make_error("expected true or false, got " + found_text(node));
}

// A missing value (`tokenizer:`) reads as empty, so the "required" check explains what to set.
Expected<std::string> read_string(const YAML::Node& node, const char* what) {
  if (node.IsNull()) return std::string();
  if (!node.IsScalar()) return make_error(std::string("expected ") + what + ", got " + found_text(node));
  return node.Scalar();
}

std::string resolve_path(const std::string& path, const std::string& base) {
  if (path.empty()) return path;
  fs::path resolved(path);
  if (resolved.is_relative() && !base.empty()) resolved = fs::path(base) / resolved;
  std::error_code error;
  const fs::path absolute = fs::absolute(resolved, error);
  return (error ? resolved : absolute).lexically_normal().string();
}

// Where a key's value came from: its node, the prefix of its errors and its folder for paths.
struct Source {
  YAML::Node node;
  std::string origin;    // "FILE: ", "" (text without a file) or "--set "
  std::string base_dir;  // relative input paths resolve here ("" = the working directory)
};

using Sources = std::map<std::string, Source, std::less<>>;

class Reader {
 public:
  Reader(const Sources& sources, std::vector<std::string>& errors) : sources_(sources), errors_(errors) {}

  template <typename T>
  void operator()(const char* name, T& value, const Count& rule) {
    read(name, [&](const Source& s) -> Status {
      KIPP_ASSIGN_OR_RETURN(const uint64_t count, read_count(s.node, rule, std::numeric_limits<T>::max()));
      value = static_cast<T>(count);
      return {};
    });
  }
  void operator()(const char* name, double& value, const Real& rule) {
    read(name, [&](const Source& s) -> Status {
      KIPP_ASSIGN_OR_RETURN(value, read_real(s.node, rule));
      return {};
    });
  }
  void operator()(const char* name, bool& value) {
    read(name, [&](const Source& s) -> Status {
      KIPP_ASSIGN_OR_RETURN(value, read_bool(s.node));
      return {};
    });
  }
  void operator()(const char* name, std::string& value, const Choice& rule) {
    read(name, [&](const Source& s) -> Status {
      std::string words;
      for (std::string_view word : rule.words) words += (words.empty() ? "" : " or ") + std::string(word);
      const auto text = read_string(s.node, words.c_str());
      if (!text.ok() || std::find(rule.words.begin(), rule.words.end(), *text) == rule.words.end()) {
        return make_error("expected " + words + ", got " + found_text(s.node));
      }
      value = *text;
      return {};
    });
  }
  void operator()(const char* name, std::string& value, PathBase base) {
    read(name, [&](const Source& s) -> Status {
      KIPP_ASSIGN_OR_RETURN(value, read_string(s.node, "a path"));
      if (base == PathBase::ConfigFolder) value = resolve_path(value, s.base_dir);
      return {};
    });
    // Outputs follow the working directory, the default value included.
    if (base == PathBase::WorkingDirectory) value = resolve_path(value, "");
  }
  void operator()(const char* name, std::vector<std::string>& value, PathBase base) {
    read(name, [&](const Source& s) -> Status {
      const std::string expected = "expected a list of files such as [a.txt, b.txt], got ";
      if (s.node.IsNull()) {
        value.clear();
        return {};
      }
      if (!s.node.IsSequence()) return make_error(expected + found_text(s.node));
      std::vector<std::string> paths;
      for (const YAML::Node& item : s.node) {
        if (!item.IsScalar() || item.Scalar().empty()) {
          return make_error(expected + "an entry " + (item.IsScalar() ? "''" : found_text(item)));
        }
        paths.push_back(resolve_path(item.Scalar(), base == PathBase::ConfigFolder ? s.base_dir : std::string()));
      }
      value = std::move(paths);
      return {};
    });
  }
  void operator()(const char* name, std::string& value, const PlainText&) {
    read(name, [&](const Source& s) -> Status {
      KIPP_ASSIGN_OR_RETURN(value, read_string(s.node, "a string"));
      return {};
    });
  }
  void operator()(const char* name, std::vector<std::string>& value, const PlainText&) {
    read(name, [&](const Source& s) -> Status {
      const std::string expected = "expected a list of strings such as [\"Once upon\", \"The\"], got ";
      if (s.node.IsNull()) {
        value.clear();
        return {};
      }
      if (!s.node.IsSequence()) return make_error(expected + found_text(s.node));
      std::vector<std::string> items;
      for (const YAML::Node& item : s.node) {
        if (!item.IsScalar()) return make_error(expected + "an entry " + found_text(item));
        items.push_back(item.Scalar());
      }
      value = std::move(items);
      return {};
    });
  }
  void operator()(const char* name, ScheduleKind& value) {
    read(name, [&](const Source& s) -> Status {
      if (!s.node.IsScalar()) return make_error("expected cosine, linear or constant, got " + found_text(s.node));
      KIPP_ASSIGN_OR_RETURN(value, parse_schedule_kind(s.node.Scalar()));
      return {};
    });
  }
  // Each bad entry is its own error, named by its index: "train.lora.targets[2]: ...".
  void operator()(const char* name, std::vector<LoraTarget>& value) {
    const auto it = sources_.find(name);
    if (it == sources_.end()) return;
    const Source& s = it->second;
    if (!s.node.IsSequence() || s.node.size() == 0) {
      errors_.push_back(s.origin + name + ": expected a non-empty list of q, k, v, o, gate, up, down, got " +
                        found_text(s.node));
      return;
    }
    std::vector<LoraTarget> targets;
    bool ok = true;
    for (size_t i = 0; i < s.node.size(); ++i) {
      const YAML::Node item = s.node[i];
      const std::string where = s.origin + name + "[" + std::to_string(i) + "]: ";
      auto target = item.IsScalar()
                        ? parse_lora_target(item.Scalar())
                        : Expected<LoraTarget>(make_error("expected a LoRA target, got " + found_text(item)));
      if (!target) {
        errors_.push_back(where + target.message());
        ok = false;
      } else if (std::find(targets.begin(), targets.end(), *target) != targets.end()) {
        errors_.push_back(where + "'" + item.Scalar() + "' is listed twice");
        ok = false;
      } else {
        targets.push_back(*target);
      }
    }
    if (ok) value = std::move(targets);
  }
  void operator()(const char* name, Precision& value) {
    read(name, [&](const Source& s) -> Status {
      if (!s.node.IsScalar()) return make_error("expected fp32 or bf16, got " + found_text(s.node));
      KIPP_ASSIGN_OR_RETURN(value, parse_precision(s.node.Scalar()));
      return {};
    });
  }
  void operator()(const char* name, TrainDevice& value) {
    read(name, [&](const Source& s) -> Status {
      if (!s.node.IsScalar()) return make_error("expected cpu or cuda, got " + found_text(s.node));
      KIPP_ASSIGN_OR_RETURN(value, parse_device(s.node.Scalar()));
      return {};
    });
  }
  void operator()(const char* name, const Fixed& rule) {
    read(name, [&](const Source& s) -> Status {
      if (s.node.IsScalar() && rule.accepts(s.node.Scalar())) return {};
      return make_error(std::string(rule.reason) + ", got " + found_text(s.node));
    });
  }

 private:
  template <typename Parse>
  void read(const char* name, Parse&& parse) {
    const auto it = sources_.find(name);
    if (it == sources_.end()) return;
    const Status status = parse(it->second);
    if (!status) errors_.push_back(it->second.origin + name + ": " + status.message());
  }

  const Sources& sources_;
  std::vector<std::string>& errors_;
};

// ---- Collecting the sources: the file's keys, then the overrides ---------------------------

std::string yaml_error_text(const YAML::Exception& error) {
  if (error.mark.is_null()) return error.msg;
  return "line " + std::to_string(error.mark.line + 1) + ", column " + std::to_string(error.mark.column + 1) + ": " +
         error.msg;
}

// The keys of the mapping `node` under `prefix` ("" at the top, "train", "train.lora"), nested
// groups descended into.
void add_keys(const YAML::Node& node, const std::string& prefix, const std::string& origin, const std::string& base_dir,
              Sources& sources, std::vector<std::string>& errors) {
  for (const auto& entry : node) {
    const std::string name = prefix.empty() ? entry.first.Scalar() : prefix + "." + entry.first.Scalar();
    if (is_known(name)) {
      if (!sources.emplace(name, Source{entry.second, origin, base_dir}).second) {
        errors.push_back(origin + name + ": given twice");
      }
    } else if (!is_section(name)) {
      errors.push_back(origin + name + (prefix.empty() ? ": unknown section" : ": unknown key") + suggestion(name));
    } else if (!entry.second.IsMap() && !entry.second.IsNull()) {
      errors.push_back(origin + name + ": expected a section of key: value lines, got " + found_text(entry.second));
    } else {
      add_keys(entry.second, name, origin, base_dir, sources, errors);
    }
  }
}

void add_override(const std::string& text, Sources& sources, std::vector<std::string>& errors) {
  const size_t equals = text.find('=');
  const std::string name = text.substr(0, equals);
  const bool bare_key = name.find('.') == std::string::npos && !is_known(name);
  if (equals == std::string::npos || name.empty() || bare_key) {
    const bool hint = equals != std::string::npos && bare_key && !name.empty() && !is_section(name);
    errors.push_back("--set " + text + ": expected section.key=value, e.g. --set train.max_steps=20" +
                     (hint ? suggestion(name) : std::string()));
    return;
  }
  if (!is_known(name) && is_section(name)) {
    errors.push_back("--set " + name + ": a group of keys; set them one by one, e.g. --set " + known_under(name));
    return;
  }
  if (!is_known(name)) {
    errors.push_back("--set " + name + ": unknown key" + suggestion(name));
    return;
  }
  try {
    // Later --set of the same key wins, as on most command lines.
    sources[name] = Source{YAML::Load(text.substr(equals + 1)), "--set ", ""};
  } catch (const YAML::Exception& error) {
    errors.push_back("--set " + text + ": not a YAML value: " + yaml_error_text(error));
  }
}

// ---- Checks across keys --------------------------------------------------------------------

uint32_t resolved_head_dim(const ModelConfig& m) { return m.head_dim ? m.head_dim : m.hidden_size / m.num_heads; }

void check_relations(TrainConfig& c, const Sources& sources, const std::string& file_origin,
                     std::vector<std::string>& errors) {
  auto fail = [&](const char* name, const std::string& message) {
    const auto it = sources.find(name);
    errors.push_back((it == sources.end() ? file_origin : it->second.origin) + name + ": " + message);
  };
  ModelConfig& m = c.model.dims;
  if (m.num_heads % m.num_kv_heads != 0) {
    fail("model.n_kv_heads", "n_heads " + std::to_string(m.num_heads) + " is not a multiple of n_kv_heads " +
                                 std::to_string(m.num_kv_heads) +
                                 " (each key/value head serves a whole group of query heads)");
  }
  if (m.head_dim == 0) {
    if (m.hidden_size % m.num_heads != 0) {
      fail("model.head_dim", "auto means d_model / n_heads, but d_model " + std::to_string(m.hidden_size) +
                                 " is not a multiple of n_heads " + std::to_string(m.num_heads) + "; set head_dim");
    } else if (resolved_head_dim(m) % 2 != 0) {
      fail("model.head_dim", "auto gives d_model / n_heads = " + std::to_string(resolved_head_dim(m)) +
                                 ", which is odd: " + std::string(kRotaryPairsWhy) + "; set head_dim");
    } else {
      m.head_dim = resolved_head_dim(m);
    }
  }
  const uint64_t attention_width = uint64_t{m.num_heads} * m.head_dim;
  if (m.head_dim != 0 && attention_width % kQuantBlock != 0) {
    fail("model.head_dim", "n_heads * head_dim = " + std::to_string(attention_width) + " is not a multiple of " +
                               std::to_string(kQuantBlock) + ": " + std::string(kQuantBlockWhy));
  }
  if (c.train.seq_len > m.context_length) {
    fail("train.seq_len",
         std::to_string(c.train.seq_len) + " is longer than model.max_seq_len " + std::to_string(m.context_length));
  }
  if (c.train.min_lr > c.train.lr) {
    fail("train.min_lr", number_text(c.train.min_lr) + " is above train.lr " + number_text(c.train.lr));
  }
  if (c.train.warmup_steps > c.train.max_steps) {
    fail("train.warmup_steps",
         std::to_string(c.train.warmup_steps) + " is more than train.max_steps " + std::to_string(c.train.max_steps));
  }
  if (c.tokenizer.empty()) {
    fail("tokenizer", "required: the path of an HF tokenizer.json, e.g. --set tokenizer=PATH/tokenizer.json");
  }
  if (c.data.train.empty()) {
    fail("data.train", "no training files; list them in the config or with --set data.train=[FILE,...]");
  }
  if (c.run_dir.empty()) {
    fail("run.dir", "required: the folder for this run's checkpoints, e.g. --set run.dir=runs/try");
  }
}

// ---- Starting from a checkpoint ------------------------------------------------------------

std::string model_value_text(uint32_t value) { return std::to_string(value); }
std::string model_value_text(bool value) { return value ? "true" : "false"; }
// Whole numbers in full (rope_theta 1000000, as config.json writes it), others shortest.
std::string model_value_text(double value) {
  if (value == std::floor(value) && std::fabs(value) < 1e15) return std::to_string(int64_t(value));
  return number_text(value);
}

// The model section is the source's config: a key the user left out takes the source's value, a
// key set to `auto` resolves to it, and a key the user gave must equal it.
void apply_init_source(TrainConfig& c, const InitSource& init, const Sources& sources,
                       std::vector<std::string>& errors) {
  visit_config_members([&](const ModelConfigField& field, auto member) {
    if (field.yaml_key == nullptr) return;
    auto& mine = c.model.dims.*member;
    const auto& theirs = init.config.*member;
    const auto it = sources.find(field.yaml_key);
    if (it == sources.end() || (field.yaml_auto && mine == 0)) {
      mine = theirs;
    } else if (mine != theirs) {
      const Source& given = it->second;
      errors.push_back(given.origin + field.yaml_key + ": " +
                       (given.origin == "--set " ? "set to " : "the config says ") + model_value_text(mine) + " but " +
                       init.name + " has " + model_value_text(theirs));
    }
  });
  if (!init.tokenizer.empty() && !sources.contains("tokenizer")) c.tokenizer = init.tokenizer;
}

Expected<TrainConfig> parse(const std::string& yaml_text, const std::vector<std::string>& overrides,
                            const std::string& base_dir, const std::string& origin, const InitSource* init) {
  Sources sources;
  std::vector<std::string> errors;
  TrainConfig config;
  try {
    const YAML::Node root = YAML::Load(yaml_text);
    if (!root.IsMap() && !root.IsNull()) {
      return make_error(origin + "expected sections of key: value lines (model:, data:, train:, ...), got " +
                        found_text(root));
    }
    add_keys(root, "", origin, base_dir, sources, errors);
    for (const std::string& text : overrides) add_override(text, sources, errors);
    visit_fields(config, Reader(sources, errors));
    if (init && errors.empty()) apply_init_source(config, *init, sources, errors);
  } catch (const YAML::Exception& error) {
    return make_error(origin + yaml_error_text(error));
  }
  if (errors.empty()) check_relations(config, sources, origin, errors);
  if (errors.empty()) return config;
  std::string message;
  for (const std::string& error : errors) message += (message.empty() ? "" : "\n") + error;
  return make_error(message);
}

// ---- Writing -------------------------------------------------------------------------------

class Writer {
 public:
  explicit Writer(YAML::Emitter& out) : out_(out) {}
  void finish() {
    for (; !open_.empty(); open_.pop_back()) out_ << YAML::EndMap;
  }

  template <typename T>
  void operator()(const char* name, const T& value, const Count& rule) {
    key(name) << (rule.auto_zero && value == 0 ? std::string("auto") : std::to_string(value));
  }
  void operator()(const char* name, double value, const Real&) { key(name) << number_text(value); }
  void operator()(const char* name, bool value) { key(name) << (value ? "true" : "false"); }
  void operator()(const char* name, const std::string& value, const Choice&) { key(name) << value; }
  void operator()(const char* name, const std::string& value, PathBase) { key(name) << value; }
  void operator()(const char* name, const std::vector<std::string>& value, PathBase) {
    key(name) << YAML::BeginSeq;
    for (const std::string& path : value) out_ << path;
    out_ << YAML::EndSeq;
  }
  void operator()(const char* name, const std::string& value, const PlainText&) { key(name) << value; }
  void operator()(const char* name, const std::vector<std::string>& value, const PlainText&) {
    key(name) << YAML::BeginSeq;
    for (const std::string& item : value) out_ << item;
    out_ << YAML::EndSeq;
  }
  void operator()(const char* name, ScheduleKind value) { key(name) << std::string(schedule_name(value)); }
  void operator()(const char* name, Precision value) { key(name) << std::string(precision_name(value)); }
  void operator()(const char* name, TrainDevice value) { key(name) << std::string(device_name(value)); }
  void operator()(const char* name, const Fixed& rule) { key(name) << rule.value; }
  void operator()(const char* name, const std::vector<LoraTarget>& value) {
    key(name) << YAML::Flow << YAML::BeginSeq;
    for (LoraTarget target : value) out_ << std::string(lora_target_name(target));
    out_ << YAML::EndSeq;
  }

 private:
  // Closes the groups `name` is not in and opens the ones it is in but that are not open yet.
  YAML::Emitter& key(const char* name) {
    std::vector<std::string> parts;
    for (size_t begin = 0, dot;; begin = dot + 1) {
      dot = std::string_view(name).find('.', begin);
      parts.emplace_back(std::string_view(name).substr(begin, dot - begin));
      if (dot == std::string_view::npos) break;
    }
    const std::vector<std::string> groups(parts.begin(), parts.end() - 1);
    size_t shared = 0;
    while (shared < open_.size() && shared < groups.size() && open_[shared] == groups[shared]) ++shared;
    for (; open_.size() > shared; open_.pop_back()) out_ << YAML::EndMap;
    for (size_t i = shared; i < groups.size(); ++i) {
      out_ << YAML::Key << groups[i] << YAML::Value << YAML::BeginMap;
      open_.push_back(groups[i]);
    }
    return out_ << YAML::Key << parts.back() << YAML::Value;
  }

  YAML::Emitter& out_;
  std::vector<std::string> open_;
};

}  // namespace

ModelConfig TrainConfig::model_config(uint32_t bos_token_id, uint32_t eos_token_id) const {
  ModelConfig out = model.dims;
  out.head_dim = resolved_head_dim(model.dims);
  out.bos_token_id = bos_token_id;
  out.eos_token_id = eos_token_id;
  return out;
}

AdamWOptions TrainConfig::adamw() const {
  AdamWOptions out;
  out.beta1 = train.beta1;
  out.beta2 = train.beta2;
  out.eps = train.eps;
  out.weight_decay = train.weight_decay;
  out.decay_embeddings = train.decay_embeddings;
  return out;
}

ScheduleOptions TrainConfig::schedule() const {
  ScheduleOptions out;
  out.kind = train.schedule;
  out.max_lr = train.lr;
  out.min_lr = train.min_lr;
  out.warmup_steps = train.warmup_steps;
  out.total_steps = train.max_steps;
  return out;
}

InitOptions TrainConfig::init() const {
  InitOptions out;
  out.seed = train.seed;
  out.std = model.init_std;
  out.scaled_residual = model.scaled_residual_init;
  return out;
}

Expected<TrainConfig> parse_train_config(const std::string& yaml_text, const std::vector<std::string>& overrides,
                                         const std::string& base_dir, const InitSource* init) {
  return parse(yaml_text, overrides, base_dir, "", init);
}

Expected<TrainConfig> load_train_config(const std::string& path, const std::vector<std::string>& overrides,
                                        const InitSource* init) {
  KIPP_ASSIGN_OR_RETURN(const std::string text, read_text_file(path));
  return parse(text, overrides, fs::path(path).parent_path().string(), path + ": ", init);
}

std::string to_yaml(const TrainConfig& config) {
  YAML::Emitter out;
  out << YAML::Comment("The resolved training configuration of this run (every key; paths absolute).");
  out << YAML::BeginMap;
  Writer writer(out);
  visit_fields(config, writer);
  writer.finish();
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace kipp::train
