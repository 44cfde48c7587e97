#include "server/http_server.h"

#include <httplib.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "core/files.h"
#include "server/connection_probe.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/responses_api.h"
#include "server/web_ui.h"
#include "tokenizer/utf8.h"

namespace kipp::server {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr auto kPollInterval = 50ms;  // how often a waiting handler looks at its client
constexpr auto kPingInterval = 1s;    // SSE comment pings while nothing else is sent
constexpr const char* kFingerprint = "kipp-0.1.0";
constexpr size_t kMaxHeaders = 100;  // header lines a request may have (browsers send about 20)
// Headers cpp-httplib adds to every request (not the client's).
constexpr const char* kLibraryHeaders[] = {"REMOTE_ADDR", "REMOTE_PORT", "LOCAL_ADDR", "LOCAL_PORT"};

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

std::string lowercase(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

bool is_digits(const std::string& text, size_t max_length) {
  return !text.empty() && text.size() <= max_length &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Four dot-separated decimal octets (1 to 3 digits, at most 255), the first 127.
bool is_loopback_ipv4(const std::string& host) {
  size_t start = 0;
  for (int octet = 0; octet < 4; ++octet) {
    const size_t dot = host.find('.', start);
    if ((octet < 3) == (dot == std::string::npos)) return false;
    const std::string part = host.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!is_digits(part, 3) || std::stoi(part) > 255 || (octet == 0 && part != "127")) return false;
    start = dot + 1;
  }
  return true;
}

// "host[:port]" or "[v6][:port]" (port: 1 to 5 digits) to the host; false for any other form.
bool split_host_header(const std::string& header, std::string& host) {
  std::string rest;
  if (!header.empty() && header.front() == '[') {
    const size_t close = header.find(']');
    if (close == std::string::npos) return false;
    host = header.substr(0, close + 1);
    rest = header.substr(close + 1);
  } else {
    const size_t colon = header.find(':');
    host = header.substr(0, colon);
    rest = colon == std::string::npos ? "" : header.substr(colon);
  }
  if (host.empty() || host == "[]") return false;
  return rest.empty() || (rest.front() == ':' && is_digits(rest.substr(1), 5));
}

// A header name as RFC 9110 allows it (a token). cpp-httplib keeps whatever precedes the first
// colon, so "X-Bad : 1" arrives as the name "X-Bad ".
bool is_token(const std::string& name) {
  static constexpr const char* kPunctuation = "!#$%&'*+-.^_`|~";
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || (c != '\0' && std::strchr(kPunctuation, c) != nullptr);
  });
}

// Whether the request announces a body (which a response sent before reading it leaves unread).
bool announces_body(const httplib::Request& req) {
  return req.has_header("Transfer-Encoding") ||
         (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0");
}

// The Content-Length headers: 0 when absent or fine, 400 when not a number or several that
// differ, 413 when over `max_bytes`; decided from the headers alone, before any body is read.
int content_length_status(const httplib::Request& req, uint64_t max_bytes) {
  const auto [first, last] = req.headers.equal_range("Content-Length");
  if (first == last) return 0;
  for (auto it = first; it != last; ++it)
    if (!is_digits(it->second, 1000) || it->second != first->second) return 400;
  std::string digits = first->second;
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size() - 1));
  if (digits.size() > 19) return 413;  // more than any body could be
  return std::stoull(digits) > max_bytes ? 413 : 0;
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
  for (const char* known : {"/v1/completions", "/v1/chat/completions", "/v1/responses", "/v1/models", "/tokenize",
                            "/detokenize", "/health", "/metrics"})
    if (path == known) return known;
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  if (is_web_ui_path(path)) return "webui";
  return "other";
}

