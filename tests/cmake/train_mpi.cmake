# Data-parallel training under `mpirun --oversubscribe -np 2` against one process
# (tests/integration/train_mpi.sh): loss-curve equivalence, resume across rank counts, a failing
# rank. Without MPI in the build they report SKIPPED with the reason, never a pass.
set(KIPP_TRAIN_MPI_GATES equivalence resume failure)
foreach(gate ${KIPP_TRAIN_MPI_GATES})
  if(MPI_CXX_FOUND)
    add_test(NAME train_mpi_${gate}
             COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/train_mpi.sh ${gate} $<TARGET_FILE:kipp>
                     ${KIPP_TRAIN_INPUTS} ${KIPP_TRAIN_WORK}/mpi)
    # CI runs as root, which mpirun refuses unless told twice; one thread per rank on 2 cores.
    set_tests_properties(train_mpi_${gate} PROPERTIES FIXTURES_REQUIRED "tiny_hf;train_corpus" TIMEOUT 600
                         RESOURCE_LOCK mpirun SKIP_RETURN_CODE 77
                         ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1")
  else()
    add_test(NAME train_mpi_${gate}
             COMMAND sh -c "echo 'SKIPPED: kipp was built without MPI (not found, -DKIPP_MPI=OFF or a cross build)'; exit 77")
    set_tests_properties(train_mpi_${gate} PROPERTIES SKIP_RETURN_CODE 77)
  endif()
endforeach()
