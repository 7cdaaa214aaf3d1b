#include "executor/process_group.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <list>
#include <string>
#include <vector>

#ifdef PARALLAX_HAVE_MPI
#include <mpi.h>
#endif

namespace parallax::exec {
namespace {

class LocalGroup final : public ProcessGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Diagnostics all_reduce_sum(std::span<float>) override { return {}; }
  Diagnostics all_reduce_sum(std::span<double>) override { return {}; }
  Diagnostics reduce_scatter_sum(std::span<const float> data, std::span<float> out) override {
    std::copy(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(out.size()), out.begin());
    return {};
  }
  Diagnostics all_gather(std::span<const float> chunk, std::span<float> out) override {
    std::copy(chunk.begin(), chunk.end(), out.begin());
    return {};
  }
  double max(double v) override { return v; }
  void barrier() override {}
  Result<std::unique_ptr<ProcessGroup>> split(int, int) override {
    return std::unique_ptr<ProcessGroup>(std::make_unique<LocalGroup>());
  }
  // One rank has no peer: a pipeline of one stage never sends.
  Diagnostics send(std::span<const float>, int dest, int) override { return no_peer(dest); }
  Diagnostics recv(std::span<float>, int src, int) override { return no_peer(src); }
  Diagnostics wait_sends() override { return {}; }

 private:
  static Diagnostics no_peer(int r) {
    return {Diagnostic{
        "rank 0",
        "point-to-point message with rank " + std::to_string(r) + " in a group of one rank", ""}};
  }
};

#ifdef PARALLAX_HAVE_MPI
std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(code, text, &n);
  return std::string(text, static_cast<size_t>(n));
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

class MpiGroup final : public ProcessGroup {
 public:
  explicit MpiGroup(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiGroup() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }
  MpiGroup(const MpiGroup&) = delete;
  MpiGroup& operator=(const MpiGroup&) = delete;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Diagnostics all_reduce_sum(std::span<float> data) override {
    return reduce(data.data(), static_cast<int64_t>(data.size()), MPI_FLOAT);
  }
  Diagnostics all_reduce_sum(std::span<double> data) override {
    return reduce(data.data(), static_cast<int64_t>(data.size()), MPI_DOUBLE);
  }
  Diagnostics reduce_scatter_sum(std::span<const float> data, std::span<float> out) override {
    PX_CHECK(static_cast<int64_t>(data.size()) == static_cast<int64_t>(out.size()) * size_,
             "reduce-scatter of " << data.size() << " into chunks of " << out.size());
    PX_CHECK(out.size() <= static_cast<size_t>(INT_MAX), "chunk over INT_MAX elements");
    return check(MPI_Reduce_scatter_block(data.data(), out.data(), static_cast<int>(out.size()),
                                          MPI_FLOAT, MPI_SUM, comm_),
                 "MPI_Reduce_scatter_block");
  }
  Diagnostics all_gather(std::span<const float> chunk, std::span<float> out) override {
    PX_CHECK(static_cast<int64_t>(out.size()) == static_cast<int64_t>(chunk.size()) * size_,
             "all-gather of " << chunk.size() << " into " << out.size());
    PX_CHECK(chunk.size() <= static_cast<size_t>(INT_MAX), "chunk over INT_MAX elements");
    return check(MPI_Allgather(chunk.data(), static_cast<int>(chunk.size()), MPI_FLOAT, out.data(),
                               static_cast<int>(chunk.size()), MPI_FLOAT, comm_),
                 "MPI_Allgather");
  }
  double max(double v) override {
    double out = v;
    MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, comm_);
    return out;
  }
  void barrier() override { MPI_Barrier(comm_); }
  Diagnostics send(std::span<const float> data, int dest, int tag) override {
    if (Diagnostics d = reap(false); !d.empty()) return d;
    PX_CHECK(data.size() <= static_cast<size_t>(INT_MAX), "message over INT_MAX elements");
    pending_.push_back({std::vector<float>(data.begin(), data.end()), MPI_REQUEST_NULL});
    Pending& p = pending_.back();
    return check(MPI_Isend(p.data.data(), static_cast<int>(p.data.size()), MPI_FLOAT, dest, tag,
                           comm_, &p.request),
                 "MPI_Isend");
  }
  Diagnostics recv(std::span<float> data, int src, int tag) override {
    PX_CHECK(data.size() <= static_cast<size_t>(INT_MAX), "message over INT_MAX elements");
    MPI_Status status;
    if (Diagnostics d = check(MPI_Recv(data.data(), static_cast<int>(data.size()), MPI_FLOAT, src,
                                       tag, comm_, &status),
                              "MPI_Recv");
        !d.empty())
      return d;
    int count = 0;
    MPI_Get_count(&status, MPI_FLOAT, &count);
    if (static_cast<size_t>(count) != data.size())
      return {Diagnostic{"rank " + std::to_string(rank_),
                         "received " + std::to_string(count) + " values from rank " +
                             std::to_string(src) + ", expected " + std::to_string(data.size()),
                         ""}};
    return reap(false);
  }
  Diagnostics wait_sends() override { return reap(true); }
  Result<std::unique_ptr<ProcessGroup>> split(int color, int key) override {
    MPI_Comm sub = MPI_COMM_NULL;
    if (Diagnostics d = check(MPI_Comm_split(comm_, color, key, &sub), "MPI_Comm_split");
        !d.empty())
      return d;
    MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
    return std::unique_ptr<ProcessGroup>(std::make_unique<MpiGroup>(sub));
  }

