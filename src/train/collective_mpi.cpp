// The MPI collective: MPI_COMM_WORLD, nonblocking MPI_Iallreduce for gradient buckets.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <vector>

#include "train/collective_mpi.h"

namespace kipp::train {
namespace {

// MPI counts are int: longer spans go as several sums of at most this many elements.
constexpr size_t kMaxCount = size_t{1} << 30;

Status check(int code, const char* call) {
  if (code == MPI_SUCCESS) return {};
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return make_error(std::string(call) + " failed: " + std::string(text, size_t(std::max(0, length))));
}

class MpiCollective final : public Collective {
 public:
  MpiCollective() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiCollective() override {
    MPI_Waitall(int(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::string describe() const override {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    std::string library(version, size_t(std::max(0, length)));
    library = library.substr(0, library.find_first_of(",\n"));
    return "MPI (" + library + "), " + std::to_string(size_) + " ranks";
  }

  Status start_sum(std::span<float> values) override {
    for (size_t done = 0; done < values.size(); done += kMaxCount) {
      const int count = int(std::min(kMaxCount, values.size() - done));
      MPI_Request request;
      KIPP_RETURN_IF_ERROR(
          check(MPI_Iallreduce(MPI_IN_PLACE, values.data() + done, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request),
                "MPI_Iallreduce"));
      requests_.push_back(request);
    }
    return {};
  }

  Status progress() override {
    if (requests_.empty()) return {};
    int done = 0;
    KIPP_RETURN_IF_ERROR(
        check(MPI_Testall(int(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall"));
    if (done) requests_.clear();
    return {};
  }

  Status wait_all() override {
    const int code = MPI_Waitall(int(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    requests_.clear();
    return check(code, "MPI_Waitall");
  }

  Status sum(std::span<double> values) override {
    return check(MPI_Allreduce(MPI_IN_PLACE, values.data(), int(values.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
                 "MPI_Allreduce");
  }

  Status broadcast(std::span<uint64_t> values) override {
    return check(MPI_Bcast(values.data(), int(values.size()), MPI_UINT64_T, 0, MPI_COMM_WORLD), "MPI_Bcast");
  }

  [[noreturn]] void abort(int exit_code) override {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);
  }

 private:
  int rank_ = 0;
  int size_ = 1;
  std::vector<MPI_Request> requests_;
};

}  // namespace

Expected<std::unique_ptr<Collective>> make_mpi_collective() {
  // OpenMP threads never call MPI: only the main thread does.
  int provided = 0;
  KIPP_RETURN_IF_ERROR(check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread"));
  // Errors come back as codes (and become a Status) instead of ending the process.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  return std::unique_ptr<Collective>(std::make_unique<MpiCollective>());
}

}  // namespace kipp::train
