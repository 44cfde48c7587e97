# kipp logits on the tiny GGUF (real Qwen3 tokenizer, vocabulary 151936; random weights, so
# the values are not checked, only the format, the sizes and the agreement of the inputs).
set(KIPP_TINY_VOCAB_BYTES 607744)  # 151936 float32
set(KIPP_LOGITS_OUT ${CMAKE_CURRENT_BINARY_DIR}/cli_logits)
file(MAKE_DIRECTORY ${KIPP_LOGITS_OUT})
# One "  id value "text"" line (CMake regexes have no {n} repetition).
set(logit_line "  [0-9]+ -?[0-9]+\\.[0-9]+ \"[^\n]*\"\n")

add_test(NAME cli_logits COMMAND $<TARGET_FILE:kipp> logits -m ${KIPP_TINY_GGUF} --prompt "Hello world")
set_tests_properties(cli_logits PROPERTIES PASS_REGULAR_EXPRESSION
                     "^tokens: 2\nargmax: [0-9]+ -?[0-9]+\\.[0-9]+ \"[^\n]*\"\ntop 5 \\(id value text\\):\n${logit_line}${logit_line}${logit_line}${logit_line}${logit_line}$")
# The argmax line repeats the first of the top 5.
add_test(NAME cli_logits_argmax_is_top1
         COMMAND sh -c "out=$(\"$0\" logits -m \"$1\" --no-verify --prompt \"Hello world\") && argmax=$(echo \"$out\" | sed -n 's/^argmax: //p') && top1=$(echo \"$out\" | sed -n '4s/^  //p') && [ -n \"$argmax\" ] && [ \"$argmax\" = \"$top1\" ] && echo agree"
                 $<TARGET_FILE:kipp> ${KIPP_TINY_GGUF})
set_tests_properties(cli_logits_argmax_is_top1 PROPERTIES PASS_REGULAR_EXPRESSION "^agree\n$")
add_test(NAME cli_logits_all
         COMMAND $<TARGET_FILE:kipp> logits -m ${KIPP_TINY_GGUF} --no-verify --ids 9707,1879 --all)
set_tests_properties(cli_logits_all PROPERTIES PASS_REGULAR_EXPRESSION
                     "argmax per position \\(position token: id value text\\):\n  0 9707: [0-9]+ [^\n]*\n  1 1879: [0-9]+ [^\n]*\n$")

# -o: one vocabulary row of float32, or one per position with --all.
add_test(NAME cli_logits_output_size
         COMMAND sh -c "\"$0\" logits -m \"$1\" --no-verify --prompt \"Hello world\" -o \"$2\" >/dev/null && stat -c %s \"$2\""
                 $<TARGET_FILE:kipp> ${KIPP_TINY_GGUF} ${KIPP_LOGITS_OUT}/last.f32)
set_tests_properties(cli_logits_output_size PROPERTIES PASS_REGULAR_EXPRESSION "^${KIPP_TINY_VOCAB_BYTES}\n$")
math(EXPR three_rows_bytes "3 * ${KIPP_TINY_VOCAB_BYTES}")
add_test(NAME cli_logits_all_output_size
         COMMAND sh -c "\"$0\" logits -m \"$1\" --no-verify --prompt \"Hello world!\" --all -o \"$2\" >/dev/null && stat -c %s \"$2\""
                 $<TARGET_FILE:kipp> ${KIPP_TINY_GGUF} ${KIPP_LOGITS_OUT}/all.f32)
set_tests_properties(cli_logits_all_output_size PROPERTIES PASS_REGULAR_EXPRESSION "^${three_rows_bytes}\n$")

# --prompt (special tokens parsed) and --ids of its tokens: the same output and the same file.
add_test(NAME cli_logits_ids_equal_prompt
         COMMAND sh -c "a=$(\"$0\" logits -m \"$1\" --no-verify --all --prompt \"$2\" -o \"$4/prompt.f32\" | grep -v ^wrote) && b=$(\"$0\" logits -m \"$1\" --no-verify --all --ids \"$3\" -o \"$4/ids.f32\" | grep -v ^wrote) && [ \"$a\" = \"$b\" ] && \"$5\" -E compare_files \"$4/prompt.f32\" \"$4/ids.f32\" && echo identical"
                 $<TARGET_FILE:kipp> ${KIPP_TINY_GGUF} "<|im_start|>user\nHello world" "151644,872,198,9707,1879"
                 ${KIPP_LOGITS_OUT} ${CMAKE_COMMAND})
