# generate tests (see tests/CMakeLists.txt): `kipp generate` on the tiny GGUF (the real Qwen3
# tokenizer, random weights, so the text itself is meaningless; a large --logit-bias makes the
# output predictable where a test needs known text).
set(KIPP_GEN ${KIPP_MODELS}/tiny-bf16.gguf)
set(KIPP_GEN_TESTS)

# The generator's and the drafter's unit tests (also discovered one by one from kipp_unit_tests)
# under a name `ctest -R generate` selects.
add_test(NAME generate_unit_tests
         COMMAND kipp_unit_tests --gtest_filter=GeneratorTest.*:SpeculativeTest.*:PromptLookup.*:DraftGate.*)
set_tests_properties(generate_unit_tests PROPERTIES TIMEOUT 300)

# The speculative gate: prompt-lookup speculative decoding must print exactly what plain greedy
# decoding prints, on copy-heavy prompts (repeated text, a ChatML prompt asking to repeat) and
# on ones where drafts are rare.
set(KIPP_GEN_SPEC_PROMPTS
    "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog. The quick brown"
    "<|im_start|>user\nRepeat this list: apples, pears, plums, apples, pears, plums, apples<|im_end|>\n<|im_start|>assistant\n"
    "def add(a, b):\n    return a + b\n\ndef add(a, b):\n    return a + b\n\ndef"
    "Hello"
    "Once upon a time")
set(index 0)
foreach(prompt IN LISTS KIPP_GEN_SPEC_PROMPTS)
  foreach(draft 8 3)
    set(name generate_spec_identical_${index}_draft${draft})
    add_test(NAME ${name}
             COMMAND sh -c "a=$(\"$0\" generate -m \"$1\" --no-verify -p \"$2\" --temp 0 --max-tokens 48 2>/dev/null) && b=$(\"$0\" generate -m \"$1\" --no-verify -p \"$2\" --spec --draft $3 --max-tokens 48 2>/dev/null) && [ -n \"$a\" ] && [ \"$a\" = \"$b\" ] && echo identical"
                     $<TARGET_FILE:kipp> ${KIPP_GEN} "${prompt}" ${draft})
    set_tests_properties(${name} PROPERTIES PASS_REGULAR_EXPRESSION "^identical\n$")
    list(APPEND KIPP_GEN_TESTS ${name})
  endforeach()
  math(EXPR index "${index} + 1")
endforeach()
# Token for token, logprobs included: the JSON token lists are equal.
add_test(NAME generate_spec_identical_json
         COMMAND sh -c "a=$(\"$0\" generate -m \"$1\" --no-verify -p \"$2\" --temp 0 --max-tokens 40 --logprobs 2 --json | \"$3\" -c 'import json,sys; d=json.load(sys.stdin); print(d[\"tokens\"], d[\"finish_reason\"])') && b=$(\"$0\" generate -m \"$1\" --no-verify -p \"$2\" --spec --max-tokens 40 --logprobs 2 --json | \"$3\" -c 'import json,sys; d=json.load(sys.stdin); print(d[\"tokens\"], d[\"finish_reason\"], d[\"speculative\"][\"drafted_tokens\"] > 0)') && [ \"$a True\" = \"$b\" ] && echo identical"
                 $<TARGET_FILE:kipp> ${KIPP_GEN} "a b c d e f g h a b c d e f g h a b c d" ${KIPP_PY})
set_tests_properties(generate_spec_identical_json PROPERTIES PASS_REGULAR_EXPRESSION "^identical\n$")
list(APPEND KIPP_GEN_TESTS generate_spec_identical_json)
# A biased model repeats "Hello": every draft is accepted and fewer steps than tokens are needed.
add_test(NAME generate_spec_stats
         COMMAND $<TARGET_FILE:kipp> generate -m ${KIPP_GEN} --no-verify -p Hi --logit-bias 9707=100 --spec --max-tokens 20)
set_tests_properties(generate_spec_stats PROPERTIES PASS_REGULAR_EXPRESSION
                     "^HelloHelloHelloHelloHelloHelloHelloHelloHelloHelloHelloHelloHelloHelloHelloHelloHelloHelloHelloHello\nprompt: 1 tokens, [0-9.]+ s \\([0-9.]+ tokens/s\\)\ngenerated: 20 tokens, [0-9.]+ s \\([0-9.]+ tokens/s\\), [1-9] decode steps\nfinish: length\nspeculative: [0-9]+ drafted, [0-9]+ accepted \\(100\\.0%\\), [0-9]+ steps with a draft\n$")
list(APPEND KIPP_GEN_TESTS generate_spec_stats)

