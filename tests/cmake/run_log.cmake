# Training logs: the C++ event-file writer against tools/tfevents_reader.py (an independent
# reader written from the TFRecord and event.proto formats). The unit test
# RunLogExport.KnownRunWithResume writes a known run (NaN and out-of-float-range values, text
# samples, a resume that re-does two steps) into a folder; the reader then checks every CRC and
# that the event files and metrics.jsonl agree value for value. A flipped byte and an edited
# metrics.jsonl must be caught; `kipp plot` draws the run.
set(KIPP_RUN_LOG_WORK ${CMAKE_BINARY_DIR}/run_log)
set(KIPP_RUN_LOG_RUN ${KIPP_RUN_LOG_WORK}/known-run)
set(KIPP_TFEVENTS_READER ${CMAKE_SOURCE_DIR}/tools/tfevents_reader.py)

add_test(NAME run_log_reader_self_test COMMAND ${KIPP_PY} ${KIPP_TFEVENTS_READER} --self-test)
set_tests_properties(run_log_reader_self_test PROPERTIES PASS_REGULAR_EXPRESSION "OK: crc32c matches 5 published")

add_test(NAME run_log_export
         COMMAND ${CMAKE_COMMAND} -E env KIPP_RUN_LOG_EXPORT_DIR=${KIPP_RUN_LOG_RUN}
                 $<TARGET_FILE:kipp_unit_tests> --gtest_filter=RunLogExport.KnownRunWithResume)
set_tests_properties(run_log_export PROPERTIES FIXTURES_SETUP run_log_known_run)

# 8 steps x 5 train/* tags + 4 evaluations x 2 val/* tags + 1 free-form scalar, in 2 files.
add_test(NAME run_log_events_match_jsonl
         COMMAND ${KIPP_PY} ${KIPP_TFEVENTS_READER} --compare-jsonl ${KIPP_RUN_LOG_RUN}/metrics.jsonl)
set_tests_properties(run_log_events_match_jsonl PROPERTIES FIXTURES_REQUIRED run_log_known_run
                     PASS_REGULAR_EXPRESSION "OK: 49 scalars in 2 event file\\(s\\) match")
add_test(NAME run_log_events_summary COMMAND ${KIPP_PY} ${KIPP_TFEVENTS_READER} ${KIPP_RUN_LOG_RUN} --summary)
set_tests_properties(run_log_events_summary PROPERTIES FIXTURES_REQUIRED run_log_known_run
                     PASS_REGULAR_EXPRESSION "2 event file\\(s\\), 23 records, all CRCs valid.*train/loss +8 values, steps 1\\.\\.8")

# Byte 14 lies in the first record's data (after its 12-byte header): the data CRC must fail.
# PASS_REGULAR_EXPRESSION ignores the exit status, so the command prints it.
add_test(NAME run_log_reader_detects_bad_crc
         COMMAND sh -c "rm -rf ${KIPP_RUN_LOG_WORK}/corrupt && cp -r ${KIPP_RUN_LOG_RUN} ${KIPP_RUN_LOG_WORK}/corrupt && f=$(ls ${KIPP_RUN_LOG_WORK}/corrupt/tensorboard/events.out.tfevents.* | head -1) && printf '\\377' | dd of=$f bs=1 seek=14 conv=notrunc status=none && ${KIPP_PY} ${KIPP_TFEVENTS_READER} $f; echo exit $?")
set_tests_properties(run_log_reader_detects_bad_crc PROPERTIES FIXTURES_REQUIRED run_log_known_run
                     PASS_REGULAR_EXPRESSION "record 0 \\(byte offset 0\\): data CRC mismatch.*exit 1")
add_test(NAME run_log_reader_detects_mismatch
         COMMAND sh -c "rm -rf ${KIPP_RUN_LOG_WORK}/edited && cp -r ${KIPP_RUN_LOG_RUN} ${KIPP_RUN_LOG_WORK}/edited && sed -i '0,/\"lr\":0.001/s//\"lr\":0.002/' ${KIPP_RUN_LOG_WORK}/edited/metrics.jsonl && ${KIPP_PY} ${KIPP_TFEVENTS_READER} --compare-jsonl ${KIPP_RUN_LOG_WORK}/edited/metrics.jsonl; echo exit $?")
set_tests_properties(run_log_reader_detects_mismatch PROPERTIES FIXTURES_REQUIRED run_log_known_run
                     PASS_REGULAR_EXPRESSION "mismatch: train/lr step 1: event file has 0\\.001[0-9]*, .* has 0\\.002.*FAIL: 1 mismatches.*exit 1")

# kipp plot on the known run, and a clear error for a folder without metrics.jsonl.
add_test(NAME run_log_plot
         COMMAND sh -c "$<TARGET_FILE:kipp> plot ${KIPP_RUN_LOG_RUN} -o ${KIPP_RUN_LOG_WORK}/known-run.svg && grep -c '<polyline id=\"val-loss\"' ${KIPP_RUN_LOG_WORK}/known-run.svg && echo 'exit 0'")
set_tests_properties(run_log_plot PROPERTIES FIXTURES_REQUIRED run_log_known_run
                     PASS_REGULAR_EXPRESSION "known-run\\.svg\n1\nexit 0")
add_test(NAME run_log_plot_missing_log
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/expect_error.sh "no-such-run/metrics\\.jsonl: no such file"
                 $<TARGET_FILE:kipp> plot ${KIPP_RUN_LOG_WORK}/no-such-run)
