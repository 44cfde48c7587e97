# `kipp tokenizer train` / `kipp tokenizer encode`. The library is covered by the unit tests
# (tests/unit/tokenizer/bpe_trainer_test.cpp: hand-computed merges, a naive trainer as oracle, counting
# independent of threads and blocks, the written tokenizer.json through the project's loader).
# Here: the command end to end, its errors, and the independent implementations.
set(KIPP_TOKTRAIN_WORK ${CMAKE_BINARY_DIR}/tokenizer_train)
set(KIPP_TOKTRAIN_CORPUS ${KIPP_TOKTRAIN_WORK}/corpus.txt)
set(KIPP_TOKTRAIN_EXPECT_ERROR ${CMAKE_CURRENT_SOURCE_DIR}/integration/expect_error.sh)

add_test(NAME tokenizer_train_corpus
         COMMAND sh -c "mkdir -p ${KIPP_TOKTRAIN_WORK}/out ${KIPP_TOKTRAIN_WORK}/bytes && cp ${CMAKE_CURRENT_SOURCE_DIR}/train/corpus.md ${KIPP_TOKTRAIN_CORPUS}")
set_tests_properties(tokenizer_train_corpus PROPERTIES FIXTURES_SETUP tokenizer_train_corpus)

add_test(NAME tokenizer_train_help COMMAND $<TARGET_FILE:kipp> tokenizer train --help)
set_tests_properties(tokenizer_train_help PROPERTIES PASS_REGULAR_EXPRESSION "--vocab-size.*--byte-level.*Examples")

# A 1000-token vocabulary: exactly 1000 tokens, the special tokens last; then encoding with it.
add_test(NAME tokenizer_train_cli
         COMMAND $<TARGET_FILE:kipp> tokenizer train --input ${KIPP_TOKTRAIN_CORPUS} --vocab-size 1000 --threads 2
                 -o ${KIPP_TOKTRAIN_WORK}/out/tokenizer.json)
set_tests_properties(tokenizer_train_cli PROPERTIES FIXTURES_REQUIRED tokenizer_train_corpus
                     FIXTURES_SETUP tokenizer_train_out TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "1000 tokens \\(256 bytes, 737 learned, 7 special\\), 737 merges")
add_test(NAME tokenizer_train_encode
         COMMAND $<TARGET_FILE:kipp> tokenizer encode -t ${KIPP_TOKTRAIN_WORK}/out/tokenizer.json
                 --text "<|im_start|>user<|im_end|><eos>")
set_tests_properties(tokenizer_train_encode PROPERTIES FIXTURES_REQUIRED tokenizer_train_out
                     PASS_REGULAR_EXPRESSION "^998 [0-9 ]+ 999 996\n$")
# In a directory of its own: its tokenizer_config.json (written beside the output) must not
# replace the one tokenizer_train_encode reads with out/tokenizer.json.
add_test(NAME tokenizer_train_byte_level
         COMMAND $<TARGET_FILE:kipp> tokenizer train --byte-level -o ${KIPP_TOKTRAIN_WORK}/bytes/tokenizer.json)
set_tests_properties(tokenizer_train_byte_level PROPERTIES FIXTURES_REQUIRED tokenizer_train_corpus
                     PASS_REGULAR_EXPRESSION "263 tokens \\(256 bytes, 0 learned, 7 special\\), 0 merges")

# Clear errors: exit status 1 and one line naming the problem.
add_test(NAME tokenizer_train_rejects_missing_input
         COMMAND ${KIPP_TOKTRAIN_EXPECT_ERROR} "cannot read .*no-such-file\\.txt: No such file or directory"
                 $<TARGET_FILE:kipp> tokenizer train --input ${KIPP_TOKTRAIN_WORK}/no-such-file.txt --vocab-size 1000
                 -o ${KIPP_TOKTRAIN_WORK}/out/never.json)
