#include "server/scheduler.h"

#include <algorithm>
#include <future>
#include <utility>

#include "runtime/constraint.h"
#include "runtime/generator.h"
#include "runtime/stop_strings.h"
#include "server/kv_pool_size.h"
#include "server/think_splitter.h"
#include "server/tool_call_parser.h"

namespace kipp::server {
namespace {

constexpr uint32_t kBlock = kKvBlockPositions;
constexpr uint32_t kIdlePrefillFactor = 4;  // prefill budget multiplier when no choice decodes

uint32_t blocks_for(uint64_t positions) { return static_cast<uint32_t>((positions + kBlock - 1) / kBlock); }

double ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

std::string token_bytes(const Tokenizer& tokenizer, uint32_t id) {
  auto bytes = tokenizer.token_to_bytes(id);
  return bytes.ok() ? *bytes : std::string();
}

}  // namespace

struct Scheduler::Choice {
  uint32_t index = 0;
  std::unique_ptr<Session> session;
  std::optional<Sampler> sampler;
  IncrementalDecoder decoder;
  StopStringMatcher matcher;
  ThinkSplitter splitter;
  std::optional<ToolCallParser> tool_calls;  // with tools: <tool_call> blocks in the content
  std::optional<Constraint> constraint;      // the request's grammar, when it has one
  std::optional<uint32_t> pending;           // sampled, emitted, not yet in the session
  uint32_t generated = 0;
  bool finished = false;

  Choice(uint32_t i, const Tokenizer& tokenizer, std::vector<std::string> stop)
      : index(i), decoder(tokenizer), matcher(std::move(stop)) {}
};

struct Scheduler::Active {
  Queued queued;
  std::vector<std::unique_ptr<Choice>> choices;
  bool forked = false;  // every choice holds (or prefills) its own copy of the prompt
  bool failed = false;  // an error event went out; ended after the step
  uint32_t cached_tokens = 0;
  uint32_t unfinished = 0;
  uint32_t reserved_blocks = 0;
  uint32_t generated = 0;
  Clock::time_point admitted;
  std::optional<Clock::time_point> first_token;

