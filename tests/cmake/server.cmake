# `kipp serve` black-box tests (tests/server/*.mjs, Node.js): each script starts its own server on
# the tiny model (`--port 0`), drives it over HTTP / raw TCP / the official OpenAI client, stops
# it and exits non-zero with the failed checks listed. They run one at a time (RESOURCE_LOCK):
# batching, disconnect and load checks watch /metrics and RSS while the server works.
# `ctest -R '^server_'` runs them (with their fixtures); each can also run alone, e.g.
#   KIPP=build/release/kipp KIPP_MODELS=build/release/models node tests/server/server_schema.mjs
set(KIPP_SERVER_TESTS_DIR ${CMAKE_CURRENT_SOURCE_DIR}/server)

# The pinned official OpenAI Node client (npm openai, sha512 + SHA-256 checked) in the npm cache.
add_test(NAME server_openai_client_fetch COMMAND ${KIPP_SERVER_TESTS_DIR}/fetch_openai.sh)
set_tests_properties(server_openai_client_fetch PROPERTIES FIXTURES_SETUP openai_npm TIMEOUT 300)
# The pinned agent clients (tests/clients/package-lock.json: openai, the Vercel AI SDK, zod, ajv).
add_test(NAME server_agent_clients_fetch COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/clients/fetch_clients.sh)
set_tests_properties(server_agent_clients_fetch PROPERTIES FIXTURES_SETUP agent_clients_npm TIMEOUT 600)

# kipp_server_test(NAME TIMEOUT [FIXTURES fixture...] [ARGS arg...]): node tests/server/NAME.mjs ARGS.
function(kipp_server_test name timeout)
  cmake_parse_arguments(PARSE_ARGV 2 srv "" "" "FIXTURES;ARGS")
  add_test(NAME ${name} COMMAND node ${KIPP_SERVER_TESTS_DIR}/${name}.mjs ${srv_ARGS})
  set_tests_properties(${name} PROPERTIES
                       ENVIRONMENT "KIPP=$<TARGET_FILE:kipp>;KIPP_MODELS=${KIPP_MODELS};KIPP_SANITIZED=$<BOOL:${KIPP_SANITIZE}>"
                       FIXTURES_REQUIRED "gguf_tiny_bf16;${srv_FIXTURES}"
                       TIMEOUT ${timeout} RESOURCE_LOCK kipp_server PROCESSORS 2
                       PASS_REGULAR_EXPRESSION "${name}: all [0-9]+ checks passed"
                       FAIL_REGULAR_EXPRESSION "FAIL: ")
endfunction()

kipp_server_test(server_lifecycle 180)                       # process: listening line, signals, bad invocations
kipp_server_test(server_drain 180)                           # SIGTERM drains: 503 to new work, in-flight finish
kipp_server_test(server_replicas 180)                        # 2 replicas behind HAProxy (deploy/): affinity, kill, drain
kipp_server_test(server_schema 300 FIXTURES gguf_chat_base)  # (a) every endpoint and error status
kipp_server_test(server_security 180)                        # Host check, CORS, API key, non-loopback refusal
kipp_server_test(server_batching 240)                        # (b) batched == one at a time; prefix cache
kipp_server_test(server_seed 180)                            # (c) seeds
kipp_server_test(server_disconnect 180)                      # (d) client disconnects free the slot
kipp_server_test(server_overload 240)                        # (e) full queue 503, KV pool exhaustion
kipp_server_test(server_openai 240 FIXTURES openai_npm)      # (f) the official OpenAI Node client
kipp_server_test(server_load 240)                            # (g) 32 streaming clients, RSS flat
kipp_server_test(server_malformed 240)                       # (h) malformed HTTP and JSON
kipp_server_test(server_agents_api 240 FIXTURES openai_npm)  # tools, reasoning, /tokenize, /v1/responses
# Structured output and tool loops with real clients, on the random-weight 0.6b model.
kipp_server_test(server_agents 900 FIXTURES agent_clients_npm gguf_qwen3-0.6b_bf16 ARGS qwen3-0.6b-bf16.gguf)

# The chat page (webui/): the committed build in webui/dist must come from the current sources
# (scripts/build_webui.sh rebuilds it), and the page must work in Chromium (playwright-core from
# the agent clients' lock file); screenshots of its main states land in tests/server_webui/.
add_test(NAME webui_dist_current COMMAND ${CMAKE_COMMAND} -DWEBUI=${CMAKE_SOURCE_DIR}/webui
                                         -P ${CMAKE_CURRENT_SOURCE_DIR}/webui/check_dist.cmake)
set_tests_properties(webui_dist_current PROPERTIES TIMEOUT 60)
kipp_server_test(server_webui 240 FIXTURES agent_clients_npm ARGS ${CMAKE_CURRENT_BINARY_DIR}/server_webui)
