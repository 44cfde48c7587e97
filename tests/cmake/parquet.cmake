# The Parquet reader (src/format/parquet.h, ParquetRecordSource) against files an independent
# writer made: the fixture step runs tools/parquet_fixtures/make_fixtures.mjs (DuckDB through the
# pinned @duckdb/node-api, fetched into the cache by fetch_deps.sh on first use) into the build
# folder; then the unit binary's Parquet tests run with KIPP_PARQUET_FIXTURES pointing there.
# tests/CMakeLists.txt keeps those tests out of the one-by-one list, so this entry is where they
# run (a missing fixture file fails it).
set(KIPP_PARQUET_FIXTURES_DIR ${CMAKE_BINARY_DIR}/parquet-fixtures)

add_test(NAME parquet_fixtures
         COMMAND node ${CMAKE_SOURCE_DIR}/tools/parquet_fixtures/make_fixtures.mjs ${KIPP_PARQUET_FIXTURES_DIR})
set_tests_properties(parquet_fixtures PROPERTIES FIXTURES_SETUP parquet_fixtures TIMEOUT 600
                     PASS_REGULAR_EXPRESSION "make_fixtures: wrote [0-9]+ files")

add_test(NAME parquet_reader_on_duckdb_files
         COMMAND kipp_unit_tests --gtest_filter=Parquet*:Fixtures/ParquetCodecTest.*:Records.Parquet*)
set_tests_properties(parquet_reader_on_duckdb_files PROPERTIES FIXTURES_REQUIRED parquet_fixtures TIMEOUT 300
                     ENVIRONMENT KIPP_PARQUET_FIXTURES=${KIPP_PARQUET_FIXTURES_DIR}
                     # A skip here would mean the variable did not arrive: fail rather than pass.
                     FAIL_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