  const GenerationRequest& request() const { return queued.request; }
  RequestChannel& channel() const { return *queued.channel; }
};

// One item of a step and where its logits row goes.
struct Scheduler::StepRow {
  Active* active;
  Choice* choice;
  bool sample;               // the item's last position gives this choice's next token
  uint32_t positions_after;  // the choice's session length once the step is evaluated
};

Expected<std::unique_ptr<Scheduler>> Scheduler::create(const std::string& model_path, const SchedulerOptions& options,
                                                       Metrics* metrics) {
  if (options.max_batch == 0) return make_error("--max-batch must be at least 1");
  if (options.prefill_chunk == 0 || options.prefill_budget == 0)
    return make_error("the prefill chunk and budget must be positive");
  if (options.timeout_s == 0) return make_error("--timeout-s must be at least 1");
  // The pool's size in blocks depends on the model's K/V width: read the config first (cheap:
  // a mapping and the metadata, no hashing).
  LoadOptions peek;
  peek.verify_content_hash = false;
  KIPP_ASSIGN_OR_RETURN(Model header, Model::open(model_path, peek));
  const ModelConfig config = header.config();
  if (options.ctx > config.context_length)
    return make_error("--ctx " + std::to_string(options.ctx) + " exceeds the model's context length " +
                      std::to_string(config.context_length));
  const uint64_t block_bytes = config.kv_bytes_per_token() * kBlock;
  if (block_bytes == 0) return make_error("the model has no K/V cache to pool");

  // The context a pool of `blocks` blocks gives each sequence, or why it cannot.
  const auto context_in = [&](uint64_t blocks) -> Expected<uint32_t> {
    const auto positions = static_cast<uint32_t>(blocks * kBlock);
    if (options.ctx > positions)
      return make_error("--ctx " + std::to_string(options.ctx) + " exceeds what the K/V pool holds (" +
                        std::to_string(positions) + " positions in " + std::to_string(blocks * block_bytes >> 20) +
                        " MiB); raise --kv-pool-mib");
    const uint32_t context = options.ctx != 0 ? options.ctx : std::min(config.context_length, positions);
    if (context < 2) return make_error("the context must hold at least 2 positions");
    return context;
  };

  EngineOptions engine_options;
  engine_options.backend = options.backend;
  engine_options.max_step_tokens = options.max_batch + options.prefill_budget;
  engine_options.threads = options.threads;
  engine_options.verify_content_hash = options.verify_content_hash;
  // On a GPU without --kv-pool-mib the pool is sized from the memory the open engine leaves
  // free; otherwise it is known (and checked) before the engine opens, and opens with it.
  const bool from_device = !options.kv_pool_mib && options.backend != BackendKind::Cpu;
  if (!from_device) {
    const uint32_t pool_mib = options.kv_pool_mib.value_or(kHostKvPoolMib);
    const uint64_t blocks = (uint64_t{pool_mib} << 20) / block_bytes;
    if (blocks == 0)
      return make_error("--kv-pool-mib " + std::to_string(pool_mib) + " holds no K/V block of this model (" +
                        std::to_string(block_bytes) + " bytes per 32 positions)");
    if (blocks > UINT32_MAX / kBlock) return make_error("--kv-pool-mib is too large");
    KIPP_RETURN_IF_ERROR(context_in(blocks));
    engine_options.pool_blocks = static_cast<uint32_t>(blocks);
  }
  KIPP_ASSIGN_OR_RETURN(auto engine, Engine::open(model_path, engine_options));
  if (from_device) {
    const uint32_t per_slot = options.ctx != 0 ? options.ctx : config.context_length;
    const uint64_t needed = uint64_t{options.max_batch} * ((uint64_t{per_slot} + kBlock - 1) / kBlock);
    const uint64_t free_bytes = engine->backend().memory().device_free_bytes;
    const uint64_t blocks =
        std::min<uint64_t>(device_kv_pool_blocks(free_bytes, block_bytes, needed), UINT32_MAX / kBlock);
    if (blocks == 0)
      return make_error("the " + std::string(engine->backend().name()) + " device has " +
                        std::to_string(free_bytes >> 20) + " MiB free after loading the model: no room for a K/V pool");
    KIPP_RETURN_IF_ERROR(engine->open_pool(static_cast<uint32_t>(blocks)));
  }
  KIPP_ASSIGN_OR_RETURN(const uint32_t context, context_in(engine->pool_stats().total_blocks));
  std::unique_ptr<Scheduler> scheduler(new Scheduler(std::move(engine), options, context, metrics));
  scheduler->thread_ = std::thread([s = scheduler.get()] { s->run(); });
  return scheduler;
}

Scheduler::Scheduler(std::unique_ptr<Engine> engine, const SchedulerOptions& options, uint32_t context,
                     Metrics* metrics)
    : engine_(std::move(engine)),
      options_(options),
      context_(context),
      pool_blocks_(engine_->pool_stats().total_blocks),
      metrics_(metrics),
      stop_tokens_(default_stop_tokens(*engine_)),
      grammar_vocabulary_(grammar_vocabulary(*engine_, stop_tokens_)),
      logits_(size_t{options.max_batch} * engine_->vocab_size()) {
  publish_gauges(0);
}

Scheduler::~Scheduler() { stop(); }

void Scheduler::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Submission Scheduler::submit(GenerationRequest request) {
  const auto reject = [](Rejection::Reason reason, std::string message, std::string param) {
    return Submission{nullptr, Rejection{reason, std::move(message), std::move(param)}};
  };
  if (request.prompt.empty()) return reject(Rejection::Reason::Invalid, "the prompt is empty", "prompt");
  if (request.n == 0 || request.n > options_.max_batch)
    return reject(
        Rejection::Reason::Invalid,
        "n must be between 1 and " + std::to_string(options_.max_batch) + ", found " + std::to_string(request.n), "n");
  if (Status valid = engine_->check_tokens(request.prompt); !valid.ok())
    return reject(Rejection::Reason::Invalid, "prompt: " + valid.message(), "prompt");
  if (Status valid = request.sampling.validate(engine_->vocab_size()); !valid.ok())
    return reject(Rejection::Reason::Invalid, valid.message(), "");

  const auto prompt = static_cast<uint32_t>(request.prompt.size());
  const std::string counts =
      "the prompt has " + std::to_string(prompt) + " tokens and the context holds " + std::to_string(context_);
  if (prompt >= context_)
    return reject(Rejection::Reason::TooLong, counts + ": no room is left to generate a token", "prompt");
  Queued queued;
  // n > 1: the whole blocks of the prompt (leaving at least one token to evaluate per choice).
  queued.shared_until = request.n > 1 ? (prompt - 1) / kBlock * kBlock : 0;
  const uint32_t shared_blocks = queued.shared_until / kBlock;
  // The longest sequence per choice the pool can hold for all n choices at once.
  const uint64_t pool_limit = uint64_t{kBlock} * (shared_blocks + (pool_blocks_ - shared_blocks) / request.n);
  const auto room = static_cast<uint32_t>(std::min<uint64_t>(context_, pool_limit));
  if (request.max_tokens) {
    if (*request.max_tokens == 0)
      return reject(Rejection::Reason::Invalid, "max_tokens must be at least 1", "max_tokens");
    if (uint64_t{prompt} + *request.max_tokens > context_)
      return reject(Rejection::Reason::TooLong,
                    counts + "; the prompt plus max_tokens (" + std::to_string(*request.max_tokens) +
                        ") exceeds it: lower max_tokens or shorten the prompt",
                    "max_tokens");
    if (uint64_t{prompt} + *request.max_tokens > room)
      return reject(Rejection::Reason::TooLong,
                    "n (" + std::to_string(request.n) + ") choices of the prompt (" + std::to_string(prompt) +
                        " tokens) plus max_tokens (" + std::to_string(*request.max_tokens) +
                        ") do not fit the K/V pool (" + std::to_string(pool_blocks_ * kBlock) +
                        " positions): lower n or max_tokens",
                    "n");
    queued.max_tokens = *request.max_tokens;
  } else {
    if (room <= prompt)
      return reject(Rejection::Reason::TooLong,
                    "n (" + std::to_string(request.n) + ") copies of the prompt (" + std::to_string(prompt) +
                        " tokens) do not fit the K/V pool: lower n or shorten the prompt",
                    "n");
    queued.max_tokens = room - prompt;
    if (options_.default_max_tokens != 0) queued.max_tokens = std::min(queued.max_tokens, options_.default_max_tokens);
  }
  queued.private_blocks = blocks_for(uint64_t{prompt} + queued.max_tokens) - shared_blocks;
  queued.worst_blocks = shared_blocks + request.n * queued.private_blocks;
  queued.channel = std::make_shared<RequestChannel>();
  queued.request = std::move(request);
  auto channel = queued.channel;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return reject(Rejection::Reason::ShuttingDown, "the server is shutting down", "");
    if (queue_.size() >= options_.max_queue)
      return reject(Rejection::Reason::QueueFull,
                    "the queue is full (" + std::to_string(options_.max_queue) + " requests waiting); retry later", "");
    queue_.push_back(std::move(queued));
  }
  wake_.notify_all();
  return Submission{std::move(channel), std::nullopt};
}

