#include "train/samples.h"

#include <vector>

#include "sampling/sampler.h"

namespace kipp::train {

Expected<std::string> generate_sample(TrainingModel& model, std::span<const float> params,
                                      const data::TrainingTokenizer& tokenizer, const std::string& prompt,
                                      const SampleOptions& options) {
  KIPP_ASSIGN_OR_RETURN(std::vector<uint32_t> prompt_ids, tokenizer.tokenizer.encode(prompt, SpecialTokens::Parse));
  // An empty prompt starts after an end token, as a new document does in the packed data.
  std::vector<int32_t> ids{int32_t(tokenizer.eos_id)};
  if (!prompt_ids.empty()) ids.assign(prompt_ids.begin(), prompt_ids.end());
  if (ids.size() >= options.max_length)
    return make_error("sample prompt is " + std::to_string(ids.size()) + " tokens, too long for train.seq_len " +
                      std::to_string(options.max_length));
  SamplingParams sampling;
  sampling.temperature = float(options.temperature);
  sampling.seed = options.seed;
  const uint32_t vocab = tokenizer.vocab_size;
  KIPP_ASSIGN_OR_RETURN(Sampler sampler, Sampler::create(sampling, vocab));
  sampler.observe(prompt_ids);
  std::vector<uint32_t> generated;
  std::vector<float> logits;
  // The model's vocabulary may be padded beyond the tokenizer's; sample among real ids only.
  const size_t model_vocab = options.model_vocab_size;
  if (model_vocab < vocab) return make_error("sample: the model has fewer logits than the tokenizer has ids");
  while (generated.size() < options.max_tokens && ids.size() < options.max_length) {
    logits.resize(ids.size() * model_vocab);
    KIPP_RETURN_IF_ERROR(model.logits(params, ids, 1, uint32_t(ids.size()), logits));
    const std::span<const float> last(logits.data() + (ids.size() - 1) * model_vocab, vocab);
    KIPP_ASSIGN_OR_RETURN(SampledToken token, sampler.sample(last));
    // The end token, or a control token such as a chat format's end of turn.
    if (token.id == tokenizer.eos_id || tokenizer.tokenizer.is_special_token(token.id)) break;
    generated.push_back(token.id);
    ids.push_back(int32_t(token.id));
  }
  IncrementalDecoder decoder(tokenizer.tokenizer);
  std::string text;
  for (uint32_t id : generated) {
    KIPP_ASSIGN_OR_RETURN(std::string piece, decoder.push(id));
    text += piece;
  }
  return text + decoder.finish();
}

}  // namespace kipp::train
