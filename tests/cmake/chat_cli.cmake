# chat_cli tests (see tests/CMakeLists.txt): `kipp chat` on the tiny GGUF (the real Qwen3 chat
# template and tokenizer, random weights: answers are gibberish, so greedy and 8 tokens long).
# Piped stdin: every line is a user turn or a command, no prompt is printed.
set(KIPP_CHAT_OUT ${CMAKE_CURRENT_BINARY_DIR}/chat_cli)
file(MAKE_DIRECTORY ${KIPP_CHAT_OUT})
set(KIPP_CHAT_TESTS)

# kipp_chat_test(NAME REGEX LINES line... [FLAGS flag...]): `kipp chat` (greedy, 8 tokens) with
# the lines on stdin and the extra flags; passes when REGEX matches the output.
function(kipp_chat_test name regex)
  cmake_parse_arguments(PARSE_ARGV 2 chat "" "" "LINES;FLAGS")
  string(JOIN " " flags ${chat_FLAGS})  # words without spaces
  add_test(NAME ${name}
           COMMAND sh -c "kipp=$0; model=$1; flags=$2; shift 2; printf '%s\\n' \"$@\" | \"$kipp\" chat -m \"$model\" --no-verify --temp 0 --max-tokens 8 $flags 2>&1"
                   $<TARGET_FILE:kipp> ${KIPP_TINY_GGUF} "${flags}" ${chat_LINES})
  set_tests_properties(${name} PROPERTIES PASS_REGULAR_EXPRESSION "${regex}" FIXTURES_REQUIRED gguf_tiny_bf16 TIMEOUT 120)
endfunction()

# One turn: the prompt is the whole rendering (<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n,
# 9 tokens), none of it cached; context = prompt + generated + the closing <|im_end|>\n.
kipp_chat_test(chat_cli_one_turn
  "^[^\n]*\n(\\[stopped at --max-tokens 8\\]\n)?context: [0-9]+ of 8192 tokens \\(2 messages\\)\nlast turn: 9 prompt tokens evaluated \\(0 reused from the cache\\), [0-9]+ generated"
  LINES "Hello" "/stats")

