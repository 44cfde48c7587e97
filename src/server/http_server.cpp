#include "server/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "core/files.h"
#include "server/connection_probe.h"
#include "server/openai_request.h"
#include "server/openai_response.h"

namespace kipp::server {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr auto kPollInterval = 50ms;  // how often a waiting handler looks at its client
constexpr auto kPingInterval = 1s;    // SSE comment pings while nothing else is sent
constexpr const char* kFingerprint = "kipp-0.1.0";

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& error) { send_json(res, error.status, error_json(error)); }

ApiError api_error(int status, std::string message, std::string type, std::string code = "", std::string param = "") {
  ApiError error;
  error.status = status;
  error.message = std::move(message);
  error.type = std::move(type);
  error.code = std::move(code);
  error.param = std::move(param);
  return error;
}

// "host", "host:port", "[v6]" or "[v6]:port" to the host alone.
std::string host_of(const std::string& host_header) {
  if (!host_header.empty() && host_header.front() == '[') {
    const size_t close = host_header.find(']');
    return close == std::string::npos ? host_header : host_header.substr(0, close + 1);
  }
  return host_header.substr(0, host_header.find(':'));
}

bool is_wildcard(const std::string& host) { return host == "0.0.0.0" || host == "::" || host == "[::]"; }

// Origins of pages served from this machine: scheme://localhost|127.0.0.1|[::1][:port].
bool is_localhost_origin(const std::string& origin) {
  for (const char* scheme : {"http://", "https://"}) {
    const std::string prefix = scheme;
    if (origin.rfind(prefix, 0) != 0) continue;
    const std::string host = host_of(origin.substr(prefix.size()));
    return host == "localhost" || host == "127.0.0.1" || host == "[::1]";
  }
  return false;
}

std::string endpoint_label(const std::string& path) {
  for (const char* known : {"/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/metrics"})
    if (path == known) return known;
  return "other";
}

ApiError rejection_error(const Rejection& rejection, Endpoint endpoint) {
  std::string param = rejection.param;
  if (param == "prompt" && endpoint == Endpoint::ChatCompletions) param = "messages";
  switch (rejection.reason) {
    case Rejection::Reason::TooLong:
      return api_error(400, rejection.message, "invalid_request_error", "context_length_exceeded", param);
    case Rejection::Reason::QueueFull:
      return api_error(503, rejection.message, "server_error", "queue_full");
    case Rejection::Reason::ShuttingDown:
      return api_error(503, rejection.message, "server_error", "shutting_down");
    case Rejection::Reason::Invalid: break;
  }
  return api_error(400, rejection.message, "invalid_request_error", "", param);
}

ApiError event_error(const Event& event) {
  if (event.error_kind == ErrorKind::Timeout) return api_error(504, event.error, "timeout", "generation_timeout");
  return api_error(500, event.error, "server_error");
}

// One streaming response: pulls events, writes chunks, notices a client that left.
struct Stream {
  std::shared_ptr<RequestChannel> channel;
  ChunkWriter writer;
  ConnectionProbe probe;
  bool include_usage = false;
  Metrics* metrics = nullptr;
  Clock::time_point start;
  Clock::time_point last_write = Clock::now();
  Clock::time_point probed = Clock::now();
  bool over = false;

  bool write(httplib::DataSink& sink, const std::string& text) {
    last_write = Clock::now();
    return sink.write(text.data(), text.size());
  }

  // One call of httplib's chunked provider: waits a little for an event; false ends the response.
  bool pump(httplib::DataSink& sink) {
    std::optional<Event> event = channel->pop(kPollInterval);
    if (Clock::now() - probed >= kPollInterval) {  // events may flow steadily: look by the clock
      probed = Clock::now();
      if (probe.peer_closed()) return false;
    }
    if (!event) {
      if (Clock::now() - last_write >= kPingInterval && !write(sink, ": ping\n\n")) return false;
      return true;
    }
    bool written = true;
    switch (event->kind) {
      case Event::Kind::Delta: written = write(sink, writer.delta(*event)); break;
      case Event::Kind::Finish: written = write(sink, writer.finish(*event)); break;
      case Event::Kind::Done:
        if (include_usage) written = write(sink, writer.usage(event->usage));
        written = written && write(sink, ChunkWriter::done());
        over = true;
        break;
      case Event::Kind::Error:
        written = write(sink, ChunkWriter::error(event_error(*event))) && write(sink, ChunkWriter::done());
        over = true;
        break;
    }
    if (over) sink.done();
    return written;
  }
};

}  // namespace

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

