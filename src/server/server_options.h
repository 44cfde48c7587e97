// Options of `kipp serve`: what the HTTP side enforces (address, key, limits, CORS) and what the
// scheduler is given (batch, context, K/V pool, queue, deadline). Plain data; cli/ fills it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/engine.h"  // BackendKind

namespace kipp::server {

struct SchedulerOptions {
  uint32_t max_batch = 16;  // choices decoded together in one step
  uint32_t ctx = 0;         // positions per choice; 0: the model's context, capped by the pool
  BackendKind backend = BackendKind::Cpu;
  // K/V memory shared by all sessions (pooled blocks); nullopt: server/kv_pool_size.h decides.
  std::optional<uint32_t> kv_pool_mib;
  uint32_t threads = 0;           // backend threads; 0: one per hardware thread
  uint32_t max_queue = 64;        // requests waiting for admission before 503
  uint32_t prefill_chunk = 32;    // prompt tokens one choice evaluates per step while others decode
  uint32_t prefill_budget = 256;  // prompt tokens all choices evaluate per step (x4 when none decodes)
  uint32_t timeout_s = 600;       // per-request deadline, from arrival to the last token
  // Tokens per choice when a request gives no max_tokens (chat), capped by the context and the
  // pool; 0: up to the context. Admission reserves K/V for it, so a smaller default lets more
  // such requests share the pool.
  uint32_t default_max_tokens = 2048;
  bool verify_content_hash = true;
};

// Where chat responses put the model's thinking: `reasoning_content` (DeepSeek, llama.cpp),
// `reasoning` (OpenRouter, newer vLLM), or both.
enum class ReasoningField { ReasoningContent, Reasoning, Both };

struct ServerOptions {
  std::string model_path;
  std::vector<std::string> served_names;  // the first is echoed as `model`
  std::string host = "127.0.0.1";
  uint16_t port = 8080;                   // 0: any free port
  std::string api_key;                    // empty: no key (loopback only)
  std::vector<std::string> cors_origins;  // beyond localhost origins; "*" allows every origin
  uint32_t max_body_kib = 1024;
  uint32_t max_messages = 1024;
  uint32_t read_timeout_s = 30;
  uint32_t write_timeout_s = 30;
  ReasoningField reasoning_field = ReasoningField::ReasoningContent;
  bool web_ui = true;  // the chat page at / (webui/)
  SchedulerOptions scheduler;
};

}  // namespace kipp::server
