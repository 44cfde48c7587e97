// What data-parallel training needs from the processes it runs in: its rank among them, sums
// across all of them (nonblocking for gradients), a broadcast from rank 0 and a way to stop them
// all. One process is the local implementation; `mpirun -np N kipp train` gets the MPI one. The
// rest of the trainer sees only this interface (a CUDA trainer would put NCCL behind it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/status.h"

namespace kipp::train {

class Collective {
 public:
  virtual ~Collective() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "MPI (Open MPI 4.1.4), 2 ranks" or "one process".
  virtual std::string describe() const = 0;

  // Starts summing `values` element-wise across all ranks, in place; the result is there after
  // wait_all(). `values` must stay untouched until then. Every rank starts the same spans in
  // the same order.
  virtual Status start_sum(std::span<float> values) = 0;
  // Lets started sums advance (MPI progresses nonblocking collectives only inside its calls).
  virtual Status progress() = 0;
  virtual Status wait_all() = 0;

  // Blocking element-wise sums and rank 0's values to every rank.
  virtual Status sum(std::span<double> values) = 0;
  virtual Status broadcast(std::span<uint64_t> values) = 0;

  // Ends every rank's process at once with `exit_code` (after a failure on this rank, so the
  // others do not wait forever in a sum).
  [[noreturn]] virtual void abort(int exit_code) = 0;
};

// The single-process collective: sums and broadcasts leave values as they are.
std::unique_ptr<Collective> make_local_collective();

// The collective this process was started in: MPI when it was launched by mpirun (and Kipp was
// built with MPI), otherwise the local one. An mpirun launch without MPI support is an error.
// Call once, early (MPI_Init); the returned object finalizes MPI when destroyed.
Expected<std::unique_ptr<Collective>> open_collective();

}  // namespace kipp::train
