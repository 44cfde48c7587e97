# Data-parallel training under `mpirun --oversubscribe -np 2` against one process
# (tests/integration/train_mpi.sh): loss-curve equivalence, resume across rank counts, a failing
# rank. Without MPI in the build they report SKIPPED with the reason, never a pass; so they do in
# a sanitizer build, where Open MPI's own allocations would be reported as leaks.
if(NOT MPI_CXX_FOUND)
  set(KIPP_TRAIN_MPI_SKIP "kipp was built without MPI (not found, -DKIPP_MPI=OFF or a cross build)")
elseif(KIPP_SANITIZE)
  set(KIPP_TRAIN_MPI_SKIP "a sanitizer build: LeakSanitizer reports Open MPI's own allocations")
endif()
foreach(gate equivalence resume failure)
  if(KIPP_TRAIN_MPI_SKIP)
    add_test(NAME train_mpi_${gate} COMMAND sh -c "echo 'SKIPPED: ${KIPP_TRAIN_MPI_SKIP}'; exit 77")
    set_tests_properties(train_mpi_${gate} PROPERTIES SKIP_RETURN_CODE 77)
    continue()
  endif()
  add_test(NAME train_mpi_${gate}
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/train_mpi.sh ${gate} $<TARGET_FILE:kipp> ${KIPP_TRAIN_INPUTS}
                   ${KIPP_TRAIN_WORK}/mpi)
  # CI runs as root, which mpirun refuses unless told twice. One thread per rank, and the two
  # ranks alone on the 2 cores: a waiting rank polls, and beside other tests that costs minutes.
  set_tests_properties(train_mpi_${gate} PROPERTIES FIXTURES_REQUIRED "tiny_hf;train_corpus" TIMEOUT 600
                       RUN_SERIAL TRUE SKIP_RETURN_CODE 77
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1")
endforeach()