add_test(NAME tokenizer_train_rejects_invalid_utf8
         COMMAND ${KIPP_TOKTRAIN_EXPECT_ERROR} "invalid_utf8\\.txt: invalid UTF-8 at byte offset 11 \\(byte 0xFF\\)"
                 $<TARGET_FILE:kipp> tokenizer train --input ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer/invalid_utf8.txt
                 --vocab-size 1000 -o ${KIPP_TOKTRAIN_WORK}/out/never.json)
add_test(NAME tokenizer_train_rejects_small_vocab
         COMMAND ${KIPP_TOKTRAIN_EXPECT_ERROR} "vocab-size 262 is too small: the 256 byte tokens and 7 special tokens need 263"
                 $<TARGET_FILE:kipp> tokenizer train --input ${KIPP_TOKTRAIN_CORPUS} --vocab-size 262
                 -o ${KIPP_TOKTRAIN_WORK}/out/never.json)
add_test(NAME tokenizer_train_rejects_unwritable_output
         COMMAND ${KIPP_TOKTRAIN_EXPECT_ERROR} "cannot write .*/missing/tokenizer\\.json: the folder .*/missing does not exist"
                 $<TARGET_FILE:kipp> tokenizer train --input ${KIPP_TOKTRAIN_CORPUS} --vocab-size 1000
                 -o ${KIPP_TOKTRAIN_WORK}/missing/tokenizer.json)
add_test(NAME tokenizer_train_rejects_bad_special
         COMMAND ${KIPP_TOKTRAIN_EXPECT_ERROR} "special token 'hello' is a single pre-token"
                 $<TARGET_FILE:kipp> tokenizer train --input ${KIPP_TOKTRAIN_CORPUS} --vocab-size 1000 --special hello
                 -o ${KIPP_TOKTRAIN_WORK}/out/never.json)
add_test(NAME tokenizer_train_rejects_byte_level_with_input
         COMMAND ${KIPP_TOKTRAIN_EXPECT_ERROR} "byte-level takes no --input"
                 $<TARGET_FILE:kipp> tokenizer train --byte-level --input ${KIPP_TOKTRAIN_CORPUS}
                 -o ${KIPP_TOKTRAIN_WORK}/out/never.json)
foreach(test tokenizer_train_rejects_missing_input tokenizer_train_rejects_invalid_utf8 tokenizer_train_rejects_small_vocab
        tokenizer_train_rejects_unwritable_output tokenizer_train_rejects_bad_special
        tokenizer_train_rejects_byte_level_with_input)
  set_tests_properties(${test} PROPERTIES FIXTURES_REQUIRED tokenizer_train_corpus TIMEOUT 60)
endforeach()
add_test(NAME tokenizer_train_error_left_no_file COMMAND ${CMAKE_COMMAND} -E cat ${KIPP_TOKTRAIN_WORK}/out/never.json)
set_tests_properties(tokenizer_train_error_left_no_file PROPERTIES WILL_FAIL TRUE DEPENDS
                     "tokenizer_train_rejects_missing_input;tokenizer_train_rejects_invalid_utf8;tokenizer_train_rejects_small_vocab;tokenizer_train_rejects_bad_special;tokenizer_train_rejects_byte_level_with_input")

# Independent implementations: the JS tokenizer (@lenml/tokenizers, with Hugging Face's
# tokenizers as cross-check) encodes with our tokenizer.json exactly as `kipp tokenizer
# encode` does, and Hugging Face's BpeTrainer learns the same merges (check.sh).
add_test(NAME tokenizer_train_oracle
         COMMAND ${CMAKE_SOURCE_DIR}/tools/tokenizer_train_check/check.sh $<TARGET_FILE:kipp> ${KIPP_TOKTRAIN_WORK}/oracle)
set_tests_properties(tokenizer_train_oracle PROPERTIES FIXTURES_REQUIRED qwen_tokenizer TIMEOUT 600)