 private:
  Diagnostics reduce(void* data, int64_t n, MPI_Datatype type) {
    // MPI counts are ints: large buffers go in chunks.
    const int element = type == MPI_FLOAT ? 4 : 8;
    constexpr int64_t kChunk = 1 << 28;
    for (int64_t off = 0; off < n; off += kChunk) {
      const int count = static_cast<int>(std::min(kChunk, n - off));
      const int rc = MPI_Allreduce(MPI_IN_PLACE, static_cast<char*>(data) + off * element, count,
                                   type, MPI_SUM, comm_);
      if (rc != MPI_SUCCESS)
        return {Diagnostic{"rank " + std::to_string(rank_),
                           "MPI_Allreduce failed: " + mpi_error(rc), ""}};
    }
    return {};
  }
  Diagnostics check(int rc, const char* call) const {
    if (rc == MPI_SUCCESS) return {};
    return {Diagnostic{"rank " + std::to_string(rank_),
                       std::string(call) + " failed: " + mpi_error(rc), ""}};
  }
  /// Frees the copies of delivered sends (all of them, waiting, when `all`).
  Diagnostics reap(bool all) {
    for (auto it = pending_.begin(); it != pending_.end();) {
      int done = 0;
      const int rc = all ? MPI_Wait(&it->request, MPI_STATUS_IGNORE)
                         : MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
      if (Diagnostics d = check(rc, all ? "MPI_Wait" : "MPI_Test"); !d.empty()) return d;
      if (all || done) {
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
    return {};
  }
  struct Pending {
    std::vector<float> data;
    MPI_Request request;
  };
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::list<Pending> pending_;  // a list: requests must not move while in flight
};
#endif

}  // namespace

std::unique_ptr<ProcessGroup> make_local_group() { return std::make_unique<LocalGroup>(); }

Result<std::unique_ptr<ProcessGroup>> make_mpi_world() {
#ifdef PARALLAX_HAVE_MPI
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    const int rc = MPI_Init(nullptr, nullptr);
    if (rc != MPI_SUCCESS) return Diagnostic{"mpi", "MPI_Init failed: " + mpi_error(rc), ""};
    std::atexit(finalize_at_exit);
  }
  MPI_Comm comm = MPI_COMM_NULL;
  const int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (rc != MPI_SUCCESS) return Diagnostic{"mpi", "MPI_Comm_dup failed: " + mpi_error(rc), ""};
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return std::unique_ptr<ProcessGroup>(std::make_unique<MpiGroup>(comm));
#else
  return Diagnostic{"mpi", "this build has no MPI", "install OpenMPI (libopenmpi-dev) and rebuild"};
#endif
}

}  // namespace parallax::exec
