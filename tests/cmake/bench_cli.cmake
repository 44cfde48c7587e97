# kipp bench on the tiny model, BF16 and Q8_0 (whose prefill peak is the int8 one): a short run
# whose JSON is checked against figures recomputed from the model's config
# (tests/bench/check_bench_json.py), its help, and the errors.
foreach(quant bf16 q8_0)
  set(suffix "")
  if(NOT quant STREQUAL "bf16")
    set(suffix "_${quant}")
  endif()
  set(json ${CMAKE_BINARY_DIR}/bench_cli_tiny_${quant}.json)
  add_test(NAME bench_cli_tiny${suffix}
           COMMAND $<TARGET_FILE:kipp> bench -m ${KIPP_MODELS}/tiny-${quant}.gguf --prompt-len 8,16 --gen 4 --repeats 1
                   --batch 2 --json ${json})
  set_tests_properties(bench_cli_tiny${suffix} PROPERTIES FIXTURES_REQUIRED gguf_tiny_${quant}
                       FIXTURES_SETUP bench_tiny_json_${quant} TIMEOUT 300
                       PASS_REGULAR_EXPRESSION "decode 4 after 8.*batch 2 x 4")
  add_test(NAME bench_cli_tiny${suffix}_json
           COMMAND ${KIPP_PY} ${CMAKE_CURRENT_SOURCE_DIR}/bench/check_bench_json.py ${json}
                   --prompt-len 8,16 --gen 4 --batch 2)
  set_tests_properties(bench_cli_tiny${suffix}_json PROPERTIES FIXTURES_REQUIRED bench_tiny_json_${quant} TIMEOUT 60
                       PASS_REGULAR_EXPRESSION "^PASS\n$")
endforeach()

add_test(NAME help_bench COMMAND $<TARGET_FILE:kipp> bench --help)
set_tests_properties(help_bench PROPERTIES PASS_REGULAR_EXPRESSION "Usage:.*Options:.*--prompt-len.*docs/BENCH.md")

# Errors are one line and exit status 2 (echoed, since a pass expression ignores the status).
add_test(NAME bench_cli_bad_prompt_len
         COMMAND sh -c "\"$0\" bench -m \"$1\" --prompt-len 8,x 2>&1; echo \"exit=$?\"" $<TARGET_FILE:kipp> ${KIPP_TINY_GGUF})
set_tests_properties(bench_cli_bad_prompt_len PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION
                     "^kipp: error: --prompt-len '8,x': expected token counts of at least 1 separated by commas, e.g. 64,512\nexit=2\n$")
add_test(NAME bench_cli_prompt_over_context
         COMMAND sh -c "\"$0\" bench -m \"$1\" --prompt-len 64,50000 --no-verify 2>&1; echo \"exit=$?\"" $<TARGET_FILE:kipp> ${KIPP_TINY_GGUF})
set_tests_properties(bench_cli_prompt_over_context PROPERTIES FIXTURES_REQUIRED gguf_tiny_bf16 TIMEOUT 60 PASS_REGULAR_EXPRESSION
                     "^kipp: error: --prompt-len 50000 exceeds the model's context length 40960\nexit=2\n$")
add_test(NAME bench_cli_missing_model
         COMMAND sh -c "\"$0\" bench -m \"$1\" 2>&1; echo \"exit=$?\"" $<TARGET_FILE:kipp> ${KIPP_MODELS}/no-such-model.gguf)
set_tests_properties(bench_cli_missing_model PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION
                     "^kipp: error: .*no-such-model.gguf.*\nexit=2\n$")