# Two turns: the second evaluates only its new tokens. Its reused prefix covers at least the
# whole first prompt, and the context is exactly reused + evaluated + generated + 2 (<|im_end|>\n).
add_test(NAME chat_cli_two_turns_reuse_cache
         COMMAND sh -c "out=$(printf '%s\\n' Hello /stats 'How are you?' /stats | \"$0\" chat -m \"$1\" --no-verify --temp 0 --max-tokens 8) || exit 1
echo \"$out\"
echo \"$out\" | awk '
  /^context: / { context[++c] = $2 + 0 }
  /^last turn: / { prompt[++t] = $3 + 0; reused[t] = substr($7, 2) + 0; generated[t] = $12 + 0 }
  END {
    if (c != 2 || t != 2) { print \"FAIL: expected two /stats outputs\"; exit 1 }
    if (reused[1] != 0 || context[1] != prompt[1] + generated[1] + 2) { print \"FAIL: first turn\"; exit 1 }
    if (reused[2] < prompt[1]) { print \"FAIL: the first prompt was not reused\"; exit 1 }
    if (context[2] != reused[2] + prompt[2] + generated[2] + 2) { print \"FAIL: context is not reused + new tokens\"; exit 1 }
    if (context[2] <= context[1]) { print \"FAIL: the context did not grow\"; exit 1 }
    print \"reuse ok: turn 2 evaluated \" prompt[2] \" new tokens, reused \" reused[2]
  }'"
                 $<TARGET_FILE:kipp> ${KIPP_TINY_GGUF})
set_tests_properties(chat_cli_two_turns_reuse_cache PROPERTIES PASS_REGULAR_EXPRESSION "reuse ok: turn 2 evaluated"
                     FAIL_REGULAR_EXPRESSION "FAIL")
list(APPEND KIPP_CHAT_TESTS chat_cli_two_turns_reuse_cache)

# --no-think renders Qwen3's empty think block into the generation prompt (4 more tokens).
add_test(NAME chat_cli_no_think
         COMMAND sh -c "printf '%s\\n' Hello /stats | \"$0\" chat -m \"$1\" --no-verify --temp 0 --max-tokens 8 --no-think"
                 $<TARGET_FILE:kipp> ${KIPP_TINY_GGUF})
set_tests_properties(chat_cli_no_think PROPERTIES PASS_REGULAR_EXPRESSION "last turn: 13 prompt tokens evaluated \\(0 reused")
list(APPEND KIPP_CHAT_TESTS chat_cli_no_think)

# /reset empties the conversation and the cache: the next turn reuses nothing.
kipp_chat_test(chat_cli_reset
  "conversation cleared\ncontext: 0 of 8192 tokens \\(0 messages\\)\nlast turn: none\n.*last turn: 9 prompt tokens evaluated \\(0 reused"
  LINES "Hello" "/reset" "/stats" "Hello" "/stats")

# --system and /system: the system prompt is part of the conversation; /system resets it.
kipp_chat_test(chat_cli_system
  "context: [0-9]+ of 8192 tokens \\(3 messages\\)\nlast turn: 1[0-9] prompt tokens.*system prompt set. conversation cleared\ncontext: 0 of 8192 tokens \\(1 messages\\)\n.*system prompt removed. conversation cleared\ncontext: 0 of 8192 tokens \\(0 messages\\)"
  LINES "Hello" "/stats" "/system Be brief." "/stats" "/system" "/stats" FLAGS --system Terse.)

kipp_chat_test(chat_cli_help
  "^commands:\n  /reset .*\n  /system TEXT .*\n  /save FILE .*\n  /load FILE .*\n  /stats .*\n  /help .*\n"
  LINES "/help")
kipp_chat_test(chat_cli_unknown_command
  "^unknown command /frobnicate: /help lists the commands\ncontext: 0 of"
  LINES "/frobnicate now" "/stats")
kipp_chat_test(chat_cli_load_missing
  "kipp: error: /load [^\n]*no-such-chat.json: [^\n]*\ncontext: 0 of 8192"
  LINES "/load ${KIPP_CHAT_OUT}/no-such-chat.json" "/stats")
kipp_chat_test(chat_cli_save_needs_file "kipp: error: /save needs a file name" LINES "/save")
# Ctrl-D (end of input) without a newline on the last line: the line still counts.
add_test(NAME chat_cli_last_line_without_newline
         COMMAND sh -c "printf '/stats' | \"$0\" chat -m \"$1\" --no-verify" $<TARGET_FILE:kipp> ${KIPP_TINY_GGUF})
set_tests_properties(chat_cli_last_line_without_newline PROPERTIES PASS_REGULAR_EXPRESSION "^context: 0 of 8192 tokens")
list(APPEND KIPP_CHAT_TESTS chat_cli_last_line_without_newline)

# /save then /load: the file is OpenAI-style messages; loading it evaluates the whole
# conversation into the cache, and saving again gives the same bytes. (The loaded rendering
# can be longer than the cache before: Qwen3 gives the last assistant turn an empty think block.)
add_test(NAME chat_cli_save_load_roundtrip
         COMMAND sh -c "rm -f \"$2/a.json\" \"$2/b.json\"
out=$(printf '%s\\n' '/system Be brief.' Hello 'How are you?' /stats \"/save $2/a.json\" /reset \"/load $2/a.json\" /stats \"/save $2/b.json\" | \"$0\" chat -m \"$1\" --no-verify --temp 0 --max-tokens 8) || exit 1
echo \"$out\"
before=$(echo \"$out\" | sed -n 's/^context: \\([0-9]*\\) of.*/\\1/p' | head -1)
loaded=$(echo \"$out\" | sed -n 's/^loaded 5 messages from .* (\\([0-9]*\\) tokens in the context)$/\\1/p')
after=$(echo \"$out\" | sed -n 's/^context: \\([0-9]*\\) of.*/\\1/p' | tail -1)
echo \"before=$before loaded=$loaded after=$after\"
[ -n \"$before\" ] && [ -n \"$loaded\" ] && [ \"$loaded\" -ge \"$before\" ] && [ \"$loaded\" = \"$after\" ] || exit 1
cmp \"$2/a.json\" \"$2/b.json\" || exit 1
/usr/bin/python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); r=[x[\"role\"] for x in m]; assert r==[\"system\",\"user\",\"assistant\",\"user\",\"assistant\"], r; assert m[0][\"content\"]==\"Be brief.\" and m[1][\"content\"]==\"Hello\" and m[3][\"content\"]==\"How are you?\"; print(\"messages ok\")' \"$2/a.json\""
                 $<TARGET_FILE:kipp> ${KIPP_TINY_GGUF} ${KIPP_CHAT_OUT})
set_tests_properties(chat_cli_save_load_roundtrip PROPERTIES PASS_REGULAR_EXPRESSION "saved 5 messages.*messages ok")
list(APPEND KIPP_CHAT_TESTS chat_cli_save_load_roundtrip)

# A loaded conversation continues: the next turn reuses the loaded cache.
add_test(NAME chat_cli_load_then_continue
         COMMAND sh -c "printf '%s\\n' Hello \"/save $2/c.json\" /reset \"/load $2/c.json\" 'And then?' /stats | \"$0\" chat -m \"$1\" --no-verify --temp 0 --max-tokens 8"
                 $<TARGET_FILE:kipp> ${KIPP_TINY_GGUF} ${KIPP_CHAT_OUT})
set_tests_properties(chat_cli_load_then_continue PROPERTIES PASS_REGULAR_EXPRESSION
                     "loaded 2 messages.*last turn: [0-9]+ prompt tokens evaluated \\([1-9][0-9]* reused from the cache\\)")
list(APPEND KIPP_CHAT_TESTS chat_cli_load_then_continue)

# Earlier turns' reasoning leaves the rendering (Qwen3 template): a loaded conversation whose
# last answer has reasoning renders it while it is the last turn, not once a user turn follows.
# The cache is truncated where the renderings part, and only the rest is evaluated.
add_test(NAME chat_cli_reasoning_dropped_from_cache
         COMMAND sh -c "printf '%s' '[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":\"Hello!\",\"reasoning_content\":\"The user greets me.\"}]' > \"$2/reasoning.json\" || exit 1
out=$(printf '%s\\n' \"/load $2/reasoning.json\" 'Next question' /stats | \"$0\" chat -m \"$1\" --no-verify --temp 0 --max-tokens 8) || exit 1
echo \"$out\"
echo \"$out\" | awk '
  /^loaded 2 messages/ { loaded = substr($(NF - 4), 2) + 0 }
  /^context: / { context = $2 + 0 }
  /^last turn: / { prompt = $3 + 0; reused = substr($7, 2) + 0; generated = $12 + 0 }
  END {
    if (loaded == 0 || context == 0) { print \"FAIL: missing output\"; exit 1 }
    if (reused == 0 || reused >= loaded) { print \"FAIL: expected a truncated prefix, reused \" reused \" of \" loaded; exit 1 }
    if (context != reused + prompt + generated + 2) { print \"FAIL: context is not reused + new tokens\"; exit 1 }
    print \"truncated ok: reused \" reused \" of \" loaded \" loaded tokens\"
  }'"
                 $<TARGET_FILE:kipp> ${KIPP_TINY_GGUF} ${KIPP_CHAT_OUT})
set_tests_properties(chat_cli_reasoning_dropped_from_cache PROPERTIES PASS_REGULAR_EXPRESSION "truncated ok"
                     FAIL_REGULAR_EXPRESSION "FAIL")
list(APPEND KIPP_CHAT_TESTS chat_cli_reasoning_dropped_from_cache)

# Bad arguments.
add_test(NAME chat_cli_think_excludes_no_think COMMAND $<TARGET_FILE:kipp> chat -m ${KIPP_TINY_GGUF} --think --no-think)
set_tests_properties(chat_cli_think_excludes_no_think PROPERTIES PASS_REGULAR_EXPRESSION "--think excludes --no-think")
add_test(NAME chat_cli_ctx_too_large
         COMMAND sh -c "\"$0\" chat -m \"$1\" --no-verify --ctx 100000000 </dev/null" $<TARGET_FILE:kipp> ${KIPP_TINY_GGUF})
set_tests_properties(chat_cli_ctx_too_large PROPERTIES PASS_REGULAR_EXPRESSION "kipp: error: --ctx 100000000 is larger than the model's context length")
list(APPEND KIPP_CHAT_TESTS chat_cli_think_excludes_no_think chat_cli_ctx_too_large)

# A conversation longer than --ctx: an error for that turn, the session goes on.
add_test(NAME chat_cli_context_too_small
         COMMAND sh -c "printf '%s\\n' 'Hello there, how are you today?' /stats | \"$0\" chat -m \"$1\" --no-verify --temp 0 --max-tokens 8 --ctx 8 2>&1"
                 $<TARGET_FILE:kipp> ${KIPP_TINY_GGUF})
set_tests_properties(chat_cli_context_too_small PROPERTIES PASS_REGULAR_EXPRESSION
                     "kipp: error: the conversation is [0-9]+ tokens, which leaves no room in the 8-token context.*context: 0 of 8 tokens \\(0 messages\\)")
list(APPEND KIPP_CHAT_TESTS chat_cli_context_too_small)

foreach(test ${KIPP_CHAT_TESTS})
  set_tests_properties(${test} PROPERTIES FIXTURES_REQUIRED gguf_tiny_bf16 TIMEOUT 120)
endforeach()

# Base checkpoints have no chat format: a clear error (the tiny model converted as base).
add_test(NAME chat_cli_base_refused
         COMMAND sh -c "\"$0\" convert \"$1\" -o \"$2/tiny-base.gguf\" --variant base >/dev/null && \"$0\" chat -m \"$2/tiny-base.gguf\" --no-verify </dev/null"
                 $<TARGET_FILE:kipp> ${KIPP_MODELS}/tiny-hf ${KIPP_CHAT_OUT})
set_tests_properties(chat_cli_base_refused PROPERTIES FIXTURES_REQUIRED tiny_hf TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "^kipp: error: base checkpoints have no chat format; use generate\n$")

# Interactive: a real terminal (tmux) with line editing, streaming, Ctrl-C and Ctrl-D. Fails
# (never skips) when tmux is missing.
add_test(NAME chat_cli_interactive_tmux
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/chat_tmux.sh $<TARGET_FILE:kipp> ${KIPP_TINY_GGUF} ${KIPP_CHAT_OUT})
set_tests_properties(chat_cli_interactive_tmux PROPERTIES FIXTURES_REQUIRED gguf_tiny_bf16 TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "chat_tmux: all checks passed")
