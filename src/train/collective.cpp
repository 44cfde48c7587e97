#include "train/collective.h"

#include <cstdlib>

#ifdef KIPP_HAVE_MPI
#include "train/collective_mpi.h"
#endif

namespace kipp::train {
namespace {

class LocalCollective final : public Collective {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string describe() const override { return "one process"; }
  Status start_sum(std::span<float>) override { return {}; }
  Status progress() override { return {}; }
  Status wait_all() override { return {}; }
  Status sum(std::span<double>) override { return {}; }
  Status broadcast(std::span<uint64_t>) override { return {}; }
  [[noreturn]] void abort(int exit_code) override { std::exit(exit_code); }
};

// mpirun (Open MPI) and the Hydra launchers of MPICH set these in every rank's environment.
bool launched_by_mpirun() { return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE"); }

}  // namespace

std::unique_ptr<Collective> make_local_collective() { return std::make_unique<LocalCollective>(); }

#ifdef KIPP_HAVE_MPI
Expected<std::unique_ptr<Collective>> open_collective() {
  if (!launched_by_mpirun()) return make_local_collective();
  return make_mpi_collective();
}
#else
Expected<std::unique_ptr<Collective>> open_collective() {
  if (launched_by_mpirun()) {
    return make_error(
        "started by mpirun, but this kipp was built without MPI (install libopenmpi-dev and rebuild with "
        "-DKIPP_MPI=ON, the default)");
  }
  return make_local_collective();
}
#endif

}  // namespace kipp::train
