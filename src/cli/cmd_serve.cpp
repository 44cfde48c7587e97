// `kipp serve`: the OpenAI-compatible HTTP server (src/server/). This file parses the options,
// refuses an exposed address without a key, prints the one "listening" line on stdout and turns
// SIGTERM into a drain and SIGINT into a prompt stop; the server and the scheduler live in the
// library.
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/backend_flag.h"
#include "cli/commands.h"
#include "cli/verify_flag.h"
#include "server/http_server.h"
#include "server/kv_pool_size.h"
#include "server/scheduler.h"

namespace kipp::cli {
namespace {

constexpr const char* kServeFooter = R"(
Chat page: GET / serves a chat page for browsers (it asks for the --api-key once and keeps it in
the browser); --no-webui turns it off. docs/WEBUI.md describes it.

Endpoints: POST /v1/completions, POST /v1/chat/completions and POST /v1/responses (models with
a chat template), GET /v1/models[/ID], POST /tokenize, POST /detokenize, GET /health, GET
/metrics (Prometheus). docs/SERVER.md lists every request field, status code and metric.

Security: the server binds 127.0.0.1 unless --host says otherwise; any other address needs
--api-key (clients send "Authorization: Bearer KEY"; every route but /health and the chat page's
files checks it). The
Host header must name the bound address (no DNS rebinding); browsers may call it only from
localhost pages or a --cors-origin.

Stopping: SIGTERM drains: /health answers 503 {"status":"draining"} (a balancer takes the server
out), new requests get 503 and in-flight ones finish, for up to --drain-timeout seconds; then
the rest are cancelled. SIGINT, or a second signal while draining, stops at once.

Memory: --kv-pool-mib is the K/V memory all requests share, in blocks of 32 positions; a
request is admitted when its worst case (n x (prompt + max_tokens)) fits next to the others.
Without it the pool is 512 MiB on the cpu backend; on cuda it is 90% of the GPU memory free
once the model is loaded, less 1 GiB kept for graphs and workspaces, and no more than
--max-batch sequences of the full context need. The size is printed at start-up.

Examples:
  kipp serve -m qwen3-0.6b-bf16.gguf
  kipp serve -m qwen3-0.6b-bf16.gguf --host 0.0.0.0 --port 8000 --api-key "$KEY" --alias qwen3)";

constexpr int kUsageExit = 2;

int g_stop_pipe[2] = {-1, -1};

void on_stop_signal(int signal) {
  const char byte = static_cast<char>(signal);
  const ssize_t written = write(g_stop_pipe[1], &byte, 1);  // async-signal-safe
  (void)written;
}

struct ServeArgs {
  server::ServerOptions options;
  std::vector<std::string> aliases;
  uint32_t port = 8080;
  uint32_t drain_timeout_s = 30;
  bool no_verify = false;
  bool no_webui = false;
};

// The next byte from the signal pipe (a signal number, or 0 when the server ended on its own);
// nullopt when none came within `timeout_ms` (-1: wait as long as it takes).
std::optional<char> next_signal(int timeout_ms) {
  pollfd ready{g_stop_pipe[0], POLLIN, 0};
  for (;;) {
    const int polled = poll(&ready, 1, timeout_ms);
    if (polled < 0 && errno == EINTR) continue;
    if (polled <= 0) return std::nullopt;
    char signal = 0;
    if (read(g_stop_pipe[0], &signal, 1) == 1) return signal;
    if (errno != EINTR && errno != EAGAIN) return char{0};
  }
}

// After SIGTERM: refuses new work and waits for the requests in flight, until they are done,
// the timeout passes or another signal comes. Says on stderr what happens.
void drain(server::HttpServer& http, uint32_t timeout_s) {
  http.drain();
  std::fprintf(stderr,
               "kipp serve: terminated, draining: %zu requests in flight, new ones refused (up to %u s; a second "
               "signal stops at once)\n",
               http.in_flight(), timeout_s);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (http.in_flight() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      std::fprintf(stderr, "kipp serve: drain timeout: cancelling %zu requests in flight\n", http.in_flight());
      return;
    }
    if (const std::optional<char> signal = next_signal(100)) {
      if (*signal != 0)
        std::fprintf(stderr, "kipp serve: second signal: cancelling %zu requests in flight\n", http.in_flight());
      return;
    }
  }
  std::fprintf(stderr, "kipp serve: drained, stopping\n");
}

std::string url_host(const std::string& host) {
  return host.find(':') != std::string::npos && host.front() != '[' ? "[" + host + "]" : host;
}

