// MpiCommunicator: collectives over MPI_COMM_WORLD (a private duplicate of it), timed with
// MPI_Wtime, following nccl-tests' size conventions (backend.h). Each repetition starts at a
// barrier and ends with an all-reduce of the duration, so every rank keeps the slowest rank's
// time and time_repeated makes the same stopping decision on every rank.

#ifdef PARALLAX_HAVE_MPI

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "calibrate/backend.h"
#include "executor/mpi_pieces.h"

namespace parallax::calibrate {
namespace {

/// MPI_Finalize at exit when this library initialised MPI and nobody finalised it since.
void finalize_if_ours() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

/// Float counts of one collective: `total` in the buffer nccl-tests names by `bytes`,
/// `per_rank` the share of one rank (all-gather, reduce-scatter, all-to-all).
struct Counts {
  int64_t total = 0;
  int64_t per_rank = 0;
};

Counts counts_for(CollectiveOp op, double bytes, int size) {
  const auto floats = [](double b) {
    return std::max<int64_t>(1, std::llround(b / static_cast<double>(sizeof(float))));
  };
  switch (op) {
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllToAll: {
      const int64_t per_rank = floats(bytes / size);
      return {per_rank * size, per_rank};
    }
    case CollectiveOp::kAllReduce:
    case CollectiveOp::kSendRecv:
      break;
  }
  const int64_t total = floats(bytes);
  return {total, total};
}

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm node = MPI_COMM_NULL;
    if (MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node) ==
            MPI_SUCCESS &&
        node != MPI_COMM_NULL) {
      MPI_Comm_size(node, &local_size_);
      MPI_Comm_free(&node);
    }
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    for (auto& [key, group] : groups_) MPI_Comm_free(&group);
    MPI_Comm_free(&comm_);
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  std::string name() const override { return "mpi"; }
  std::string runtime() const override {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    if (MPI_Get_library_version(version, &length) != MPI_SUCCESS) return "MPI";
    std::string v(version, static_cast<size_t>(length));
    v = v.substr(0, v.find_first_of(",\n"));  // "Open MPI v4.1.4" of its long banner
    return v;
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_size() const override { return local_size_; }
  using Communicator::collective;
  Result<Stats> collective(CollectiveOp op, double bytes, const TimingPolicy& policy,
                           Grouping group) override;
  double max_over_ranks(double v) override {
    double max = v;
    MPI_Allreduce(&v, &max, 1, MPI_DOUBLE, MPI_MAX, comm_);
    return max;
  }

 private:
  /// Sizes the buffers for (op, bytes) in groups of `group_size`; reallocates only on a change.
  void prepare(CollectiveOp op, double bytes, int group_size);
  /// One untimed run of the prepared collective in `group` (this rank's index `index` of
  /// `group_size`); MPI_SUCCESS or an MPI error code.
  int run(CollectiveOp op, MPI_Comm group, int index, int group_size);
  /// This rank's communicator for `g` (the whole job for {size, 1}), made once.
  int group_comm(Grouping g, MPI_Comm* out);

  MPI_Comm comm_;
  std::map<std::pair<int, int>, MPI_Comm> groups_;
  int rank_ = 0;
  int size_ = 1;
  int local_size_ = 1;
  Counts counts_;
  std::vector<float> send_, recv_;
  std::vector<float> scratch_;  // reduce-scatter pieces, staged
  std::optional<std::tuple<CollectiveOp, double, int>> shape_;
};

int MpiCommunicator::group_comm(Grouping g, MPI_Comm* out) {
  if (g.size == size_ && g.stride == 1) {
    *out = comm_;
    return MPI_SUCCESS;
  }
  const auto key = std::make_pair(g.size, g.stride);
  if (auto it = groups_.find(key); it != groups_.end()) {
    *out = it->second;
    return MPI_SUCCESS;
  }
  MPI_Comm sub = MPI_COMM_NULL;
  const int rc = MPI_Comm_split(comm_, group_color(rank_, g), rank_, &sub);
  if (rc != MPI_SUCCESS) return rc;
  MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
  groups_[key] = sub;
  *out = sub;
  return MPI_SUCCESS;
}

void MpiCommunicator::prepare(CollectiveOp op, double bytes, int group_size) {
  const auto shape = std::make_tuple(op, bytes, group_size);
  if (shape_ == shape) return;
  shape_.reset();
  counts_ = counts_for(op, bytes, group_size);
  size_t send = 0, recv = 0;
  switch (op) {
    case CollectiveOp::kAllReduce:  // in place
      recv = static_cast<size_t>(counts_.total);
      break;
    case CollectiveOp::kAllToAll:
    case CollectiveOp::kSendRecv:
      send = recv = static_cast<size_t>(counts_.total);
      break;
    case CollectiveOp::kAllGather:
      send = static_cast<size_t>(counts_.per_rank);
      recv = static_cast<size_t>(counts_.total);
      break;
    case CollectiveOp::kReduceScatter:
      send = static_cast<size_t>(counts_.total);
      recv = static_cast<size_t>(counts_.per_rank);
      break;
  }
  send_.assign(send, 1.0f);
  recv_.assign(recv, 0.0f);
  shape_ = shape;
}

int MpiCommunicator::run(CollectiveOp op, MPI_Comm group, int index, int group_size) {
  const int total = static_cast<int>(counts_.total);
  const int per_rank = static_cast<int>(counts_.per_rank);
  switch (op) {
    case CollectiveOp::kAllReduce:
      // In place, as training reduces its gradients and activations (the executor's
      // ProcessGroup, and NCCL under Megatron and DDP); Open MPI's in-place all-reduce is up to
      // 20% slower than out-of-place on shared memory. In the executor's pieces.
      // Non-blocking calls waited for, as the executor's (which polls its waits).
      return exec::all_reduce_in_pieces(recv_.data(), total, MPI_FLOAT, 4, group,
                                        exec::wait_blocking);
    case CollectiveOp::kAllGather: {
      MPI_Request r = MPI_REQUEST_NULL;
      const int rc = MPI_Iallgather(send_.data(), per_rank, MPI_FLOAT, recv_.data(), per_rank,
                                    MPI_FLOAT, group, &r);
      return rc == MPI_SUCCESS ? exec::wait_blocking(r) : rc;
    }
    case CollectiveOp::kReduceScatter:
      return exec::reduce_scatter_in_pieces(
          send_.data(), std::vector<int64_t>(static_cast<size_t>(group_size), per_rank), index,
          recv_.data(), group, &scratch_, exec::wait_blocking);
    case CollectiveOp::kAllToAll: {
      MPI_Request r = MPI_REQUEST_NULL;
      const int rc = MPI_Ialltoall(send_.data(), per_rank, MPI_FLOAT, recv_.data(), per_rank,
                                   MPI_FLOAT, group, &r);
      return rc == MPI_SUCCESS ? exec::wait_blocking(r) : rc;
    }
    case CollectiveOp::kSendRecv: {
      // Pairs 2i <-> 2i+1 exchange one message each way at once; an odd last rank idles.
      const int peer = index ^ 1;
      if (peer >= group_size) return MPI_SUCCESS;
      return MPI_Sendrecv(send_.data(), total, MPI_FLOAT, peer, 0, recv_.data(), total, MPI_FLOAT,
                          peer, 0, group, MPI_STATUS_IGNORE);
    }
  }
  return MPI_ERR_OTHER;
}

Result<Stats> MpiCommunicator::collective(CollectiveOp op, double bytes, const TimingPolicy& policy,
                                          Grouping grouping) {
  const std::string what =
      std::string("collective ") + parallax::to_string(op) + " " +
      std::to_string(static_cast<int64_t>(bytes)) + " B in groups of " +
      std::to_string(grouping.size) +
      (grouping.stride > 1 ? " ranks " + std::to_string(grouping.stride) + " apart" : " ranks");
  if (size_ < 2) {
    return Diagnostic{what, "collectives need at least 2 ranks, got 1",
                      "launch with mpirun -np 2 or more"};
  }
  if (!valid_grouping(grouping, size_)) {
    return Diagnostic{what,
                      "groups of " + std::to_string(grouping.size) + " ranks " +
                          std::to_string(grouping.stride) + " apart do not tile " +
                          std::to_string(size_) + " ranks",
                      "size >= 2 and size * stride dividing the number of ranks"};
  }
  if (!(bytes > 0) || !std::isfinite(bytes)) {
    return Diagnostic{what, "bytes must be positive, got " + std::to_string(bytes), ""};
  }
  // MPI counts are ints; the largest buffer holds counts.total floats.
  if (!(bytes / sizeof(float) < static_cast<double>(INT_MAX)) ||
      counts_for(op, bytes, grouping.size).total > INT_MAX) {
    return Diagnostic{what, "more than INT_MAX floats in one MPI call",
                      "at most " + std::to_string(int64_t{INT_MAX} * 4) + " bytes"};
  }
  MPI_Comm group = MPI_COMM_NULL;
  if (const int rc = group_comm(grouping, &group); rc != MPI_SUCCESS)
    return Diagnostic{what, "MPI_Comm_split failed: " + mpi_error_text(rc), ""};
  const int index = group_rank(rank_, grouping);
  try {
    prepare(op, bytes, grouping.size);
  } catch (const std::bad_alloc&) {
    return Diagnostic{what, "out of memory allocating the collective's buffers", "smaller sizes"};
  }
  std::string failure;
  auto once = [&]() -> double {
    MPI_Barrier(comm_);
    const double t0 = MPI_Wtime();
    const int rc = run(op, group, index, grouping.size);
    // Every rank learns the slowest duration, and whether any rank failed.
    double local[2] = {MPI_Wtime() - t0, rc == MPI_SUCCESS ? 0.0 : 1.0};
    double slowest[2] = {0, 0};
    if (rc != MPI_SUCCESS && failure.empty()) failure = mpi_error_text(rc);
    if (MPI_Allreduce(local, slowest, 2, MPI_DOUBLE, MPI_MAX, comm_) != MPI_SUCCESS) return -1;
    return slowest[1] > 0 ? -1 : slowest[0];
  };
  Result<Stats> stats = time_repeated(once, policy, what);
  if (!stats.ok() && !failure.empty()) {
    Diagnostics errors = stats.errors();
    errors.push_back(Diagnostic{what, "MPI: " + failure, ""});
    return errors;
  }
  return stats;
}

}  // namespace

Result<std::unique_ptr<Communicator>> make_mpi_communicator(int* argc, char*** argv) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    return Diagnostic{"mpi", "MPI was already finalised in this process",
                      "create the communicator before MPI_Finalize"};
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    exec::prefer_ring_all_reduce();  // as the executor runs its all-reduces
    const int rc = MPI_Init(argc, argv);
    if (rc != MPI_SUCCESS) return Diagnostic{"mpi", "MPI_Init failed: " + mpi_error_text(rc), ""};
    // We started MPI, so we end it; at exit rather than in the destructor, because MPI cannot be
    // initialised twice and a caller may make a second communicator after the first is gone.
    std::atexit(finalize_if_ours);
  }
  // A private communicator: our traffic never matches a caller's messages, and its errors
  // come back as codes instead of aborting the job.
  MPI_Comm comm = MPI_COMM_NULL;
  const int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (rc != MPI_SUCCESS) return Diagnostic{"mpi", "MPI_Comm_dup failed: " + mpi_error_text(rc), ""};
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return std::unique_ptr<Communicator>(std::make_unique<MpiCommunicator>(comm));
}

}  // namespace parallax::calibrate

#endif  // PARALLAX_HAVE_MPI