// Access-Control-Request-Headers echoed when every name in it is a header token (the official
// clients send x-stainless-*, authorization, content-type, ...); otherwise the two we need.
std::string allowed_request_headers(const std::string& requested) {
  std::string list;
  size_t start = 0;
  while (start <= requested.size()) {
    size_t end = requested.find(',', start);
    if (end == std::string::npos) end = requested.size();
    std::string name = requested.substr(start, end - start);
    name.erase(0, name.find_first_not_of(" \t"));
    name.erase(name.find_last_not_of(" \t") + 1);
    start = end + 1;
    if (name.empty()) continue;
    if (!is_token(name)) return "Authorization, Content-Type";
    list += (list.empty() ? "" : ", ") + name;
  }
  return list.empty() ? "Authorization, Content-Type" : list;
}

ApiError rejection_error(const Rejection& rejection, Endpoint endpoint) {
  std::string param = rejection.param;
  if (param == "prompt" && endpoint == Endpoint::ChatCompletions) param = "messages";
  switch (rejection.reason) {
    case Rejection::Reason::TooLong:
      return api_error(400, rejection.message, "invalid_request_error", "context_length_exceeded", param);
    case Rejection::Reason::QueueFull: return api_error(503, rejection.message, "server_error", "queue_full");
    case Rejection::Reason::ShuttingDown: return api_error(503, rejection.message, "server_error", "shutting_down");
    case Rejection::Reason::Invalid: break;
  }
  return api_error(400, rejection.message, "invalid_request_error", "", param);
}

// Routes a draining server still answers: a balancer reads /health to take it out, and
// monitoring keeps reading /metrics.
bool served_while_draining(const std::string& path) { return path == "/health" || path == "/metrics"; }

ApiError draining_error() {
  return api_error(503, "the server is draining before it stops; send the request to another replica", "server_error",
                   "shutting_down");
}

// Refuses a request of a draining server; the connection closes after the answer, so a client
// or balancer sends its next request elsewhere (httplib adds the header itself when the client
// asked for close).
void refuse_draining(const httplib::Request& req, httplib::Response& res) {
  send_error(res, draining_error());
  if (req.get_header_value("Connection") != "close") res.set_header("Connection", "close");
}

// Counts a request as in flight while it lives: draining waits for the count to reach zero.
class InFlight {
 public:
  explicit InFlight(std::atomic<size_t>& count) : count_(count) { count_.fetch_add(1); }
  ~InFlight() { count_.fetch_sub(1); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::atomic<size_t>& count_;
};

ApiError event_error(const Event& event) {
  if (event.error_kind == ErrorKind::Timeout) return api_error(504, event.error, "timeout", "generation_timeout");
  return api_error(500, event.error, "server_error");
}

// How one endpoint writes its answer. Streaming: SSE text for the start, each Delta or Finish
// event, the end (with the usage) and an error after the stream began; whole: events collected
// into one JSON body.
struct StreamFormat {
  std::string opening;
  std::function<std::string(const Event&)> event;
  std::function<std::string(const Usage&)> done;
  std::function<std::string(const ApiError&)> error;
};
struct WholeFormat {
  std::function<void(const Event&)> add;
  std::function<std::string(const Usage&)> body;
};

// One streaming response: pulls events, writes chunks, notices a client that left.
struct Stream {
  std::shared_ptr<RequestChannel> channel;
  StreamFormat format;
  ConnectionProbe probe;
  Metrics* metrics = nullptr;
  Clock::time_point start;
  std::shared_ptr<InFlight> in_flight;  // until the last byte is written
  Clock::time_point last_write = Clock::now();
  Clock::time_point probed = Clock::now();
  bool over = false;

  bool write(httplib::DataSink& sink, const std::string& text) {
    last_write = Clock::now();
    return sink.write(text.data(), text.size());
  }

  // One call of httplib's chunked provider: waits a little for an event; false ends the response.
  bool pump(httplib::DataSink& sink) {
    if (!format.opening.empty() && !write(sink, std::exchange(format.opening, ""))) return false;
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
      case Event::Kind::Delta:
      case Event::Kind::Finish: {
        const std::string text = format.event(*event);
        written = text.empty() || write(sink, text);
        break;
      }
      case Event::Kind::Done:
        written = write(sink, format.done(event->usage));
        over = true;
        break;
      case Event::Kind::Error:
        written = write(sink, format.error(event_error(*event)));
        over = true;
        break;
    }
    if (over) sink.done();
    return written;
  }
};

}  // namespace