# Output format: text on stdout, statistics on stderr.
add_test(NAME generate_stats_format
         COMMAND $<TARGET_FILE:kipp> generate -m ${KIPP_GEN} --no-verify -p Hi --logit-bias 9707=100 --max-tokens 3)
set_tests_properties(generate_stats_format PROPERTIES PASS_REGULAR_EXPRESSION
                     "^HelloHelloHello\nprompt: 1 tokens, [0-9.]+ s \\([0-9.]+ tokens/s\\)\ngenerated: 3 tokens, [0-9.]+ s \\([0-9.]+ tokens/s\\), 3 decode steps\nfinish: length\n$")
add_test(NAME generate_stdout_is_the_text
         COMMAND sh -c "\"$0\" generate -m \"$1\" --no-verify -p Hi --logit-bias 9707=100 --max-tokens 3 2>/dev/null; echo '|'"
                 $<TARGET_FILE:kipp> ${KIPP_GEN})
set_tests_properties(generate_stdout_is_the_text PROPERTIES PASS_REGULAR_EXPRESSION "^HelloHelloHello\\|\n$")
add_test(NAME generate_json
         COMMAND $<TARGET_FILE:kipp> generate -m ${KIPP_GEN} --no-verify -p Hi --logit-bias 9707=100 --max-tokens 2 --json)
set_tests_properties(generate_json PROPERTIES PASS_REGULAR_EXPRESSION
                     "^{\"finish_reason\":\"length\",\"stop_token\":null,\"text\":\"HelloHello\",\"timings\":{[^}]*},\"tokens\":\\[{\"id\":9707,\"text\":\"Hello\"},{\"id\":9707,\"text\":\"Hello\"}\\],\"usage\":{\"completion_tokens\":2,\"prompt_tokens\":1,\"total_tokens\":3}}\n$")
add_test(NAME generate_json_logprobs
         COMMAND $<TARGET_FILE:kipp> generate -m ${KIPP_GEN} --no-verify -p Hi --temp 0 --max-tokens 1 --logprobs 2 --json)
set_tests_properties(generate_json_logprobs PROPERTIES PASS_REGULAR_EXPRESSION
                     "\"tokens\":\\[{\"id\":[0-9]+,\"logprob\":-[0-9.e-]+,\"text\":\"[^\"]*\",\"top_logprobs\":\\[{\"id\":[0-9]+,\"logprob\":-[0-9.e-]+,\"text\":\"[^\"]*\"},{\"id\":[0-9]+,\"logprob\":-[0-9.e-]+,\"text\":\"[^\"]*\"}\\]}\\]")
add_test(NAME generate_logprobs_table
         COMMAND $<TARGET_FILE:kipp> generate -m ${KIPP_GEN} --no-verify -p Hi --logit-bias 9707=100 --max-tokens 1 --logprobs 1)
set_tests_properties(generate_logprobs_table PROPERTIES PASS_REGULAR_EXPRESSION
                     "logprobs \\(id logprob text; alternatives\\):\n  9707 -?[0-9.]+ \"Hello\"  [0-9]+ -?[0-9.]+ \"[^\n]*\"\n")
list(APPEND KIPP_GEN_TESTS generate_stats_format generate_stdout_is_the_text generate_json generate_json_logprobs
     generate_logprobs_table)

# Finishing: the model's stop tokens (<|im_end|>, <|endoftext|>) end generation unprinted; stop
# strings match across tokens; a full context; the token budget.
foreach(stop_token 151645 151643)
  add_test(NAME generate_default_stop_token_${stop_token}
           COMMAND $<TARGET_FILE:kipp> generate -m ${KIPP_GEN} --no-verify -p Hi --logit-bias ${stop_token}=100 --json)
  set_tests_properties(generate_default_stop_token_${stop_token} PROPERTIES PASS_REGULAR_EXPRESSION
                       "^{\"finish_reason\":\"stop_token\",\"stop_token\":${stop_token},\"text\":\"\",.*\"completion_tokens\":0,")
  list(APPEND KIPP_GEN_TESTS generate_default_stop_token_${stop_token})
endforeach()
add_test(NAME generate_stop_string
         COMMAND $<TARGET_FILE:kipp> generate -m ${KIPP_GEN} --no-verify -p Hi --logit-bias 9707=100 --stop xyz --stop loHe)
set_tests_properties(generate_stop_string PROPERTIES PASS_REGULAR_EXPRESSION
                     "^Hel\nprompt: 1 tokens[^\n]*\ngenerated: 2 tokens[^\n]*\nfinish: stop_string\n$")
add_test(NAME generate_context_full
         COMMAND $<TARGET_FILE:kipp> generate -m ${KIPP_GEN} --no-verify -p Hi --logit-bias 9707=100 --ctx 4 --max-tokens 10)
