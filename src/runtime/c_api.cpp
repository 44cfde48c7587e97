// include/kipp.h over the C++ engine. No exception leaves an entry point (a C caller cannot
// catch one): each body runs inside `guarded`, which turns an escaping exception into
// KIPP_ERROR_FAILED with its message. Checks that make a failure KIPP_ERROR_INVALID_ARGUMENT
// (null pointers, bad ids, counts and options) happen here, before the engine is called; what
// the engine reports after that is KIPP_ERROR_FAILED.
#include "kipp.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "runtime/engine.h"

struct kipp_model {
  std::unique_ptr<kipp::Engine> engine;
};

struct kipp_session {
  kipp_model* model;  // for the vocabulary and to refuse another model's sessions in a batch
  std::unique_ptr<kipp::Session> session;
};

namespace {

thread_local std::string last_error;
// Used when even storing the message fails (out of memory while reporting).
thread_local const char* last_error_fallback = nullptr;

kipp_status report(kipp_status status, const char* message) noexcept {
  try {
    last_error = message;
    last_error_fallback = nullptr;
  } catch (...) {
    last_error_fallback = "out of memory (while reporting an error)";
  }
  return status;
}

kipp_status report(kipp_status status, const std::string& message) noexcept { return report(status, message.c_str()); }

kipp_status invalid(const std::string& message) noexcept { return report(KIPP_ERROR_INVALID_ARGUMENT, message); }

kipp_status null_argument(const char* function, const char* argument) noexcept {
  try {
    return invalid(std::string(function) + ": " + argument + " is null");
  } catch (...) {
    return report(KIPP_ERROR_INVALID_ARGUMENT, "a required argument is null");
  }
}

// The engine's verdict: its failures are KIPP_ERROR_FAILED.
kipp_status from_status(const kipp::Status& status) noexcept {
  return status.ok() ? KIPP_OK : report(KIPP_ERROR_FAILED, status.message());
}

template <typename Body>
kipp_status guarded(Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return report(KIPP_ERROR_FAILED, "out of memory");
  } catch (const std::exception& error) {
    return report(KIPP_ERROR_FAILED, error.what());
  } catch (...) {
    return report(KIPP_ERROR_FAILED, "unknown internal error");
  }
}

// Token ids the model can evaluate; the message names the first bad one and its index.
kipp_status check_ids(const char* function, const kipp_model& model, const uint32_t* ids, size_t count) {
  const kipp::Status valid = model.engine->check_tokens(std::span<const uint32_t>(ids, count));
  return valid.ok() ? KIPP_OK : invalid(std::string(function) + ": " + valid.message());
}

// The argument checks one session's eval shares with a batch item; `where` names it.
kipp_status check_eval(const std::string& where, const kipp_model& model, const uint32_t* tokens, size_t n_tokens,
                       uint32_t logits_count, const float* logits) {
  if (tokens == nullptr && n_tokens > 0) return invalid(where + ": tokens is null");
  if (logits_count > n_tokens)
    return invalid(where + ": logits for " + std::to_string(logits_count) + " positions asked, only " +
                   std::to_string(n_tokens) + " token(s) given");
  if (logits == nullptr && logits_count > 0) return invalid(where + ": logits is null");
  return check_ids(where.c_str(), model, tokens, n_tokens);
}

kipp_status eval_session(const char* function, kipp_session* session, const uint32_t* tokens, size_t n_tokens,
                         uint32_t logits_count, float* logits) {
  if (session == nullptr) return null_argument(function, "session");
  if (kipp_status status = check_eval(function, *session->model, tokens, n_tokens, logits_count, logits);
      status != KIPP_OK)
    return status;
  return from_status(session->session->eval(std::span<const uint32_t>(tokens, n_tokens), logits_count, logits));
}

// The size-query convention: copies up to `capacity` elements of `all` to `out` and stores the
// full count, so a caller can ask with capacity 0 first.
template <typename Container, typename T>
void copy_prefix(const Container& all, T* out, size_t capacity, size_t* count) {
  std::copy_n(all.begin(), std::min(capacity, all.size()), out);
  *count = all.size();
}

}  // namespace