# bench/kernel_bench: a small run prints a result per type and row count; bad options are one
# clear error. (Built with the benchmarks, which the test build includes by default.)
if(KIPP_BUILD_BENCH)
  add_test(NAME kernel_bench_small
           COMMAND kernel_bench --types bf16,q8_0,affine4 --rows 1,8 --outputs 64 --cols 256 --mib 4 --passes 1)
  # Each run carries the read bandwidth of the probe passes taken between its passes.
  set_tests_properties(kernel_bench_small PROPERTIES TIMEOUT 120 PASS_REGULAR_EXPRESSION
                       "\"bandwidth_alongside_gb_per_second\": [1-9][0-9.e+]*,.*\"of_bandwidth_alongside\".*\"type\": \"affine4\".*\"weight_gb_per_second\"")
  # --laps: weights that fit the caches, read several times per pass; the JSON says how often.
  add_test(NAME kernel_bench_laps
           COMMAND kernel_bench --types q8_0 --rows 2 --outputs 64 --cols 256 --mib 1 --laps 3 --passes 1)
  set_tests_properties(kernel_bench_laps PROPERTIES TIMEOUT 120 PASS_REGULAR_EXPRESSION
                       "\"type\": \"q8_0\".*\"laps\": 3,.*\"weight_mib\": 1")
  add_test(NAME kernel_bench_bad_laps
           COMMAND sh -c "\"$0\" --laps 0 2>&1; echo \"exit=$?\"" $<TARGET_FILE:kernel_bench>)
  set_tests_properties(kernel_bench_bad_laps PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION
                       "^kernel_bench: --laps must be a positive whole number, got '0'\nexit=1\n$")
  add_test(NAME kernel_bench_bad_type
           COMMAND sh -c "\"$0\" --types q5 2>&1; echo \"exit=$?\"" $<TARGET_FILE:kernel_bench>)
  set_tests_properties(kernel_bench_bad_type PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION
                       "^kernel_bench: unknown weight type 'q5' \\(bf16, q8_0 or affine4\\)\nexit=1\n$")
  # bench/attention_bench the same way.
  add_test(NAME attention_bench_small
           COMMAND attention_bench --context 40 --sequences 1,3 --layers 2 --passes 1)
  add_test(NAME attention_bench_prefill_tile
           COMMAND attention_bench --rows 32 --context 40,100 --sequences 2 --layers 2 --passes 1)
  set_tests_properties(attention_bench_prefill_tile PROPERTIES TIMEOUT 120 PASS_REGULAR_EXPRESSION
                       "\"context\": 100.*\"gflop_per_second\".*\"query_rows\": 32")
  set_tests_properties(attention_bench_small PROPERTIES TIMEOUT 120 PASS_REGULAR_EXPRESSION
                       "\"bandwidth_alongside_gb_per_second\": [1-9][0-9.e+]*,.*\"context\": 40.*\"kv_gb_per_second\".*\"sequences\": 3")
  add_test(NAME attention_bench_bad_context
           COMMAND sh -c "\"$0\" --context x 2>&1; echo \"exit=$?\"" $<TARGET_FILE:attention_bench>)
  set_tests_properties(attention_bench_bad_context PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION
                       "^attention_bench: --context must be a positive whole number, got 'x'\nexit=1\n$")
endif()

# --kernels lists what this CPU runs without a model: the reference and portable tables always,
# the one KIPP_KERNELS names marked in use, and a name no table has reported.
add_test(NAME bench_cli_kernels_named COMMAND $<TARGET_FILE:kipp> bench --kernels)
set_tests_properties(bench_cli_kernels_named PROPERTIES TIMEOUT 60 ENVIRONMENT KIPP_KERNELS=portable
                     PASS_REGULAR_EXPRESSION "^kernel tables this CPU runs \\(best last\\):\n  reference\n  portable +<- in use\n")
add_test(NAME bench_cli_kernels_unknown COMMAND $<TARGET_FILE:kipp> bench --kernels)
set_tests_properties(bench_cli_kernels_unknown PROPERTIES TIMEOUT 60 ENVIRONMENT KIPP_KERNELS=no-such-table
                     PASS_REGULAR_EXPRESSION "<- in use\nKIPP_KERNELS=no-such-table names no table this CPU runs; the best one is used\n$")