bool constant_time_equal(const std::string& a, const std::string& b) {
  // Compare digests: equal length, and no early exit on the first differing byte.
  const std::string x = sha256_hex({reinterpret_cast<const uint8_t*>(a.data()), a.size()});
  const std::string y = sha256_hex({reinterpret_cast<const uint8_t*>(b.data()), b.size()});
  unsigned diff = 0;
  for (size_t i = 0; i < x.size(); ++i) diff |= static_cast<unsigned>(x[i] ^ y[i]);
  return diff == 0;
}

struct HttpServer::Impl {
  ServerOptions options;
  Scheduler& scheduler;
  Metrics& metrics;
  httplib::Server server;
  PromptContext prompt_context;
  RequestLimits limits;
  int64_t started = 0;

  Impl(const ServerOptions& o, Scheduler& s, Metrics& m) : options(o), scheduler(s), metrics(m) {
    prompt_context.tokenizer = &scheduler.tokenizer();
    prompt_context.vocab_size = scheduler.model().config().vocab_size;
    auto format = chat_format_of(scheduler.model());
    if (format.ok()) {
      prompt_context.chat_format = *format;
    } else {
      prompt_context.chat_format_error = format.message();
    }
    limits.max_messages = options.max_messages;
    limits.max_n = std::min<uint32_t>(8, scheduler.max_batch());
    started = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    configure();
  }

  const std::string& served_name() const { return options.served_names.front(); }

  bool host_allowed(const httplib::Request& req) const {
    if (is_wildcard(options.host) || !req.has_header("Host")) return true;
    const std::string host = host_of(req.get_header_value("Host"));
    if (host == options.host || "[" + options.host + "]" == host) return true;
    return is_loopback_host(options.host) && is_loopback_host(host);
  }

  bool origin_allowed(const std::string& origin) const {
    if (is_localhost_origin(origin)) return true;
    return std::any_of(options.cors_origins.begin(), options.cors_origins.end(),
                       [&](const std::string& allowed) { return allowed == "*" || allowed == origin; });
  }

  bool key_valid(const httplib::Request& req) const {
    if (options.api_key.empty()) return true;
    const std::string header = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (header.rfind(prefix, 0) != 0) return false;
    return constant_time_equal(header.substr(prefix.size()), options.api_key);
  }