bool is_loopback_host(const std::string& host) {
  const std::string h = lowercase(host);
  return h == "localhost" || h == "::1" || h == "[::1]" || is_loopback_ipv4(h);
}

bool host_header_allowed(const std::string& host_header, const std::string& bound_host) {
  if (is_wildcard(bound_host)) return true;
  std::string host;
  if (!split_host_header(host_header, host)) return false;
  host = lowercase(host);
  if (host == "localhost" || host == "[::1]" || is_loopback_ipv4(host)) return true;
  if (is_loopback_host(bound_host)) return false;
  std::string bound = lowercase(bound_host);
  if (bound.size() > 2 && bound.front() == '[' && bound.back() == ']') bound = bound.substr(1, bound.size() - 2);
  return host == bound || host == "[" + bound + "]";
}

namespace {

// Only SO_REUSEADDR (a restart may bind while old connections sit in TIME_WAIT); cpp-httplib's
// default also sets SO_REUSEPORT, which lets a second server bind a port that is in use.
void apply_socket_options(int sock) {
  int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
}

}  // namespace

std::string bind_problem(const std::string& host, int port) {
  std::string name = host;
  if (name.size() > 2 && name.front() == '[' && name.back() == ']') name = name.substr(1, name.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int failed = getaddrinfo(name.c_str(), service.c_str(), &hints, &found); failed != 0)
    return "cannot resolve --host " + host + ": " + gai_strerror(failed);
  std::string problem = "no address to bind for --host " + host;
  for (const addrinfo* address = found; address != nullptr; address = address->ai_next) {
    const int sock = socket(address->ai_family, address->ai_socktype, address->ai_protocol);
    if (sock < 0) {
      problem = std::string("cannot create a socket: ") + std::strerror(errno);
      continue;
    }
    apply_socket_options(sock);
    const bool bound = ::bind(sock, address->ai_addr, address->ai_addrlen) == 0;
    const int error = errno;
    close(sock);
    if (bound) {
      problem.clear();
      break;
    }
    problem = error == EADDRINUSE ? "port " + service + " is in use (another process listens on " + host + ":" +
                                        service + "; pick another --port, or 0 for any free one)"
                                  : "cannot bind " + host + ":" + service + ": " + std::strerror(error);
  }
  freeaddrinfo(found);
  return problem;
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
  std::atomic<bool> draining{false};
  std::atomic<size_t> in_flight{0};

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
    started =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    configure();
  }

  const std::string& served_name() const { return options.served_names.front(); }

  bool host_allowed(const httplib::Request& req) const {
    if (!req.has_header("Host")) return true;  // HTTP/1.0
    if (req.get_header_value_count("Host") != 1) return false;
    return host_header_allowed(req.get_header_value("Host"), options.host);
  }

  bool origin_allowed(const std::string& origin, const std::string& host_header) const {
    if (is_localhost_origin(origin)) return true;
    // The page this server serves calls it from its own origin, whatever address it was opened at.
    if (options.web_ui && (origin == "http://" + host_header || origin == "https://" + host_header)) return true;
    return std::any_of(options.cors_origins.begin(), options.cors_origins.end(),
                       [&](const std::string& allowed) { return allowed == "*" || allowed == origin; });
  }

  bool key_valid(const httplib::Request& req) const {
    if (options.api_key.empty()) return true;
    // The page's files hold nothing secret; the page asks for the key and sends it itself.
    if (options.web_ui && (req.method == "GET" || req.method == "HEAD") && is_web_ui_path(req.path)) return true;
    const std::string header = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (header.rfind(prefix, 0) != 0) return false;
    return constant_time_equal(header.substr(prefix.size()), options.api_key);
  }

  // Runs before the body is read. A refusal of a request that announces a body closes the
  // connection after the answer (the logger shuts it down), so the unread body is never taken
  // for the next request.
  httplib::Server::HandlerResponse screen(const httplib::Request& req, httplib::Response& res) {
    const auto refuse = [&](const ApiError& error) {
      send_error(res, error);
      if (announces_body(req)) res.set_header("Connection", "close");
      return httplib::Server::HandlerResponse::Handled;
    };
    size_t client_headers = req.headers.size();
    for (const char* added : kLibraryHeaders) client_headers -= std::min(client_headers, req.headers.count(added));
    if (client_headers > kMaxHeaders)
      return refuse(api_error(431,
                              "the request has " + std::to_string(client_headers) + " header lines; at most " +
                                  std::to_string(kMaxHeaders) + " are accepted",
                              "invalid_request_error", "too_many_headers"));
    for (const auto& [name, value] : req.headers)
      if (!is_token(name))
        return refuse(api_error(400, "malformed header line '" + name + ":' (a header name is a token, with no spaces)",
                                "invalid_request_error", "bad_header"));
    const int length_status = content_length_status(req, drain_limit_bytes());
    if (length_status == 400)
      return refuse(api_error(400, "malformed Content-Length (one decimal number expected)", "invalid_request_error",
                              "bad_content_length"));
    if (!host_allowed(req))
      return refuse(
          api_error(403, "the Host header '" + req.get_header_value("Host") + "' does not name this server's address",
                    "invalid_request_error", "host_not_allowed"));
    if (req.has_header("Origin")) {
      const std::string origin = req.get_header_value("Origin");
      if (!origin_allowed(origin, req.get_header_value("Host")))
        return refuse(api_error(403, "the origin '" + origin + "' is not allowed (see --cors-origin)",
                                "invalid_request_error", "origin_not_allowed"));
      res.set_header("Access-Control-Allow-Origin", origin);
      res.set_header("Vary", "Origin");
    }
    if (req.method == "OPTIONS") {  // CORS preflight: no key (browsers send none)
      res.status = 204;
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      res.set_header("Access-Control-Allow-Headers",
                     allowed_request_headers(req.get_header_value("Access-Control-Request-Headers")));
      res.set_header("Access-Control-Max-Age", "600");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (draining && !served_while_draining(req.path)) {
      refuse_draining(req, res);
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.path != "/health" && !key_valid(req)) {
      res.set_header("WWW-Authenticate", "Bearer");
      return refuse(api_error(401, "invalid or missing API key (Authorization: Bearer KEY)", "authentication_error",
                              "invalid_api_key"));
    }
    if (length_status == 413) return refuse(body_too_large());
    return httplib::Server::HandlerResponse::Unhandled;
  }

  uint64_t max_body_bytes() const { return uint64_t{options.max_body_kib} * 1024; }

  // A body over the limit but within this is read and dropped before the 413 goes out: a client
  // still writing it when the server closes the connection gets a reset, not the response. A
  // larger announcement is refused from the headers alone.
  uint64_t drain_limit_bytes() const { return 4 * max_body_bytes(); }

  // A route's handler, behind the body limit: bodies up to drain_limit_bytes() are read in full.
  // It counts as in flight while it runs; one that arrives after drain() began (its headers
  // passed the screen before) is refused. Counting before looking at `draining` (both
  // sequentially consistent) means drain() either sees the count or the handler sees the flag.
  template <typename Handler>
  auto limited(Handler handler) {
    return [this, handler](const httplib::Request& req, httplib::Response& res) {
      if (req.body.size() > max_body_bytes()) return send_error(res, body_too_large());
      if (served_while_draining(req.path)) return handler(req, res);
      const InFlight counted(in_flight);
      if (draining) return refuse_draining(req, res);
      handler(req, res);
    };
  }

  ApiError body_too_large() const {
    return api_error(
        413, "the request body is larger than " + std::to_string(options.max_body_kib) + " KiB (--max-body-kib)",
        "invalid_request_error", "body_too_large");
  }

  void configure() {
    server.set_socket_options(apply_socket_options);
    const size_t threads = size_t{scheduler.max_batch()} + options.scheduler.max_queue + 8;
    server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    server.set_payload_max_length(drain_limit_bytes());
    server.set_read_timeout(options.read_timeout_s, 0);
    server.set_write_timeout(options.write_timeout_s, 0);
    server.set_keep_alive_timeout(5);
    server.set_pre_routing_handler(
        [this](const httplib::Request& req, httplib::Response& res) { return screen(req, res); });
    server.set_error_handler(
        httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
          if (!res.body.empty() || res.is_chunked_content_provider_) return httplib::Server::HandlerResponse::Unhandled;
          if (res.status == 404) {
            send_error(res,
                       api_error(404, "no route " + req.method + " " + req.path, "invalid_request_error", "not_found"));
          } else if (res.status == 413) {
            send_error(res, body_too_large());
          } else {
            send_error(
                res, api_error(res.status, "the request could not be handled (HTTP " + std::to_string(res.status) + ")",
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
    // Called once the response is written.
    server.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      metrics.count_request(endpoint_label(req.path), res.status);
      if (res.status >= 400 && res.get_header_value("Connection") == "close" && !req.remote_addr.empty())
        ConnectionProbe::find(req.local_addr, req.local_port, req.remote_addr, req.remote_port).shutdown();
    });

    server.Get("/health", limited([this](const httplib::Request&, httplib::Response& res) {
                 if (draining) return send_json(res, 503, {{"status", "draining"}});
                 send_json(res, 200, {{"status", "ok"}});
               }));
    server.Get("/metrics", limited([this](const httplib::Request&, httplib::Response& res) {
                 res.set_content(metrics.render(), "text/plain; version=0.0.4; charset=utf-8");
               }));
    server.Get("/v1/models", limited([this](const httplib::Request&, httplib::Response& res) {
                 json data = json::array();
                 for (const std::string& name : options.served_names) data.push_back(model_json(name));
                 send_json(res, 200, {{"object", "list"}, {"data", std::move(data)}});
               }));
    // Model ids may hold slashes ("org/name"): everything after /v1/models/ is the id.
    server.Get(
        R"(/v1/models/(.+))", limited([this](const httplib::Request& req, httplib::Response& res) {
          const std::string id = req.matches[1];
          if (std::find(options.served_names.begin(), options.served_names.end(), id) == options.served_names.end())
            return send_error(res, api_error(404, "the model '" + id + "' does not exist", "invalid_request_error",
                                             "model_not_found", "model"));
          send_json(res, 200, model_json(id));
        }));
    if (options.web_ui)
      server.Get(R"(/|/index\.html|/assets/[^/]+)",
                 limited([](const httplib::Request& req, httplib::Response& res) { web_page(req, res); }));
    server.Post("/v1/completions", limited([this](const httplib::Request& req, httplib::Response& res) {
                  chat_or_completion(Endpoint::Completions, req, res);
                }));
    server.Post("/v1/chat/completions", limited([this](const httplib::Request& req, httplib::Response& res) {
                  chat_or_completion(Endpoint::ChatCompletions, req, res);
                }));
    server.Post("/v1/responses",
                limited([this](const httplib::Request& req, httplib::Response& res) { responses(req, res); }));
    server.Post("/tokenize",
                limited([this](const httplib::Request& req, httplib::Response& res) { tokenize(req, res); }));
    server.Post("/detokenize",
                limited([this](const httplib::Request& req, httplib::Response& res) { detokenize(req, res); }));
  }

  // A file of the chat page. The body goes out through a content provider, which cpp-httplib
  // sends as is (set_content would compress it a second time for a client that accepts gzip).
  static void web_page(const httplib::Request& req, httplib::Response& res) {
    auto reply = web_ui_reply(req.path, req.get_header_value("Accept-Encoding"), req.get_header_value("If-None-Match"));
    if (!reply)
      return send_error(
          res, api_error(404, "no route " + req.method + " " + req.path, "invalid_request_error", "not_found"));
    if (reply->status == 500)
      return send_error(res, api_error(500, "the embedded page file " + req.path + " is corrupt", "server_error"));
    res.status = reply->status;
    for (const auto& [name, value] : reply->headers) res.set_header(name, value);
    if (reply->status != 200) return;
    auto body = std::make_shared<std::string>(std::move(reply->body));
    res.set_content_provider(body->size(), reply->content_type,
                             [body](size_t offset, size_t length, httplib::DataSink& sink) {
                               return sink.write(body->data() + offset, length);
                             });
  }

  json model_json(const std::string& name) const {
    return {{"id", name},
            {"object", "model"},
            {"created", started},
            {"owned_by", "kipp"},
            {"meta", {{"n_ctx", scheduler.context()}, {"n_vocab", prompt_context.vocab_size}}}};
  }

  // A JSON object body for /tokenize and /detokenize, or the 400 it gets.
  std::optional<json> object_body(const httplib::Request& req, httplib::Response& res) {
    json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded() || !body.is_object()) {
      send_error(res, api_error(400, "the request body must be a JSON object", "invalid_request_error"));
      return std::nullopt;
    }
    return body;
  }

  // llama-server's shape: {"content", "add_special"?, "parse_special"?, "with_pieces"?} ->
  // {"tokens": [id, ...]}, or [{"id", "piece"}] with pieces (a piece that is not valid UTF-8 on
  // its own is given as its bytes).
  void tokenize(const httplib::Request& req, httplib::Response& res) {
    auto body = object_body(req, res);
    if (!body) return;
    const auto bad = [&](const std::string& param, const std::string& what) {
      send_error(res, api_error(400, param + " must be " + what, "invalid_request_error", "", param));
    };
    bool flags[3] = {false, true, false};  // add_special (Qwen3 adds none), parse_special, with_pieces
    const char* names[3] = {"add_special", "parse_special", "with_pieces"};
    for (const auto& item : body->items()) {
      // Named, not a structured binding: clang before 16 cannot capture a binding in a lambda.
      const std::string& key = item.key();
      const auto& value = item.value();
      const auto known = std::find_if(std::begin(names), std::end(names), [&](const char* n) { return key == n; });
      if (key == "content") {
        if (!value.is_string()) return bad("content", "a string");
      } else if (known != std::end(names)) {
        if (!value.is_boolean()) return bad(key, "a boolean");
        flags[known - std::begin(names)] = value.get<bool>();
      } else {
        return send_error(
            res, api_error(400, "Unrecognized request argument supplied: " + key, "invalid_request_error", "", key));
      }
    }
    if (!body->contains("content")) return bad("content", "given (a string)");
    const auto& tokenizer = *prompt_context.tokenizer;
    auto ids = tokenizer.encode((*body)["content"].get<std::string>(),
                                flags[1] ? SpecialTokens::Parse : SpecialTokens::PlainText);
    if (!ids.ok()) return bad("content", "valid text: " + ids.message());
    json tokens = json::array();
    for (uint32_t id : *ids) {
      if (!flags[2]) {
        tokens.push_back(id);
        continue;
      }
      auto bytes = tokenizer.token_to_bytes(id);
      std::string piece = bytes.ok() ? *bytes : std::string();
      const json shown = utf8::first_invalid_byte(piece) ? bytes_array(piece) : json(piece);
      tokens.push_back({{"id", id}, {"piece", shown}});
    }
    send_json(res, 200, {{"tokens", std::move(tokens)}});
  }

  static json bytes_array(const std::string& bytes) {
    json out = json::array();
    for (unsigned char c : bytes) out.push_back(int{c});
    return out;
  }

  // {"tokens": [id, ...]} -> {"content": text} (bytes that are not UTF-8 become U+FFFD).
  void detokenize(const httplib::Request& req, httplib::Response& res) {
    auto body = object_body(req, res);
    if (!body) return;
    for (const auto& [key, value] : body->items())
      if (key != "tokens")
        return send_error(
            res, api_error(400, "Unrecognized request argument supplied: " + key, "invalid_request_error", "", key));
    const json tokens = body->value("tokens", json());
    std::vector<uint32_t> ids;
    const bool listed = tokens.is_array() && std::all_of(tokens.begin(), tokens.end(), [&](const json& v) {
                          return v.is_number_unsigned() && v.get<uint64_t>() < prompt_context.vocab_size;
                        });
    if (!listed)
      return send_error(
          res, api_error(400, "tokens must be a list of token ids below " + std::to_string(prompt_context.vocab_size),
                         "invalid_request_error", "", "tokens"));
    for (const json& v : tokens) ids.push_back(static_cast<uint32_t>(v.get<uint64_t>()));
    auto text = prompt_context.tokenizer->decode(ids);
    if (!text.ok()) return send_error(res, api_error(400, text.message(), "invalid_request_error", "", "tokens"));
    send_json(res, 200, {{"content", *text}});
  }

  // A request with a known model, as the scheduler's request; the 404 or 400 otherwise (`params`,
  // when given, renames the params errors name).
  std::optional<GenerationRequest> prepare(const OpenAiRequest& request, Clock::time_point start,
                                           httplib::Response& res, ApiError (*params)(ApiError)) {
    if (request.model && std::find(options.served_names.begin(), options.served_names.end(), *request.model) ==
                             options.served_names.end()) {
      send_error(
          res, api_error(
                   404, "the model '" + *request.model + "' does not exist; this server serves '" + served_name() + "'",
                   "invalid_request_error", "model_not_found", "model"));
      return std::nullopt;
    }
    auto converted = to_generation_request(request, prompt_context);
    if (auto* error = std::get_if<ApiError>(&converted)) {
      send_error(res, params ? params(*error) : *error);
      return std::nullopt;
    }
    GenerationRequest generation = std::move(std::get<GenerationRequest>(converted));
    if (!request.seed_given) generation.sampling.seed = std::random_device{}();
    generation.arrival = start;
    return generation;
  }

  void chat_or_completion(Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
    const auto start = Clock::now();
    auto parsed = parse_openai_request(endpoint, req.body, limits);
    if (auto* error = std::get_if<ApiError>(&parsed)) return send_error(res, *error);
    const OpenAiRequest& request = std::get<OpenAiRequest>(parsed);
    auto generation = prepare(request, start, res, nullptr);
    if (!generation) return;
    ResponseIdentity identity = make_identity(endpoint, served_name(), kFingerprint);
    identity.reasoning_field = options.reasoning_field;
    const uint32_t n = generation->n;
    if (request.stream) {
      auto writer = std::make_shared<ChunkWriter>(identity, n, request.logprobs);
      const bool include_usage = request.include_usage;
      StreamFormat format;
      format.event = [writer](const Event& event) {
        return event.kind == Event::Kind::Finish ? writer->finish(event) : writer->delta(event);
      };
      format.done = [writer, include_usage](const Usage& usage) {
        return (include_usage ? writer->usage(usage) : "") + ChunkWriter::done();
      };
      format.error = [](const ApiError& error) { return ChunkWriter::error(error) + ChunkWriter::done(); };
      return run(std::move(*generation), endpoint, req, res, std::move(format), {});
    }
    auto builder = std::make_shared<ResponseBuilder>(identity, n, request.logprobs);
    WholeFormat whole{[builder](const Event& event) { builder->add(event); },
                      [builder](const Usage& usage) { return dump(builder->finish(usage)); }};
    run(std::move(*generation), endpoint, req, res, {}, std::move(whole));
  }

  void responses(const httplib::Request& req, httplib::Response& res) {
    const auto start = Clock::now();
    auto parsed = parse_responses_request(req.body, limits);
    if (auto* error = std::get_if<ApiError>(&parsed)) return send_error(res, *error);
    ResponsesRequest& request = std::get<ResponsesRequest>(parsed);
    auto generation = prepare(request.chat, start, res, with_responses_params);
    if (!generation) return;
    ResponseIdentity identity = make_identity(Endpoint::ChatCompletions, served_name(), kFingerprint);
    identity.id = "resp_" + random_hex(32);
    const bool stream = request.chat.stream;
    auto writer = std::make_shared<ResponsesWriter>(identity, std::move(request.echo), stream);
    if (stream) {
      StreamFormat format;
      format.opening = writer->start();
      format.event = [writer](const Event& event) { return writer->add(event); };
      format.done = [writer](const Usage& usage) { return writer->done(usage); };
      format.error = [writer](const ApiError& error) { return writer->error(error); };
      return run(std::move(*generation), Endpoint::ChatCompletions, req, res, std::move(format), {},
                 with_responses_params);
    }
    WholeFormat whole{[writer](const Event& event) { writer->add(event); },
                      [writer](const Usage& usage) {
                        writer->done(usage);
                        return writer->response().dump(-1, ' ', false, json::error_handler_t::replace);
                      }};
    run(std::move(*generation), Endpoint::ChatCompletions, req, res, {}, std::move(whole), with_responses_params);
  }

  // Submits the request and answers with its events: streamed when `stream.event` is set.
  void run(GenerationRequest generation, Endpoint endpoint, const httplib::Request& req, httplib::Response& res,
           StreamFormat stream_format, WholeFormat whole, ApiError (*params)(ApiError) = nullptr) {
    const auto start = generation.arrival;
    Submission submission = scheduler.submit(std::move(generation));
    if (submission.rejection) {
      if (submission.rejection->reason == Rejection::Reason::QueueFull) res.set_header("Retry-After", "1");
      const ApiError error = rejection_error(*submission.rejection, endpoint);
      return send_error(res, params ? params(error) : error);
    }
    ConnectionProbe probe = ConnectionProbe::find(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
    if (stream_format.event) {
      auto stream = std::make_shared<Stream>(Stream{submission.channel, std::move(stream_format), probe, &metrics,
                                                    start, std::make_shared<InFlight>(in_flight)});
      res.set_header("Cache-Control", "no-cache");
      res.set_header("X-Accel-Buffering", "no");
      res.set_chunked_content_provider(
          "text/event-stream", [stream](size_t, httplib::DataSink& sink) { return stream->pump(sink); },
          [stream](bool) {
            if (!stream->over) {  // the client left, or the server is stopping
              stream->channel->cancel();
              stream->metrics->count_cancelled();
            }
            stream->metrics->observe_request_duration(seconds_since(stream->start));
          });
      return;
    }
    auto probed = Clock::now();
    for (;;) {
      std::optional<Event> event = submission.channel->pop(kPollInterval);
      if (Clock::now() - probed >= kPollInterval) {  // events may flow steadily: look by the clock
        probed = Clock::now();
        if (probe.peer_closed()) {
          submission.channel->cancel();
          metrics.count_cancelled();
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
        res.status = 200;
        res.set_content(whole.body(event->usage), "application/json");
        return;
      }
      whole.add(*event);
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
  if (port == 0) {
    std::string problem = bind_problem(o.host, o.port);
    if (problem.empty()) problem = "cannot listen on " + o.host + ":" + std::to_string(o.port);
    return make_error(problem);
  }
  return port;
}

bool HttpServer::listen() { return impl_->server.listen_after_bind(); }

void HttpServer::stop() { impl_->server.stop(); }

void HttpServer::drain() { impl_->draining = true; }

size_t HttpServer::in_flight() const { return impl_->in_flight; }

}  // namespace kipp::server