void Scheduler::run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || !active_.empty(); });
      if (stopping_) break;
    }
    drop_expired_and_cancelled();
    admit_from_queue();
    if (!active_.empty()) step();
  }
  // Shutting down: every request still known gets an error, so no HTTP thread waits forever.
  std::deque<Queued> queued;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queued.swap(queue_);
  }
  Event shutdown;
  shutdown.kind = Event::Kind::Error;
  shutdown.error = "the server is shutting down";
  for (Queued& q : queued) q.channel->push(shutdown);
  while (!active_.empty()) end_request(*active_.front(), shutdown);
  publish_gauges(0);
}

void Scheduler::drop_expired_and_cancelled() {
  const auto now = Clock::now();
  const auto deadline = std::chrono::seconds(options_.timeout_s);
  Event timeout;
  timeout.kind = Event::Kind::Error;
  timeout.error_kind = ErrorKind::Timeout;
  timeout.error =
      "the request exceeded the server's generation deadline of " + std::to_string(options_.timeout_s) + " s";
  for (auto it = active_.begin(); it != active_.end();) {
    Active& active = **it;
    ++it;  // end_request erases `active`
    if (active.channel().cancelled()) {
      end_request(active, std::nullopt);
    } else if (now - active.request().arrival > deadline) {
      end_request(active, timeout);
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->channel->cancelled()) {
      it = queue_.erase(it);
    } else if (now - it->request.arrival > deadline) {
      it->channel->push(timeout);
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
}

void Scheduler::admit_from_queue() {
  std::vector<Queued> admitted;
  size_t depth = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    uint32_t choices = active_choices_;
    uint32_t reserved = reserved_blocks_;
    while (!queue_.empty()) {
      const Queued& front = queue_.front();
      if (choices + front.request.n > options_.max_batch || reserved + front.worst_blocks > pool_blocks_) break;
      choices += front.request.n;
      reserved += front.worst_blocks;
      admitted.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    depth = queue_.size();
  }
  for (Queued& queued : admitted) start(std::move(queued));
  publish_gauges(depth);
}

void Scheduler::start(Queued queued) {
  auto active = std::make_unique<Active>();
  active->queued = std::move(queued);
  active->admitted = Clock::now();
  const GenerationRequest& request = active->request();
  const Tokenizer& tokenizer = engine_->tokenizer();
  SessionOptions session_options;
  session_options.capacity = context_;
  session_options.pooled = true;
  Status failure;
  for (uint32_t i = 0; i < request.n && failure.ok(); ++i) {
    auto choice = std::make_unique<Choice>(i, tokenizer, request.stop);
    SamplingParams sampling = request.sampling;
    sampling.seed += i;  // distinct, reproducible choices
    auto sampler = Sampler::create(sampling, engine_->vocab_size());
    auto session = engine_->create_session(session_options);
    if (!sampler.ok() || !session.ok()) {
      failure = make_error(!sampler.ok() ? sampler.message() : session.message());
      break;
    }
    choice->sampler.emplace(std::move(*sampler));
    choice->sampler->observe(request.prompt);
    choice->session = std::move(*session);
    if (request.grammar) choice->constraint.emplace(request.grammar, grammar_vocabulary_);
    if (request.parse_tool_calls) {
      ToolCallParser::Options parser;
      parser.max_calls = request.max_tool_calls;
      parser.allowed_names = request.tool_names;
      if (request.sampling.seed != 0) parser.id_seed = request.sampling.seed + i;  // reproducible ids with a seed
      choice->tool_calls.emplace(std::move(parser));
    }
    active->choices.push_back(std::move(choice));
  }
  active->unfinished = static_cast<uint32_t>(active->choices.size());
  active->reserved_blocks = active->queued.worst_blocks;
  active_choices_ += active->unfinished;
  reserved_blocks_ += active->reserved_blocks;
  active_.push_back(std::move(active));
  Active& added = *active_.back();
  if (!failure.ok()) {
    Event error;
    error.kind = Event::Kind::Error;
    error.error = failure.message();
    end_request(added, error);
    return;
  }
  // Prefix reuse: choice 0 adopts the longest cached prefix.
  auto adopted = added.choices[0]->session->match_prefix(request.prompt);
  if (!adopted.ok()) {
    Event error;
    error.kind = Event::Kind::Error;
    error.error = adopted.message();
    end_request(added, error);
    return;
  }
  added.cached_tokens = *adopted;
  if (metrics_) {
    metrics_->add_tokens(request.prompt.size(), 0);
    if (*adopted > 0) metrics_->add_prefix_reuse(*adopted);
  }
  if (request.n == 1) added.forked = true;
}

// Choice 0 has prefilled the shared blocks: publish them and let every choice adopt them.
Status Scheduler::fork(Active& active) {
  active.choices[0]->session->reset();
  for (auto& choice : active.choices) {
    KIPP_ASSIGN_OR_RETURN(uint32_t adopted, choice->session->match_prefix(active.request().prompt));
    (void)adopted;  // normally shared_until; less only after a hash collision, then prefilled
  }
  active.forked = true;
  return ok_status();
}

// The items of one step, row for row with whom they belong to; sampled rows take their
// logits from `logits` in order.
struct Scheduler::Batch {
  Batch(float* logits_rows, uint32_t vocab_size) : logits(logits_rows), vocab(vocab_size) {}

  float* logits;
  uint32_t vocab;
  std::vector<BatchItem> items;
  std::vector<StepRow> rows;
  uint32_t logit_rows = 0;

  void add(Active& active, Choice& choice, std::span<const uint32_t> tokens, bool sample) {
    float* row_logits = sample ? logits + size_t{logit_rows++} * vocab : nullptr;
    items.push_back(BatchItem{choice.session.get(), tokens, sample ? 1u : 0u, row_logits});
    rows.push_back(StepRow{&active, &choice, sample, choice.session->length() + static_cast<uint32_t>(tokens.size())});
  }
};

void Scheduler::step() {
  Batch batch(logits_.data(), engine_->vocab_size());
  add_decoding(batch);
  add_prompt_chunks(batch);
  if (batch.items.empty()) return;
  // Grammar masks are computed while the forward pass runs: they depend only on the tokens
  // accepted so far, not on this step's logits.
  std::future<void> masks = prepare_masks(batch);
  const Status evaluated = engine_->eval_batch(batch.items);
  if (masks.valid()) masks.wait();
  if (!evaluated.ok()) return fail_batch(batch, evaluated);
  end_completed(sample_tokens(batch));
  std::lock_guard<std::mutex> lock(mutex_);
  publish_gauges(queue_.size());
}

// Decoding choices first: each evaluates its pending token.
void Scheduler::add_decoding(Batch& batch) {
  for (auto& active : active_)
    for (auto& choice : active->choices)
      if (!choice->finished && choice->pending)
        batch.add(*active, *choice, std::span<const uint32_t>(&*choice->pending, 1), true);
}

// Then prompt chunks, oldest request first, within the step's prefill budget.
// While choices decode, prompts advance a chunk per choice so that decoding keeps its pace;
// when nothing decodes there is no one to keep waiting, and larger steps fill the machine.
void Scheduler::add_prompt_chunks(Batch& batch) {
  const bool decoding = !batch.items.empty();
  const uint32_t chunk_limit = decoding ? options_.prefill_chunk : options_.prefill_budget * kIdlePrefillFactor;
  uint32_t budget = decoding ? options_.prefill_budget : options_.prefill_budget * kIdlePrefillFactor;
  for (auto it = active_.begin(); it != active_.end() && budget > 0;) {
    Active& active = **it;
    ++it;
    const std::span<const uint32_t> prompt = active.request().prompt;
    if (!active.forked && active.choices[0]->session->length() >= active.queued.shared_until) {
      if (Status forked = fork(active); !forked.ok()) {
        Event error;
        error.kind = Event::Kind::Error;
        error.error = forked.message();
        end_request(active, error);
        continue;
      }
    }
    if (!active.forked) {  // choice 0 prefills the shared blocks for every choice
      Choice& first = *active.choices[0];
      const uint32_t done = first.session->length();
      const uint32_t chunk = std::min({chunk_limit, active.queued.shared_until - done, budget});
      batch.add(active, first, prompt.subspan(done, chunk), false);
      budget -= chunk;
      continue;
    }
    for (auto& choice : active.choices) {
      if (choice->finished || choice->generated > 0 || budget == 0) continue;  // decoding, or done
      const uint32_t done = choice->session->length();
      const uint32_t chunk = std::min({chunk_limit, static_cast<uint32_t>(prompt.size()) - done, budget});
      batch.add(active, *choice, prompt.subspan(done, chunk), done + chunk == prompt.size());
      budget -= chunk;
    }
  }
}

// The masks of the constrained rows that sample this step, on a thread of their own.
std::future<void> Scheduler::prepare_masks(const Batch& batch) {
  std::vector<std::pair<Constraint*, uint32_t>> work;  // constraint, token budget
  for (const StepRow& row : batch.rows) {
    if (!row.sample || !row.choice->constraint) continue;
    const uint32_t room = context_ > row.positions_after ? context_ - row.positions_after : 0;
    const uint32_t left = row.active->queued.max_tokens - row.choice->generated;
    work.emplace_back(&*row.choice->constraint, std::max(1u, std::min(room, left)));
  }
  if (work.empty()) return {};
  return std::async(std::launch::async, [work = std::move(work)] {
    for (const auto& [constraint, budget] : work) constraint->prepare(budget);
  });
}

// The step's eval_batch failed: every request in it ends with the error.
void Scheduler::fail_batch(const Batch& batch, const Status& evaluated) {
  Event error;
  error.kind = Event::Kind::Error;
  error.error = "evaluation failed: " + evaluated.message();
  std::vector<Active*> failed;
  for (const StepRow& row : batch.rows)
    if (std::find(failed.begin(), failed.end(), row.active) == failed.end()) failed.push_back(row.active);
  for (Active* active : failed) end_request(*active, error);
}

// Each sampling row's next token, accepted into its choice; the requests those rows belong to.
std::vector<Scheduler::Active*> Scheduler::sample_tokens(const Batch& batch) {
  std::vector<Active*> touched;
  uint32_t row_index = 0;
  for (const StepRow& row : batch.rows) {
    if (!row.sample) continue;
    const std::span<float> logits(batch.logits + size_t{row_index++} * batch.vocab, batch.vocab);
    if (std::find(touched.begin(), touched.end(), row.active) == touched.end()) touched.push_back(row.active);
    if (row.active->failed) continue;
    Choice& choice = *row.choice;
    choice.pending.reset();  // evaluated now
    if (choice.constraint) choice.constraint->apply(logits);
    auto token = choice.sampler->sample(logits);
    if (!token.ok()) {
      fail(*row.active, "sampling failed: " + token.message());
      continue;
    }
    if (!row.active->first_token) {
      row.active->first_token = Clock::now();
      if (metrics_)
        metrics_->observe_time_to_first_token(
            std::chrono::duration<double>(*row.active->first_token - row.active->request().arrival).count());
    }
    accept(*row.active, choice, std::move(*token));
  }
  return touched;
}

// Requests that failed or whose every choice finished in this step end now.
void Scheduler::end_completed(const std::vector<Active*>& touched) {
  for (Active* active : touched) {
    if (active->failed) {
      end_request(*active, std::nullopt);  // its error is out already
    } else if (active->unfinished == 0) {
      Event event;
      event.kind = Event::Kind::Done;
      Usage& usage = event.usage;
      usage.prompt_tokens = static_cast<uint32_t>(active->request().prompt.size());
      usage.completion_tokens = active->generated;
      usage.cached_tokens = active->cached_tokens;
      usage.queue_ms = ms_between(active->request().arrival, active->admitted);
      const auto first = active->first_token.value_or(Clock::now());
      usage.prompt_ms = ms_between(active->admitted, first);
      usage.generation_ms = ms_between(first, Clock::now());
      end_request(*active, std::move(event));
    }
  }
}

void Scheduler::accept(Active& active, Choice& choice, SampledToken token) {
  if (std::find(stop_tokens_.begin(), stop_tokens_.end(), token.id) != stop_tokens_.end()) {
    finish_choice(active, choice, "stop", true);
    return;
  }
  if (choice.session->length() >= context_) {  // no position left for it: dropped
    finish_choice(active, choice, "length", true);
    return;
  }
  if (choice.constraint) {
    if (Status allowed = choice.constraint->accept(token.id); !allowed.ok()) {  // the mask allowed it: a bug
      fail(active, "constrained decoding: " + allowed.message());
      return;
    }
  }
  ++choice.generated;
  ++active.generated;
  if (metrics_) metrics_->add_tokens(0, 1);
  Event delta;
  delta.choice = choice.index;
  if (active.request().logprobs) {
    const Tokenizer& tokenizer = engine_->tokenizer();
    TokenReport report{token_bytes(tokenizer, token.id), token.logprob, {}};
    for (const TokenLogprob& alt : token.top) report.top.push_back({token_bytes(tokenizer, alt.id), alt.logprob});
    delta.tokens.push_back(std::move(report));
  }
  auto text = choice.decoder.push(token.id);
  if (!text.ok()) {  // an id the tokenizer does not know: a bug, not user input
    fail(active, "decoding the output: " + text.message());
    return;
  }
  const StopStringMatcher::Output out = choice.matcher.push(*text);
  deliver(active, choice, out.text, delta, false);
  if (!delta.content.empty() || !delta.reasoning.empty() || !delta.tokens.empty())
    active.channel().push(std::move(delta));
  if (out.stopped) {
    finish_choice(active, choice, "stop", false);
  } else if ((choice.constraint && choice.constraint->done()) ||         // the grammar allows nothing more
             (choice.tool_calls && choice.tool_calls->should_stop())) {  // the last call allowed is made
    finish_choice(active, choice, "stop", true);
  } else if (choice.generated >= active.queued.max_tokens) {
    // A constrained answer complete at the limit (the token budget closed it) is not cut off.
    const bool complete = choice.constraint && choice.constraint->accepting();
    finish_choice(active, choice, complete ? "stop" : "length", true);
  } else {
    choice.pending = token.id;
  }
}

// Text out of the stop-string matcher into reasoning, content and tool calls; `last` ends the
// choice's output (whatever the splitter and the parser hold back is final then). Tool calls
// go out as events of their own after the text before them.
void Scheduler::deliver(Active& active, Choice& choice, std::string_view text, Event& delta, bool last) {
  std::string content;
  if (active.request().split_reasoning) {
    ThinkSplitter::Output split = choice.splitter.push(text);
    if (last) {
      ThinkSplitter::Output tail = choice.splitter.finish();
      split.reasoning += tail.reasoning;
      split.content += tail.content;
    }
    delta.reasoning += split.reasoning;
    content = std::move(split.content);
  } else {
    content = text;
  }
  if (!choice.tool_calls) {
    delta.content += content;
    return;
  }
  ToolCallParser::Output parsed = choice.tool_calls->push(content);
  if (last) {
    ToolCallParser::Output tail = choice.tool_calls->finish();
    parsed.content += tail.content;
    parsed.calls.insert(parsed.calls.end(), tail.calls.begin(), tail.calls.end());
  }
  delta.content += parsed.content;
  if (parsed.calls.empty()) return;
  if (!delta.content.empty() || !delta.reasoning.empty() || !delta.tokens.empty()) {
    active.channel().push(std::move(delta));
    delta = Event{};
    delta.choice = choice.index;
  }
  for (ToolCallParser::Call& call : parsed.calls) {
    Event header;
    header.choice = choice.index;
    header.tool_call_index = call.index;
    header.tool_call_id = std::move(call.id);
    header.tool_call_name = std::move(call.name);
    active.channel().push(std::move(header));
    Event arguments;
    arguments.choice = choice.index;
    arguments.tool_call_index = call.index;
    arguments.tool_call_arguments = std::move(call.arguments);
    active.channel().push(std::move(arguments));
  }
}

void Scheduler::finish_choice(Active& active, Choice& choice, const char* reason, bool flush) {
  Event tail;
  tail.choice = choice.index;
  if (flush) {
    const StopStringMatcher::Output out = choice.matcher.push(choice.decoder.finish());
    deliver(active, choice, out.text, tail, false);
    if (out.stopped) {
      reason = "stop";
    } else {
      deliver(active, choice, choice.matcher.flush(), tail, false);
    }
  }
  deliver(active, choice, {}, tail, true);
  if (!tail.content.empty() || !tail.reasoning.empty()) active.channel().push(std::move(tail));
  // A choice that made tool calls and ended by itself (not cut off by length) reports them.
  if (choice.tool_calls && choice.tool_calls->call_count() > 0 && std::string_view(reason) == "stop")
    reason = "tool_calls";
  Event finish;
  finish.kind = Event::Kind::Finish;
  finish.choice = choice.index;
  finish.finish_reason = reason;
  active.channel().push(std::move(finish));
  choice.finished = true;
  choice.pending.reset();
  // Free the choice's slot and blocks now: its full blocks go to the pool for reuse.
  choice.session.reset();
  --active.unfinished;
  --active_choices_;
  const uint32_t released = std::min(active.reserved_blocks, active.queued.private_blocks);
  active.reserved_blocks -= released;
  reserved_blocks_ -= released;
}

void Scheduler::fail(Active& active, const std::string& message) {
  Event error;
  error.kind = Event::Kind::Error;
  error.error = message;
  active.channel().push(std::move(error));
  active.failed = true;
}

void Scheduler::end_request(Active& active, std::optional<Event> final_event) {
  for (auto& choice : active.choices) {
    if (!choice->finished) --active_choices_;
    choice->finished = true;
    choice->session.reset();
  }
  reserved_blocks_ -= active.reserved_blocks;
  active.reserved_blocks = 0;
  if (final_event) active.channel().push(std::move(*final_event));
  active_.remove_if([&](const std::unique_ptr<Active>& a) { return a.get() == &active; });
}

void Scheduler::publish_gauges(size_t queue_depth) {
  if (!metrics_) return;
  const PoolStats pool = engine_->pool_stats();
  SchedulerGauges gauges;
  gauges.queue_depth = static_cast<uint32_t>(queue_depth);
  gauges.batch_occupancy = active_choices_;
  gauges.batch_capacity = options_.max_batch;
  gauges.kv_blocks_used = pool.total_blocks - pool.free_blocks - pool.unreferenced_blocks;
  gauges.kv_blocks_total = pool.total_blocks;
  metrics_->set_gauges(gauges);
}

}  // namespace kipp::server