extern "C" {

const char* kipp_last_error(void) { return last_error_fallback != nullptr ? last_error_fallback : last_error.c_str(); }

void kipp_model_options_init(kipp_model_options* options) {
  if (options == nullptr) return;
  const kipp::EngineOptions defaults;
  options->backend = KIPP_BACKEND_CPU;
  options->pool_blocks = defaults.pool_blocks;
  options->max_step_tokens = defaults.max_step_tokens;
  options->verify_content_hash = defaults.verify_content_hash ? 1 : 0;
}

kipp_status kipp_model_open(const char* path, const kipp_model_options* options, kipp_model** out) {
  return guarded([&] {
    if (path == nullptr) return null_argument("kipp_model_open", "path");
    if (options == nullptr) return null_argument("kipp_model_open", "options");
    if (out == nullptr) return null_argument("kipp_model_open", "out");
    *out = nullptr;
    // A C caller may have stored any int there; C++ may not read that as the enum type.
    int backend = 0;
    static_assert(sizeof backend == sizeof options->backend);
    std::memcpy(&backend, &options->backend, sizeof backend);
    kipp::EngineOptions engine_options;
    switch (backend) {
      case KIPP_BACKEND_CPU: engine_options.backend = kipp::BackendKind::Cpu; break;
      case KIPP_BACKEND_CUDA: engine_options.backend = kipp::BackendKind::Cuda; break;
      default:
        return invalid("kipp_model_open: unknown backend " + std::to_string(backend) +
                       " (expected KIPP_BACKEND_CPU or KIPP_BACKEND_CUDA)");
    }
    engine_options.pool_blocks = options->pool_blocks;
    engine_options.max_step_tokens = options->max_step_tokens;
    engine_options.verify_content_hash = options->verify_content_hash != 0;
    auto engine = kipp::Engine::open(path, engine_options);
    if (!engine.ok()) return report(KIPP_ERROR_FAILED, engine.message());
    *out = new kipp_model{std::move(*engine)};
    return KIPP_OK;
  });
}

void kipp_model_destroy(kipp_model* model) { delete model; }

uint32_t kipp_model_vocab_size(const kipp_model* model) { return model ? model->engine->vocab_size() : 0; }

uint32_t kipp_model_context_length(const kipp_model* model) {
  return model ? model->engine->config().context_length : 0;
}

uint32_t kipp_model_eos_token(const kipp_model* model) { return model ? model->engine->config().eos_token_id : 0; }

kipp_status kipp_tokenize(const kipp_model* model, const char* text, size_t text_bytes, uint32_t* ids, size_t capacity,
                          size_t* count) {
  return guarded([&] {
    if (model == nullptr) return null_argument("kipp_tokenize", "model");
    if (text == nullptr && text_bytes > 0) return null_argument("kipp_tokenize", "text");
    if (ids == nullptr && capacity > 0) return null_argument("kipp_tokenize", "ids");
    if (count == nullptr) return null_argument("kipp_tokenize", "count");
    // The tokenizer fails only on its input (invalid UTF-8): a bad argument.
    auto tokens = model->engine->tokenize(std::string_view(text == nullptr ? "" : text, text_bytes));
    if (!tokens.ok()) return invalid("kipp_tokenize: " + tokens.message());
    copy_prefix(*tokens, ids, capacity, count);
    return KIPP_OK;
  });
}

kipp_status kipp_detokenize(const kipp_model* model, const uint32_t* ids, size_t n_ids, char* text, size_t capacity,
                            size_t* bytes) {
  return guarded([&] {
    if (model == nullptr) return null_argument("kipp_detokenize", "model");
    if (ids == nullptr && n_ids > 0) return null_argument("kipp_detokenize", "ids");
    if (text == nullptr && capacity > 0) return null_argument("kipp_detokenize", "text");
    if (bytes == nullptr) return null_argument("kipp_detokenize", "bytes");
    // Decoding fails only on an unknown id: a bad argument.
    auto decoded = model->engine->tokenizer().decode(std::span<const uint32_t>(ids, n_ids));
    if (!decoded.ok()) return invalid("kipp_detokenize: " + decoded.message());
    copy_prefix(*decoded, text, capacity, bytes);
    return KIPP_OK;
  });
}

kipp_status kipp_session_create(kipp_model* model, uint32_t capacity, int pooled, kipp_session** out) {
  return guarded([&] {
    if (model == nullptr) return null_argument("kipp_session_create", "model");
    if (out == nullptr) return null_argument("kipp_session_create", "out");
    *out = nullptr;
    const uint32_t context = model->engine->config().context_length;
    if (capacity > context)
      return invalid("kipp_session_create: capacity " + std::to_string(capacity) +
                     " exceeds the model's context length " + std::to_string(context));
    if (pooled != 0 && !model->engine->pooled_mode())
      return invalid("kipp_session_create: pooled sessions need a model opened with pool_blocks > 0");
    kipp::SessionOptions options;
    options.capacity = capacity;
    options.pooled = pooled != 0;
    auto session = model->engine->create_session(options);
    if (!session.ok()) return report(KIPP_ERROR_FAILED, session.message());
    *out = new kipp_session{model, std::move(*session)};
    return KIPP_OK;
  });
}

void kipp_session_destroy(kipp_session* session) { delete session; }

uint32_t kipp_session_length(const kipp_session* session) { return session ? session->session->length() : 0; }

uint32_t kipp_session_capacity(const kipp_session* session) { return session ? session->session->capacity() : 0; }

kipp_status kipp_session_eval(kipp_session* session, const uint32_t* tokens, size_t n_tokens, float* logits) {
  return guarded(
      [&] { return eval_session("kipp_session_eval", session, tokens, n_tokens, n_tokens > 0 ? 1 : 0, logits); });
}

kipp_status kipp_session_eval_n(kipp_session* session, const uint32_t* tokens, size_t n_tokens, uint32_t logits_count,
                                float* logits) {
  return guarded([&] { return eval_session("kipp_session_eval_n", session, tokens, n_tokens, logits_count, logits); });
}

kipp_status kipp_session_eval_text(kipp_session* session, const char* text, float* logits) {
  return guarded([&] {
    if (session == nullptr) return null_argument("kipp_session_eval_text", "session");
    if (text == nullptr) return null_argument("kipp_session_eval_text", "text");
    auto tokens = session->model->engine->tokenize(text);
    if (!tokens.ok()) return invalid("kipp_session_eval_text: " + tokens.message());
    return eval_session("kipp_session_eval_text", session, tokens->data(), tokens->size(), tokens->empty() ? 0 : 1,
                        logits);
  });
}

kipp_status kipp_session_truncate(kipp_session* session, uint32_t length) {
  return guarded([&] {
    if (session == nullptr) return null_argument("kipp_session_truncate", "session");
    if (length > session->session->length())
      return invalid("kipp_session_truncate: length " + std::to_string(length) + " exceeds the session's " +
                     std::to_string(session->session->length()) + " positions");
    return from_status(session->session->truncate(length));
  });
}

void kipp_session_reset(kipp_session* session) {
  // Publishing blocks allocates; a failure is recorded for kipp_last_error since there is no status.
  (void)guarded([&] {
    if (session != nullptr) session->session->reset();
    return KIPP_OK;
  });
}

kipp_status kipp_session_match_prefix(kipp_session* session, const uint32_t* tokens, size_t n_tokens,
                                      uint32_t* adopted) {
  return guarded([&] {
    if (session == nullptr) return null_argument("kipp_session_match_prefix", "session");
    if (tokens == nullptr && n_tokens > 0) return null_argument("kipp_session_match_prefix", "tokens");
    if (adopted == nullptr) return null_argument("kipp_session_match_prefix", "adopted");
    if (kipp_status status = check_ids("kipp_session_match_prefix", *session->model, tokens, n_tokens);
        status != KIPP_OK)
      return status;
    auto matched = session->session->match_prefix(std::span<const uint32_t>(tokens, n_tokens));
    if (!matched.ok()) return report(KIPP_ERROR_FAILED, matched.message());
    *adopted = *matched;
    return KIPP_OK;
  });
}

kipp_status kipp_eval_batch(kipp_model* model, const kipp_batch_item* items, size_t n_items) {
  return guarded([&] {
    if (model == nullptr) return null_argument("kipp_eval_batch", "model");
    if (items == nullptr && n_items > 0) return null_argument("kipp_eval_batch", "items");
    std::vector<kipp::BatchItem> batch;
    batch.reserve(n_items);
    for (size_t i = 0; i < n_items; ++i) {
      const kipp_batch_item& item = items[i];
      const std::string where = "kipp_eval_batch: item " + std::to_string(i);
      if (item.session == nullptr) return invalid(where + ": session is null");
      if (item.session->model != model) return invalid(where + ": the session belongs to another model");
      for (size_t j = 0; j < i; ++j)
        if (items[j].session == item.session) return invalid(where + ": the session appears twice in one batch");
      if (kipp_status status = check_eval(where, *model, item.tokens, item.n_tokens, item.logits_count, item.logits);
          status != KIPP_OK)
        return status;
      batch.push_back(kipp::BatchItem{item.session->session.get(),
                                      std::span<const uint32_t>(item.tokens, item.n_tokens), item.logits_count,
                                      item.logits});
    }
    return from_status(model->engine->eval_batch(batch));
  });
}

}  // extern "C"
