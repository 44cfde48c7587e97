# The grammar engine's random walks over the real Qwen3 vocabulary, written out and validated by
# ajv (tests/grammar/validate_walks.mjs), a JSON Schema validator independent of the compiler.
add_test(NAME grammar_walks_ajv
         COMMAND sh -c "set -e; walks=$(mktemp); trap 'rm -f \"$walks\"' EXIT; KIPP_GRAMMAR_WALKS=\"$walks\" \"$0\" --gtest_filter='GrammarWalks.*' >/dev/null; KIPP_CLIENT_NODE_MODULES=$(\"$1\" | tail -n1) node \"$2\" \"$walks\""
                 $<TARGET_FILE:kipp_unit_tests> ${CMAKE_CURRENT_SOURCE_DIR}/clients/fetch_clients.sh
                 ${CMAKE_CURRENT_SOURCE_DIR}/grammar/validate_walks.mjs)
set_tests_properties(grammar_walks_ajv PROPERTIES FIXTURES_REQUIRED "qwen_tokenizer;agent_clients_npm" TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "validate_walks: [1-9][0-9]* outputs valid")
