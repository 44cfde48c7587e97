/* Kipp C API: the engine behind opaque handles, for callers in C or other languages.
 *
 * Every function that can fail returns a kipp_status (KIPP_OK = 0) and, for a failure,
 * records a message that kipp_last_error() returns (per thread, valid until the next failing
 * call on that thread). Nothing here aborts or prints. Handles are not thread-safe: one thread
 * drives a model and its sessions at a time. Destroy sessions before their model.
 *
 * Example:
 *   kipp_model* model;
 *   kipp_model_options options;
 *   kipp_model_options_init(&options);
 *   if (kipp_model_open("qwen3-0.6b-bf16.gguf", &options, &model) != KIPP_OK)
 *     fprintf(stderr, "%s\n", kipp_last_error());
 *   kipp_session* session;
 *   kipp_session_create(model, 0, 0, &session);
 *   float* logits = malloc(sizeof(float) * kipp_model_vocab_size(model));
 *   kipp_session_eval_text(session, "Hello", logits);
 */
#ifndef KIPP_H
#define KIPP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kipp_status {
  KIPP_OK = 0,
  KIPP_ERROR_INVALID_ARGUMENT = 1, /* a null handle or pointer, a bad id, count or option */
  KIPP_ERROR_FAILED = 2            /* anything else: unreadable model, capacity, pool exhausted */
} kipp_status;

typedef enum kipp_backend { KIPP_BACKEND_CPU = 0, KIPP_BACKEND_CUDA = 1 } kipp_backend;

typedef struct kipp_model kipp_model;
typedef struct kipp_session kipp_session;

typedef struct kipp_model_options {
  kipp_backend backend;     /* chosen explicitly; default KIPP_BACKEND_CPU */
  uint32_t pool_blocks;     /* blocks of the shared K/V pool; 0 (default) disables pooled sessions */
  uint32_t max_step_tokens; /* token rows per forward step (scratch size); default 128 */
  int verify_content_hash;  /* re-hash the weights on open; default 1 */
} kipp_model_options;

/* The message of the last failure on this thread ("" if none). */
const char* kipp_last_error(void);

void kipp_model_options_init(kipp_model_options* options);
kipp_status kipp_model_open(const char* path, const kipp_model_options* options, kipp_model** out);
void kipp_model_destroy(kipp_model* model); /* null is fine */
uint32_t kipp_model_vocab_size(const kipp_model* model);
uint32_t kipp_model_context_length(const kipp_model* model);
uint32_t kipp_model_eos_token(const kipp_model* model);

/* Tokenizer. kipp_tokenize writes at most `capacity` ids and stores the full count in
 * *count (call with capacity 0 to size the buffer); special tokens in the text are parsed.
 * kipp_detokenize works the same way in bytes (no terminating NUL is counted or required). */
kipp_status kipp_tokenize(const kipp_model* model, const char* text, size_t text_bytes, uint32_t* ids, size_t capacity,
                          size_t* count);
kipp_status kipp_detokenize(const kipp_model* model, const uint32_t* ids, size_t n_ids, char* text, size_t capacity,
                            size_t* bytes);

/* Sessions. capacity 0 means the model's context length; pooled != 0 draws K/V blocks from
 * the model's shared pool (needs pool_blocks > 0). */
kipp_status kipp_session_create(kipp_model* model, uint32_t capacity, int pooled, kipp_session** out);
void kipp_session_destroy(kipp_session* session); /* pooled: publishes its full blocks first */
uint32_t kipp_session_length(const kipp_session* session);
uint32_t kipp_session_capacity(const kipp_session* session);

/* Appends tokens and writes the last position's logits (vocab floats; logits may be null when
 * n_tokens is 0). kipp_session_eval_n writes the last logits_count positions, row by row. On
 * failure the session is unchanged. */
kipp_status kipp_session_eval(kipp_session* session, const uint32_t* tokens, size_t n_tokens, float* logits);
kipp_status kipp_session_eval_n(kipp_session* session, const uint32_t* tokens, size_t n_tokens, uint32_t logits_count,
                                float* logits);
kipp_status kipp_session_eval_text(kipp_session* session, const char* text, float* logits);
kipp_status kipp_session_truncate(kipp_session* session, uint32_t length);
void kipp_session_reset(kipp_session* session);
/* Pooled, empty sessions: adopts the longest published whole-block prefix of tokens (leaving
 * at least one token) and stores the positions adopted in *adopted. */
kipp_status kipp_session_match_prefix(kipp_session* session, const uint32_t* tokens, size_t n_tokens,
                                      uint32_t* adopted);

/* One step over several sessions of one model (each weight read once for all of them). */
typedef struct kipp_batch_item {
  kipp_session* session;
  const uint32_t* tokens;
  size_t n_tokens;
  uint32_t logits_count;
  float* logits; /* logits_count * vocab floats */
} kipp_batch_item;
kipp_status kipp_eval_batch(kipp_model* model, const kipp_batch_item* items, size_t n_items);

#ifdef __cplusplus
}
#endif

#endif /* KIPP_H */
