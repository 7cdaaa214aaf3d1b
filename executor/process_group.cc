#include "executor/process_group.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <list>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "executor/mpi_liveness.h"
#include "executor/mpi_pieces.h"
#include "executor/op_times.h"

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
  Diagnostics all_gather(std::span<const float> mine, std::span<const int64_t>,
                         std::span<float> out) override {
    std::copy(mine.begin(), mine.end(), out.begin());
    return {};
  }
  Diagnostics reduce_scatter_sum(std::span<const float> data, std::span<const int64_t>,
                                 std::span<float> out) override {
    std::copy(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(out.size()), out.begin());
    return {};
  }
  double max(double v) override { return v; }
  void barrier() override {}
  Result<std::unique_ptr<ProcessGroup>> split(int, int) override {
    return std::unique_ptr<ProcessGroup>(std::make_unique<LocalGroup>());
  }
  Diagnostics all_to_all(std::span<const float> send, std::span<const int64_t>,
                         std::span<float> recv, std::span<const int64_t>) override {
    std::copy(send.begin(), send.end(), recv.begin());
    return {};
  }
  Diagnostics all_to_all(std::span<const int64_t> send, std::span<int64_t> recv) override {
    std::copy(send.begin(), send.end(), recv.begin());
    return {};
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

/// MPI ranks of a communicator. Every collective is non-blocking (in pieces where large), and
/// every wait for one, for a receive or for a send polls its request against a deadline (the
/// group's time-out), answering liveness pings meanwhile (executor/mpi_liveness.h): a rank that
/// never arrives, or stops answering inside a collective its peers are in, does not hang the
/// job. Each member tells the group's first rank (on a duplicate communicator) the number of
/// every collective it enters; when a wait expires the rank pings every rank of the job, names
/// the members that have not arrived and the ranks that do not answer, and aborts the job.
class MpiGroup final : public ProcessGroup {
 public:
  MpiGroup(MPI_Comm comm, double timeout_s, std::shared_ptr<MpiLiveness> liveness,
           int local_size = 1)
      : comm_(comm),
        timeout_s_(timeout_s),
        liveness_(std::move(liveness)),
        local_size_(local_size) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm_dup(comm_, &side_);
    arrived_.assign(static_cast<size_t>(size_), 0);
    MPI_Group mine = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
    MPI_Comm_group(comm_, &mine);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    std::vector<int> local(static_cast<size_t>(size_));
    for (int i = 0; i < size_; ++i) local[i] = i;
    world_ranks_.resize(static_cast<size_t>(size_));
    MPI_Group_translate_ranks(mine, size_, local.data(), world, world_ranks_.data());
    MPI_Group_free(&mine);
    MPI_Group_free(&world);
  }
  ~MpiGroup() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    for (auto& n : notes_) MPI_Request_free(&n.second);
    MPI_Comm_free(&side_);
    MPI_Comm_free(&comm_);
  }
  MpiGroup(const MpiGroup&) = delete;
  MpiGroup& operator=(const MpiGroup&) = delete;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_size() const override { return local_size_; }
  Diagnostics all_reduce_sum(std::span<float> data) override {
    return reduce(data.data(), static_cast<int64_t>(data.size()), MPI_FLOAT);
  }
  Diagnostics all_reduce_sum(std::span<double> data) override {
    return reduce(data.data(), static_cast<int64_t>(data.size()), MPI_DOUBLE);
  }
  Diagnostics reduce_scatter_sum(std::span<const float> data, std::span<float> out) override {
    const OpScope timed(OpKind::kCommunication);
    PX_CHECK(static_cast<int64_t>(data.size()) == static_cast<int64_t>(out.size()) * size_,
             "reduce-scatter of " << data.size() << " into chunks of " << out.size());
    PX_CHECK(out.size() <= static_cast<size_t>(INT_MAX), "chunk over INT_MAX elements");
    const std::vector<int64_t> counts(static_cast<size_t>(size_), static_cast<int64_t>(out.size()));
    return reduce_scatter(data, counts, out);
  }
  Diagnostics all_gather(std::span<const float> chunk, std::span<float> out) override {
    const OpScope timed(OpKind::kCommunication);
    PX_CHECK(static_cast<int64_t>(out.size()) == static_cast<int64_t>(chunk.size()) * size_,
             "all-gather of " << chunk.size() << " into " << out.size());
    PX_CHECK(chunk.size() <= static_cast<size_t>(INT_MAX), "chunk over INT_MAX elements");
    const int n = static_cast<int>(chunk.size());
    return collective("all-gather", out.size(), "MPI_Iallgather", [&](MPI_Request* r) {
      return MPI_Iallgather(chunk.data(), n, MPI_FLOAT, out.data(), n, MPI_FLOAT, comm_, r);
    });
  }
  Diagnostics all_gather(std::span<const float> mine, std::span<const int64_t> counts,
                         std::span<float> out) override {
    const OpScope timed(OpKind::kCommunication);
    const Blocks b = blocks(counts, out.size());
    PX_CHECK(static_cast<int64_t>(mine.size()) == counts[static_cast<size_t>(rank_)],
             "all-gather of " << mine.size() << " values, counted " << counts[rank_]);
    return collective("all-gather", out.size(), "MPI_Iallgatherv", [&](MPI_Request* r) {
      return MPI_Iallgatherv(mine.data(), static_cast<int>(mine.size()), MPI_FLOAT, out.data(),
                             b.counts.data(), b.displs.data(), MPI_FLOAT, comm_, r);
    });
  }
  Diagnostics reduce_scatter_sum(std::span<const float> data, std::span<const int64_t> counts,
                                 std::span<float> out) override {
    const OpScope timed(OpKind::kCommunication);
    blocks(counts, data.size());  // checks the counts against the buffer
    PX_CHECK(static_cast<int64_t>(out.size()) == counts[static_cast<size_t>(rank_)],
             "reduce-scatter into " << out.size() << " values, counted " << counts[rank_]);
    return reduce_scatter(data, counts, out);
  }
  double max(double v) override {
    double out = v;
    collective("max", 1, "MPI_Iallreduce", [&](MPI_Request* r) {
      return MPI_Iallreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, comm_, r);
    });
    return out;
  }
  void barrier() override {
    collective("barrier", 0, "MPI_Ibarrier",
               [&](MPI_Request* r) { return MPI_Ibarrier(comm_, r); });
  }
  Diagnostics all_to_all(std::span<const float> send, std::span<const int64_t> send_counts,
                         std::span<float> recv, std::span<const int64_t> recv_counts) override {
    const OpScope timed(OpKind::kCommunication);
    PX_CHECK(static_cast<int>(send_counts.size()) == size_ &&
                 static_cast<int>(recv_counts.size()) == size_,
             "all-to-all needs one count per rank");
    const Blocks s = blocks(send_counts, send.size()), d = blocks(recv_counts, recv.size());
    return collective("all-to-all", send.size(), "MPI_Ialltoallv", [&](MPI_Request* r) {
      return MPI_Ialltoallv(send.data(), s.counts.data(), s.displs.data(), MPI_FLOAT, recv.data(),
                            d.counts.data(), d.displs.data(), MPI_FLOAT, comm_, r);
    });
  }
  Diagnostics all_to_all(std::span<const int64_t> send, std::span<int64_t> recv) override {
    const OpScope timed(OpKind::kCommunication);
    PX_CHECK(send.size() == recv.size() && send.size() % static_cast<size_t>(size_) == 0,
             "all-to-all of counts: " << send.size() << " values over " << size_ << " ranks");
    const int per = static_cast<int>(send.size() / static_cast<size_t>(size_));
    return collective("all-to-all of counts", send.size(), "MPI_Ialltoall", [&](MPI_Request* r) {
      return MPI_Ialltoall(send.data(), per, MPI_INT64_T, recv.data(), per, MPI_INT64_T, comm_, r);
    });
  }
  Diagnostics send(std::span<const float> data, int dest, int tag) override {
    const OpScope timed(OpKind::kCommunication);
    if (Diagnostics d = reap(false); !d.empty()) return d;
    PX_CHECK(data.size() <= static_cast<size_t>(INT_MAX), "message over INT_MAX elements");
    pending_.push_back({std::vector<float>(data.begin(), data.end()), MPI_REQUEST_NULL, dest});
    Pending& p = pending_.back();
    return check(MPI_Isend(p.data.data(), static_cast<int>(p.data.size()), MPI_FLOAT, dest, tag,
                           comm_, &p.request),
                 "MPI_Isend");
  }
  Diagnostics recv(std::span<float> data, int src, int tag) override {
    const OpScope timed(OpKind::kCommunication);
    PX_CHECK(data.size() <= static_cast<size_t>(INT_MAX), "message over INT_MAX elements");
    MPI_Request r = MPI_REQUEST_NULL;
    if (Diagnostics d = check(
            MPI_Irecv(data.data(), static_cast<int>(data.size()), MPI_FLOAT, src, tag, comm_, &r),
            "MPI_Irecv");
        !d.empty())
      return d;
    MPI_Status status;
    if (!wait(r, &status))
      expired("a message of " + std::to_string(data.size()) + " values from rank " +
                  std::to_string(world_ranks_[src]),
              false);
    int count = 0;
    MPI_Get_count(&status, MPI_FLOAT, &count);
    if (static_cast<size_t>(count) != data.size())
      return {Diagnostic{"rank " + std::to_string(rank_),
                         "received " + std::to_string(count) + " values from rank " +
                             std::to_string(src) + ", expected " + std::to_string(data.size()),
                         ""}};
    return reap(false);
  }
  Diagnostics wait_sends() override {
    const OpScope timed(OpKind::kCommunication);
    return reap(true);
  }
  Result<std::unique_ptr<ProcessGroup>> split(int color, int key) override {
    MPI_Comm sub = MPI_COMM_NULL;
    if (Diagnostics d = check(MPI_Comm_split(comm_, color, key, &sub), "MPI_Comm_split");
        !d.empty())
      return d;
    MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
    return std::unique_ptr<ProcessGroup>(std::make_unique<MpiGroup>(sub, timeout_s_, liveness_));
  }

 private:
  /// MPI's int counts and displacements of one block per rank, checked against `total`.
  struct Blocks {
    std::vector<int> counts, displs;
  };
  Blocks blocks(std::span<const int64_t> counts, size_t total) const {
    PX_CHECK(static_cast<int>(counts.size()) == size_, "one count per rank, got " << counts.size());
    Blocks b;
    int64_t at = 0;
    for (const int64_t c : counts) {
      PX_CHECK(c >= 0 && at + c <= INT_MAX, "block of " << c << " values at " << at);
      b.counts.push_back(static_cast<int>(c));
      b.displs.push_back(static_cast<int>(at));
      at += c;
    }
    PX_CHECK(at == static_cast<int64_t>(total), "blocks sum to " << at << ", buffer " << total);
    return b;
  }
  /// A waiter for mpi_pieces.h: the polled wait, expiring as collective `what` of `values`.
  auto piece_wait(const char* what, size_t values) {
    return [this, what, values](MPI_Request& r) {
      if (!wait(r, nullptr)) expired(describe(what, values), true);
      return MPI_SUCCESS;
    };
  }
  Diagnostics reduce(void* data, int64_t n, MPI_Datatype type) {
    const OpScope timed(OpKind::kCommunication);
    // In pieces (executor/mpi_pieces.h): MPI's large-message algorithms are far slower, and its
    // counts are ints.
    enter();
    return check(all_reduce_in_pieces(data, n, type, type == MPI_FLOAT ? 4 : 8, comm_,
                                      piece_wait("all-reduce", static_cast<size_t>(n))),
                 "MPI_Iallreduce");
  }
  Diagnostics reduce_scatter(std::span<const float> data, std::span<const int64_t> counts,
                             std::span<float> out) {
    enter();
    return check(reduce_scatter_in_pieces(data.data(), counts, rank_, out.data(), comm_, &scratch_,
                                          piece_wait("reduce-scatter", data.size())),
                 "MPI_Ireduce_scatter");
  }
  /// Enters collective `what` of `values`: started by `start` (an MPI call taking the request),
  /// then waited for against the deadline.
  template <typename Start>
  Diagnostics collective(const char* what, size_t values, const char* call, Start&& start) {
    enter();
    MPI_Request r = MPI_REQUEST_NULL;
    if (Diagnostics d = check(start(&r), call); !d.empty()) return d;
    if (!wait(r, nullptr)) expired(describe(what, values), true);
    return {};
  }
  std::string describe(const char* what, size_t values) const {
    return std::string(what) + " #" + std::to_string(seq_) +
           (values > 0 ? " of " + std::to_string(values) + " values" : std::string()) + " over " +
           members();
  }

  /// Tells the group's first rank that this rank entered collective number `seq_`.
  void enter() {
    ++seq_;
    if (rank_ == 0) return;
    notes_.push_back({seq_, MPI_REQUEST_NULL});  // the buffer stays put until sent
    MPI_Isend(&notes_.back().first, 1, MPI_INT64_T, 0, kArrivalTag, side_, &notes_.back().second);
  }

  /// Waits for `r` until the time-out, answering liveness pings; false when it expired.
  bool wait(MPI_Request& r, MPI_Status* status) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
    for (int spins = 0;; ++spins) {
      int done = 0;
      MPI_Test(&r, &done, status ? status : MPI_STATUS_IGNORE);
      if (done) break;
      if (rank_ == 0) drain_arrivals();
      if ((spins & 63) == 63) liveness_->answer();
      if ((spins & 1023) == 1023) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::yield();
      }
    }
    if (rank_ != 0) reap_notes();
    return true;
  }

  /// Rank 0 of the group: records which collective each member has entered.
  void drain_arrivals() {
    for (;;) {
      int flag = 0;
      MPI_Status st;
      MPI_Iprobe(MPI_ANY_SOURCE, kArrivalTag, side_, &flag, &st);
      if (!flag) return;
      int64_t seq = 0;
      MPI_Recv(&seq, 1, MPI_INT64_T, st.MPI_SOURCE, kArrivalTag, side_, MPI_STATUS_IGNORE);
      arrived_[st.MPI_SOURCE] = std::max(arrived_[st.MPI_SOURCE], seq);
    }
  }
  void reap_notes() {
    std::erase_if(notes_, [](std::pair<int64_t, MPI_Request>& n) {
      int done = 0;
      MPI_Test(&n.second, &done, MPI_STATUS_IGNORE);
      return done != 0;
    });
  }
  std::string members() const {
    std::string m = "ranks {";
    for (int i = 0; i < size_; ++i) m += (i ? ", " : "") + std::to_string(world_ranks_[i]);
    return m + "}";
  }
  /// The wait for `what` expired: names the ranks that do not answer (pinging every rank of
  /// the job) and, on the group's first rank in a collective, the members that have not
  /// arrived; reports it on stderr in one write and aborts the job. One report: a rank that
  /// finds a lower rank still answering leaves the report to it, unless that one stays silent
  /// for another period (it may wait elsewhere).
  [[noreturn]] void expired(const std::string& what, bool in_collective) {
    const double grace = std::clamp(0.2 * timeout_s_, 0.5, 5.0);
    const std::vector<int> silent = liveness_->silent_ranks(grace);
    const int me = liveness_->world_rank();
    int lowest = me;
    for (int r = 0; r < me; ++r)
      if (!std::binary_search(silent.begin(), silent.end(), r)) {
        lowest = r;
        break;
      }
    if (lowest != me) liveness_->linger(timeout_s_ + grace);
    std::vector<int> absent;  // members that have not entered this collective
    if (in_collective && rank_ == 0) {
      drain_arrivals();
      for (int i = 1; i < size_; ++i)
        if (arrived_[i] < seq_) absent.push_back(world_ranks_[i]);
    }
    std::string why;
    if (!silent.empty())
      why = "rank(s) " + rank_list(silent) + " do not answer (stopped, or busy outside MPI)";
    if (!absent.empty())
      why += (why.empty() ? "" : "; ") + std::string("rank(s) ") + rank_list(absent) +
             " have not arrived";
    if (why.empty()) why = "every rank answers: the wait is longer than the time-out";
    MpiLiveness::abort_job("error: rank " + std::to_string(me) + ": waited " +
                               format_seconds(timeout_s_) + " for " + what + ": " + why +
                               " (hint: --timeout sets the limit)\n",
                           grace);
  }
  static std::string rank_list(const std::vector<int>& ranks) {
    std::string s;
    for (const int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
    return s;
  }
  static std::string format_seconds(double s) {
    char b[32];
    std::snprintf(b, sizeof b, "%.0f s", s);
    return b;
  }
  Diagnostics check(int rc, const char* call) const {
    if (rc == MPI_SUCCESS) return {};
    return {Diagnostic{"rank " + std::to_string(rank_),
                       std::string(call) + " failed: " + mpi_error(rc), ""}};
  }
  /// Frees the copies of delivered sends (all of them, waiting, when `all`).
  Diagnostics reap(bool all) {
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (all) {
        if (!wait(it->request, nullptr))
          expired("rank " + std::to_string(world_ranks_[it->dest]) + " to receive a message",
                  false);
        it = pending_.erase(it);
        continue;
      }
      int done = 0;
      if (Diagnostics d = check(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE), "MPI_Test");
          !d.empty())
        return d;
      it = done ? pending_.erase(it) : std::next(it);
    }
    return {};
  }
  struct Pending {
    std::vector<float> data;
    MPI_Request request;
    int dest = 0;
  };
  static constexpr int kArrivalTag = 1;
  MPI_Comm comm_, side_ = MPI_COMM_NULL;
  double timeout_s_;
  std::shared_ptr<MpiLiveness> liveness_;
  int local_size_ = 1;
  int rank_ = 0, size_ = 1;
  std::vector<float> scratch_;    // reduce-scatter pieces, staged
  int64_t seq_ = 0;               // collectives this rank has entered on this group
  std::vector<int64_t> arrived_;  // rank 0: the newest collective each member has entered
  std::vector<int> world_ranks_;
  // Arrival notes in flight, with their values (a list: neither may move until sent).
  std::list<std::pair<int64_t, MPI_Request>> notes_;
  std::list<Pending> pending_;  // a list: requests must not move while in flight
};
#endif

}  // namespace