int run_serve(ServeArgs args) {
  server::ServerOptions& options = args.options;
  if (!server::is_loopback_host(options.host) && options.api_key.empty()) {
    std::fprintf(stderr,
                 "kipp: error: --host %s is reachable from other machines: set --api-key KEY (or bind 127.0.0.1)\n",
                 options.host.c_str());
    return kUsageExit;
  }
  if (args.port > 65535) return fail("--port must be 0..65535, found " + std::to_string(args.port));
  options.port = static_cast<uint16_t>(args.port);
  options.scheduler.verify_content_hash = !args.no_verify;
  options.web_ui = !args.no_webui;
  // The echoed name comes first: the first alias, else the file name without .gguf.
  options.served_names = args.aliases;
  options.served_names.push_back(std::filesystem::path(options.model_path).stem().string());

  // SIGINT/SIGTERM may land on any thread (libraries start their own): the handler only writes
  // to a pipe, and a thread of ours reads it, drains and stops the server. A broken client
  // connection must not kill the process (SIGPIPE).
  if (pipe(g_stop_pipe) != 0) return fail("cannot create the signal pipe");
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  // A port in use is a usage error: say so before loading the model (and again if another
  // process takes the port meanwhile).
  if (options.port != 0) {
    if (const std::string problem = server::bind_problem(options.host, options.port); !problem.empty()) {
      std::fprintf(stderr, "kipp: error: %s\n", problem.c_str());
      return kUsageExit;
    }
  }

  server::Metrics metrics;
  auto scheduler = server::Scheduler::create(options.model_path, options.scheduler, &metrics);
  if (!scheduler.ok()) return fail(scheduler.message());
  server::HttpServer http(options, **scheduler, metrics);
  auto port = http.bind();
  if (!port.ok()) {
    std::fprintf(stderr, "kipp: error: %s\n", port.message().c_str());
    return kUsageExit;
  }
  const uint64_t pool_bytes =
      uint64_t{(*scheduler)->pool_blocks()} * kKvBlockPositions * (*scheduler)->model().config().kv_bytes_per_token();
  const bool sized_from_device = !options.scheduler.kv_pool_mib && options.scheduler.backend != BackendKind::Cpu;
  std::fprintf(stderr,
               "kipp serve: %s as '%s' on %s: context %u, K/V pool %u blocks (%llu MiB%s), batch %u, queue %u\n",
               options.model_path.c_str(), options.served_names.front().c_str(),
               std::string(backend_name(options.scheduler.backend)).c_str(), (*scheduler)->context(),
               (*scheduler)->pool_blocks(), static_cast<unsigned long long>(pool_bytes >> 20),
               sized_from_device ? ", sized from free device memory" : "", options.scheduler.max_batch,
               options.scheduler.max_queue);

  std::thread stopper([&] {
    const char signal = next_signal(-1).value_or(0);
    if (signal == 0) return;  // the server ended on its own
    if (signal == SIGTERM && args.drain_timeout_s > 0) {
      drain(http, args.drain_timeout_s);
    } else {
      std::fprintf(stderr, "kipp serve: %s, stopping\n", signal == SIGINT ? "interrupted" : "terminated");
    }
    (*scheduler)->stop();  // ends every request, so no handler keeps the server waiting
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // lets streams send their error and [DONE]
    http.stop();
  });
  std::printf("kipp serve: listening on http://%s:%d\n", url_host(options.host).c_str(), *port);
  std::fflush(stdout);
  const bool served = http.listen();
  const char ended = 0;
  if (write(g_stop_pipe[1], &ended, 1) != 1) std::fprintf(stderr, "kipp serve: cannot wake the signal thread\n");
  stopper.join();
  return served ? 0 : fail("the HTTP server stopped unexpectedly");
}

}  // namespace

void register_serve(CLI::App& app, Action& action) {
  auto* command = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
  command->footer(kServeFooter);
  auto args = std::make_shared<ServeArgs>();
  server::ServerOptions& o = args->options;
  server::SchedulerOptions& s = o.scheduler;
  command->add_option("-m,--model", o.model_path, "Kipp GGUF to serve")->required();
  command->add_option("--host", o.host, "Address to bind (other than loopback needs --api-key)")->capture_default_str();
  command->add_option("--port", args->port, "Port; 0 picks a free one")->capture_default_str();
  command->add_option("--api-key", o.api_key, "Require 'Authorization: Bearer KEY' on every route but /health");
  command->add_option("--alias", args->aliases, "Served model name (repeatable; the first is echoed as `model`)");
  command->add_option("--max-batch", s.max_batch, "Most choices decoded together in one step")->capture_default_str();
  command->add_option("--ctx", s.ctx, "Positions per sequence; 0: the model's context, capped by the pool")
      ->capture_default_str();
  command->add_option("--kv-pool-mib", s.kv_pool_mib,
                      "K/V cache memory shared by all requests [" + std::to_string(server::kHostKvPoolMib) +
                          " on cpu; on cuda: from free GPU memory]");
  add_backend_option(*command, s.backend);
  command->add_option("--threads", s.threads, "Compute threads; 0: one per hardware thread")->capture_default_str();
  command->add_option("--max-queue", s.max_queue, "Requests waiting for admission before 503")->capture_default_str();
  command->add_option("--max-body-kib", o.max_body_kib, "Largest request body (413 beyond)")->capture_default_str();
  command
      ->add_option("--default-max-tokens", s.default_max_tokens,
                   "Tokens per choice when a chat request sets no max_tokens (0: up to the context)")
      ->capture_default_str();
  command->add_option("--timeout-s", s.timeout_s, "Per-request generation deadline in seconds")->capture_default_str();
  command
      ->add_option("--drain-timeout", args->drain_timeout_s,
                   "Seconds SIGTERM waits for in-flight requests before cancelling them; 0: stop at once")
      ->capture_default_str();
  command
      ->add_option("--reasoning-field", o.reasoning_field,
                   "Chat field for the model's thinking: reasoning_content, reasoning or both")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, server::ReasoningField>{{"reasoning_content", server::ReasoningField::ReasoningContent},
                                                        {"reasoning", server::ReasoningField::Reasoning},
                                                        {"both", server::ReasoningField::Both}},
          CLI::ignore_case))
      ->option_text("FIELD [reasoning_content]");
  command->add_option("--cors-origin", o.cors_origins,
                      "Browser origin allowed besides localhost (repeatable; * = any)");
  command->add_flag("--no-webui", args->no_webui, "Do not serve the chat page at /");
  add_no_verify_flag(*command, args->no_verify);
  command->callback([&action, args] { action = [args] { return run_serve(*args); }; });
}

}  // namespace kipp::cli