set_tests_properties(cli_logits_ids_equal_prompt PROPERTIES PASS_REGULAR_EXPRESSION "^identical\n$")

# Errors: one line on stderr naming the problem.
add_test(NAME cli_logits_empty_prompt COMMAND $<TARGET_FILE:kipp> logits -m ${KIPP_TINY_GGUF} --prompt "")
set_tests_properties(cli_logits_empty_prompt PROPERTIES PASS_REGULAR_EXPRESSION "^kipp: error: --prompt is empty")
add_test(NAME cli_logits_bad_id COMMAND $<TARGET_FILE:kipp> logits -m ${KIPP_TINY_GGUF} --ids 9707,x1)
set_tests_properties(cli_logits_bad_id PROPERTIES PASS_REGULAR_EXPRESSION "^kipp: error: --ids: 'x1' is not a token id")
add_test(NAME cli_logits_unknown_id COMMAND $<TARGET_FILE:kipp> logits -m ${KIPP_TINY_GGUF} --ids 9707,151936)
set_tests_properties(cli_logits_unknown_id PROPERTIES PASS_REGULAR_EXPRESSION
                     "^kipp: error: --ids: unknown token id 151936 \\(the vocabulary has 151936 tokens\\)\n$")
add_test(NAME cli_logits_no_input COMMAND $<TARGET_FILE:kipp> logits -m ${KIPP_TINY_GGUF})
set_tests_properties(cli_logits_no_input PROPERTIES PASS_REGULAR_EXPRESSION "^kipp: error: give exactly one of --prompt and --ids\n$")
foreach(test cli_logits cli_logits_argmax_is_top1 cli_logits_all cli_logits_output_size cli_logits_all_output_size
        cli_logits_ids_equal_prompt cli_logits_empty_prompt cli_logits_bad_id cli_logits_unknown_id cli_logits_no_input)
  set_tests_properties(${test} PROPERTIES FIXTURES_REQUIRED gguf_tiny_bf16 TIMEOUT 120)
endforeach()

add_test(NAME cli_logits_missing_model COMMAND $<TARGET_FILE:kipp> logits -m ${KIPP_MODELS}/no-such-model.gguf --prompt hi)
set_tests_properties(cli_logits_missing_model PROPERTIES TIMEOUT 60
                     PASS_REGULAR_EXPRESSION "^kipp: error: cannot open .*no-such-model.gguf: No such file or directory\n$")

# Done-when of the engine issue: `kipp logits` prints the reference's argmax on both synthetic
# models (the 0.6b one has Qwen3-0.6B's exact shapes).
foreach(model tiny qwen3-0.6b)
  set(fixture ${KIPP_HF_FIXTURE_${model}})
  set(KIPP_DEEP_NMSE_tiny 5e-5)
  set(KIPP_DEEP_NMSE_qwen3-0.6b 2e-3)
  add_test(NAME cli_logits_vs_reference_${model}
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/logits_cli_vs_reference.sh $<TARGET_FILE:kipp>
                   ${KIPP_MODELS}/${model}-bf16.gguf ${KIPP_MODELS}/${model}-hf ${CMAKE_SOURCE_DIR}/tools/torch_reference.py
                   ${CMAKE_BINARY_DIR}/gates/cli-${model} ${KIPP_DEEP_NMSE_${model}})
  set_tests_properties(cli_logits_vs_reference_${model} PROPERTIES FIXTURES_REQUIRED "${fixture};gguf_${model}_bf16"
                       TIMEOUT 600 RESOURCE_LOCK big_memory PASS_REGULAR_EXPRESSION "PASS")
  # The reference kernel table multiplies FP32 activations, PyTorch's too: NMSE 1e-5 on both.
  add_test(NAME cli_logits_vs_reference_${model}_reference_kernels
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/logits_cli_vs_reference.sh $<TARGET_FILE:kipp>
                   ${KIPP_MODELS}/${model}-bf16.gguf ${KIPP_MODELS}/${model}-hf ${CMAKE_SOURCE_DIR}/tools/torch_reference.py
                   ${CMAKE_BINARY_DIR}/gates/cli-${model}-reference-kernels 1e-5 fp32)
  set_tests_properties(cli_logits_vs_reference_${model}_reference_kernels PROPERTIES
                       FIXTURES_REQUIRED "${fixture};gguf_${model}_bf16" ENVIRONMENT KIPP_KERNELS=reference
                       TIMEOUT 600 RESOURCE_LOCK big_memory PASS_REGULAR_EXPRESSION "PASS")
endforeach()
