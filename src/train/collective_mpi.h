// The MPI collective (collective_mpi.cpp, built only when CMake finds MPI): MPI_Init, then
// MPI_COMM_WORLD; MPI_Finalize when the object is destroyed.
#pragma once

#include <memory>

#include "core/status.h"
#include "train/collective.h"

namespace kipp::train {

Expected<std::unique_ptr<Collective>> make_mpi_collective();

}  // namespace kipp::train