std::unique_ptr<ProcessGroup> make_local_group() { return std::make_unique<LocalGroup>(); }

Result<RankGroups> split_groups(ProcessGroup& world, int tp, int cp, int pp) {
  PX_CHECK(tp >= 1 && cp >= 1 && pp >= 1 && world.size() % (tp * cp * pp) == 0,
           "tp=" << tp << " cp=" << cp << " pp=" << pp << " over " << world.size() << " ranks");
  ParallelPlan layout;
  layout.tp = tp;
  layout.cp = cp;
  layout.pp = pp;
  layout.dp = world.size() / (tp * cp * pp);
  const RankMap ranks(layout, tp);
  RankGroups g;
  g.me = ranks.coords(world.rank());
  g.dp = layout.dp;
  const RankCoords& me = g.me;
  // Each group is named by its member with the group's own coordinates at zero.
  const std::pair<std::unique_ptr<ProcessGroup>*, std::pair<int, int>> splits[] = {
      {&g.tp, {ranks.rank_of(0, me.cp, me.dp, me.pp), me.tp}},
      {&g.cp, {ranks.rank_of(me.tp, 0, me.dp, me.pp), me.cp}},
      {&g.data, {ranks.rank_of(me.tp, 0, 0, me.pp), me.dp * cp + me.cp}},
      {&g.pp, {ranks.rank_of(me.tp, me.cp, me.dp, 0), me.pp}}};
  for (const auto& [out, color_key] : splits) {
    auto sub = world.split(color_key.first, color_key.second);
    if (!sub) return sub.errors();
    *out = std::move(sub).value();
  }
  return g;
}

Result<std::unique_ptr<ProcessGroup>> make_mpi_world(double timeout_s) {
#ifdef PARALLAX_HAVE_MPI
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    prefer_ring_all_reduce();
    const int rc = MPI_Init(nullptr, nullptr);
    if (rc != MPI_SUCCESS) return Diagnostic{"mpi", "MPI_Init failed: " + mpi_error(rc), ""};
    std::atexit(finalize_at_exit);
  }
  MPI_Comm comm = MPI_COMM_NULL;
  const int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (rc != MPI_SUCCESS) return Diagnostic{"mpi", "MPI_Comm_dup failed: " + mpi_error(rc), ""};
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  // The ranks sharing this host.
  int local_size = 1;
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
    MPI_Comm_size(node, &local_size);
    MPI_Comm_free(&node);
  }
  return std::unique_ptr<ProcessGroup>(
      std::make_unique<MpiGroup>(comm, timeout_s, std::make_shared<MpiLiveness>(), local_size));
#else
  return Diagnostic{"mpi", "this build has no MPI", "install OpenMPI (libopenmpi-dev) and rebuild"};
#endif
}

}  // namespace parallax::exec