  httplib::Server::HandlerResponse screen(const httplib::Request& req, httplib::Response& res) {
    if (!host_allowed(req)) {
      send_error(res, api_error(403, "the Host header '" + req.get_header_value("Host") +
                                         "' does not name this server's address",
                                "invalid_request_error", "host_not_allowed"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.has_header("Origin")) {
      const std::string origin = req.get_header_value("Origin");
      if (!origin_allowed(origin)) {
        send_error(res, api_error(403, "the origin '" + origin + "' is not allowed (see --cors-origin)",
                                  "invalid_request_error", "origin_not_allowed"));
        return httplib::Server::HandlerResponse::Handled;
      }
      res.set_header("Access-Control-Allow-Origin", origin);
      res.set_header("Vary", "Origin");
    }
    if (req.method == "OPTIONS") {  // CORS preflight: no key (browsers send none)
      res.status = 204;
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
      res.set_header("Access-Control-Max-Age", "600");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.path != "/health" && !key_valid(req)) {
      res.set_header("WWW-Authenticate", "Bearer");
      send_error(res, api_error(401, "invalid or missing API key (Authorization: Bearer KEY)", "authentication_error",
                                "invalid_api_key"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  }

  void configure() {
    const size_t threads = size_t{scheduler.max_batch()} + options.scheduler.max_queue + 8;
    server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    server.set_payload_max_length(size_t{options.max_body_kib} * 1024);
    server.set_read_timeout(options.read_timeout_s, 0);
    server.set_write_timeout(options.write_timeout_s, 0);
    server.set_keep_alive_timeout(5);
    server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) { return screen(req, res); });
    server.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty() || res.is_chunked_content_provider_) return httplib::Server::HandlerResponse::Unhandled;
      if (res.status == 404) {
        send_error(res, api_error(404, "no route " + req.method + " " + req.path, "invalid_request_error", "not_found"));
      } else if (res.status == 413) {
        send_error(res, api_error(413, "the request body is larger than " + std::to_string(options.max_body_kib) +
                                           " KiB (--max-body-kib)",
                                  "invalid_request_error", "body_too_large"));
      } else {
        send_error(res, api_error(res.status, "the request could not be handled (HTTP " + std::to_string(res.status) + ")",
                                  res.status >= 500 ? "server_error" : "invalid_request_error"));
      }
      return httplib::Server::HandlerResponse::Handled;
    }));
    server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
      std::string what = "unknown exception";
      try {
        if (error) std::rethrow_exception(error);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      send_error(res, api_error(500, "internal error: " + what, "server_error"));
    });
    server.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      metrics.count_request(endpoint_label(req.path), res.status);
    });

    server.Get("/health", [](const httplib::Request&, httplib::Response& res) { send_json(res, 200, {{"status", "ok"}}); });
    server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics.render(), "text/plain; version=0.0.4; charset=utf-8");
    });
    server.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      json data = json::array();
      for (const std::string& name : options.served_names)
        data.push_back({{"id", name}, {"object", "model"}, {"created", started}, {"owned_by", "kipp"},
                        {"meta", {{"n_ctx", scheduler.context()}, {"n_vocab", prompt_context.vocab_size}}}});
      send_json(res, 200, {{"object", "list"}, {"data", std::move(data)}});
    });
    server.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      generate(Endpoint::Completions, req, res);
    });
    server.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      generate(Endpoint::ChatCompletions, req, res);
    });
  }

  void generate(Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
    const auto start = Clock::now();
    auto parsed = parse_openai_request(endpoint, req.body, limits);
    if (auto* error = std::get_if<ApiError>(&parsed)) return send_error(res, *error);
    const OpenAiRequest& request = std::get<OpenAiRequest>(parsed);
    if (request.model && std::find(options.served_names.begin(), options.served_names.end(), *request.model) ==
                             options.served_names.end())
      return send_error(res, api_error(404, "the model '" + *request.model + "' does not exist; this server serves '" +
                                                served_name() + "'",
                                       "invalid_request_error", "model_not_found", "model"));
    auto converted = to_generation_request(request, prompt_context);
    if (auto* error = std::get_if<ApiError>(&converted)) return send_error(res, *error);
    GenerationRequest generation = std::move(std::get<GenerationRequest>(converted));
    if (!request.seed_given) generation.sampling.seed = std::random_device{}();
    generation.arrival = start;
    const uint32_t n = generation.n;
    Submission submission = scheduler.submit(std::move(generation));
    if (submission.rejection) {
      if (submission.rejection->reason == Rejection::Reason::QueueFull) res.set_header("Retry-After", "1");
      return send_error(res, rejection_error(*submission.rejection, endpoint));
    }
    ResponseIdentity identity = make_identity(endpoint, served_name(), kFingerprint);
    ConnectionProbe probe = ConnectionProbe::find(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
    if (request.stream) {
      auto stream = std::make_shared<Stream>(Stream{submission.channel, ChunkWriter(identity, n, request.logprobs), probe,
                                                    request.include_usage, &metrics, start});
      res.set_header("Cache-Control", "no-cache");
      res.set_header("X-Accel-Buffering", "no");
      res.set_chunked_content_provider(
          "text/event-stream", [stream](size_t, httplib::DataSink& sink) { return stream->pump(sink); },
          [stream](bool) {
            if (!stream->over) stream->channel->cancel();  // the client left, or the server is stopping
            stream->metrics->observe_request_duration(seconds_since(stream->start));
          });
      return;
    }
    ResponseBuilder builder(identity, n, request.logprobs);
    auto probed = Clock::now();
    for (;;) {
      std::optional<Event> event = submission.channel->pop(kPollInterval);
      if (Clock::now() - probed >= kPollInterval) {  // events may flow steadily: look by the clock
        probed = Clock::now();
        if (probe.peer_closed()) {
          submission.channel->cancel();
          res.status = 499;  // nobody reads it: the client closed the connection
          return;
        }
      }
      if (!event) continue;
      if (event->kind == Event::Kind::Error) {
        metrics.observe_request_duration(seconds_since(start));
        return send_error(res, event_error(*event));
      }
      if (event->kind == Event::Kind::Done) {
        metrics.observe_request_duration(seconds_since(start));
        return send_json(res, 200, builder.finish(event->usage));
      }
      builder.add(*event);
    }
  }
};

HttpServer::HttpServer(const ServerOptions& options, Scheduler& scheduler, Metrics& metrics)
    : impl_(std::make_unique<Impl>(options, scheduler, metrics)) {}

HttpServer::~HttpServer() = default;

Expected<int> HttpServer::bind() {
  const ServerOptions& o = impl_->options;
  std::string host = o.host;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port = o.port;
  if (port == 0) {
    port = impl_->server.bind_to_any_port(host);
    if (port < 0) port = 0;
  } else if (!impl_->server.bind_to_port(host, port)) {
    port = 0;
  }
  if (port == 0)
    return make_error("cannot listen on " + o.host + ":" + std::to_string(o.port) +
                      " (address in use, or not an address of this machine)");
  return port;
}

bool HttpServer::listen() { return impl_->server.listen_after_bind(); }

void HttpServer::stop() { impl_->server.stop(); }

}  // namespace kipp::server