set_tests_properties(generate_context_full PROPERTIES PASS_REGULAR_EXPRESSION
                     "^HelloHelloHello\nprompt: 1 tokens[^\n]*\ngenerated: 3 tokens[^\n]*\nfinish: context_full\n$")
# The default is sampling (temperature 0.7) with seed 0: the same command prints the same text.
add_test(NAME generate_seed_reproducible
         COMMAND sh -c "a=$(\"$0\" generate -m \"$1\" --no-verify -p Hello --max-tokens 16 2>/dev/null) && b=$(\"$0\" generate -m \"$1\" --no-verify -p Hello --max-tokens 16 2>/dev/null) && c=$(\"$0\" generate -m \"$1\" --no-verify -p Hello --max-tokens 16 --seed 5 --temp 1.5 --top-k 0 --top-p 1 2>/dev/null) && [ \"$a\" = \"$b\" ] && [ \"$a\" != \"$c\" ] && echo reproducible"
                 $<TARGET_FILE:kipp> ${KIPP_GEN})
set_tests_properties(generate_seed_reproducible PROPERTIES PASS_REGULAR_EXPRESSION "^reproducible\n$")
add_test(NAME generate_help COMMAND $<TARGET_FILE:kipp> generate --help)
set_tests_properties(generate_help PROPERTIES PASS_REGULAR_EXPRESSION "--spec.*Defaults .*--temp 0.7 --top-k 20 --top-p 0.8")
list(APPEND KIPP_GEN_TESTS generate_stop_string generate_context_full generate_seed_reproducible)

# Errors: one line on stderr naming the problem.
function(kipp_generate_error name regex)
  add_test(NAME generate_error_${name} COMMAND $<TARGET_FILE:kipp> generate -m ${KIPP_GEN} --no-verify ${ARGN})
  set_tests_properties(generate_error_${name} PROPERTIES PASS_REGULAR_EXPRESSION "^kipp: error: ${regex}\n$"
                       FIXTURES_REQUIRED gguf_tiny_bf16 TIMEOUT 120)
endfunction()
add_test(NAME generate_error_empty_prompt COMMAND $<TARGET_FILE:kipp> generate -m ${KIPP_GEN} --no-verify -p "")
set_tests_properties(generate_error_empty_prompt PROPERTIES
                     PASS_REGULAR_EXPRESSION "^kipp: error: --prompt is empty: there is nothing to continue from\n$"
                     FIXTURES_REQUIRED gguf_tiny_bf16 TIMEOUT 120)
kipp_generate_error(spec_sampling "--spec is greedy only: it needs --temp 0 \\(or no --temp\\), found --temp 0.7"
                    -p Hi --spec --temp 0.7)
kipp_generate_error(draft_without_spec "--draft needs --spec" -p Hi --draft 4)
kipp_generate_error(bad_logit_bias "--logit-bias '9707': expected ID=BIAS, e.g. 9707=-5" -p Hi --logit-bias 9707)
kipp_generate_error(logit_bias_out_of_range "logit_bias: token id 151936 is outside the vocabulary[^\n]*"
                    -p Hi --logit-bias 151936=1)
kipp_generate_error(prompt_over_ctx "the prompt has 2 tokens, more than the context of 1 \\(--ctx\\)" -p "Hello world" --ctx 1)
kipp_generate_error(ctx_over_model "--ctx 100000 exceeds the model's context length 40960" -p Hi --ctx 100000)
kipp_generate_error(bad_top_p "top_p: expected a value in \\(0, 1\\], found 0" -p Hi --top-p 0)
add_test(NAME generate_error_missing_model COMMAND $<TARGET_FILE:kipp> generate -m ${KIPP_MODELS}/no-such-model.gguf -p Hi)
set_tests_properties(generate_error_missing_model PROPERTIES PASS_REGULAR_EXPRESSION "^kipp: error: .*no-such-model.gguf"
                     TIMEOUT 60)

foreach(test ${KIPP_GEN_TESTS})
  set_tests_properties(${test} PROPERTIES FIXTURES_REQUIRED gguf_tiny_bf16 TIMEOUT 300)
endforeach()

# Constrained decoding from the command line: --json-schema outputs validated by ajv, --json-object
# closed in time by the token budget, --grammar (GBNF) against a regular expression, bad inputs.
add_test(NAME generate_json_schema_cli
         COMMAND node ${CMAKE_CURRENT_SOURCE_DIR}/generate/json_schema_cli.mjs $<TARGET_FILE:kipp> ${KIPP_GEN})
set_tests_properties(generate_json_schema_cli PROPERTIES FIXTURES_REQUIRED "gguf_tiny_bf16;agent_clients_npm" TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "json_schema_cli: all [0-9]+ checks passed" FAIL_REGULAR_EXPRESSION "FAIL: ")
