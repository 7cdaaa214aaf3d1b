// NcclCommunicator: times NCCL collectives in one of two modes.
//   Multi-process (launched with mpirun, world size > 1): one GPU per rank, the GPU being the
//     rank's index on its node; rank 0's ncclUniqueId is broadcast with MPI_Bcast.
//   Single process (no MPI, or a world of one): this process drives every visible GPU through
//     ncclCommInitAll, each call issued for all GPUs between ncclGroupStart and ncclGroupEnd.
// A grouped collective runs on communicators made once per grouping and kept: in multi-process
// mode each rank joins its group's (the group's rank 0 sends its ncclUniqueId over an
// MPI_Comm_split of the world); in one process, one ncclCommInitAll per group over that group's
// GPUs. The whole-world grouping uses the communicator made at start. The barrier before a
// repetition and the slowest time stay over the whole job, so all groups run at once and every
// rank agrees on the result.
// Buffers are bf16; sizes follow the nccl-tests conventions of Communicator::collective.

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#ifdef PARALLAX_CALIBRATE_NCCL_MPI
#include <mpi.h>
#endif

#include "calibrate/backend.h"
#include "calibrate/cuda/cuda_logic.h"
#include "calibrate/cuda/cuda_status.h"
#include "calibrate/cuda/device_buffer.h"
#include "calibrate/cuda/kernels.h"
#include "calibrate/cuda/stream_timer.h"

namespace parallax::calibrate {
namespace {

using gpu::DeviceBuffer;

constexpr int kElemBytes = 2;  // bf16

Diagnostic nccl_diagnostic(const std::string& call, ncclResult_t r) {
  const char* detail = ncclGetLastError(nullptr);
  std::string what = call + " failed: " + ncclGetErrorString(r);
  if (detail != nullptr && *detail != '\0') what += ": " + std::string(detail);
  return Diagnostic{"nccl", what,
                    r == ncclSystemError || r == ncclRemoteError
                        ? "check the interconnect; NCCL_DEBUG=INFO shows where it failed"
                        : "NCCL_DEBUG=WARN gives NCCL's own account"};
}

#define PX_NCCL_TRY(call)                                                      \
  do {                                                                         \
    const ncclResult_t px_nccl_result_ = (call);                               \
    if (px_nccl_result_ != ncclSuccess)                                        \
      return ::parallax::Diagnostics{nccl_diagnostic(#call, px_nccl_result_)}; \
  } while (0)

// One GPU's share: its communicator, stream, events and buffers.
struct Rank {
  int device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  DeviceBuffer send, recv;
};

// Where one GPU of this process sits in its group of a grouping.
struct GroupSeat {
  ncclComm_t comm = nullptr;
  int rank = 0;  // within the group
  int size = 1;  // ranks of the group
};

// The communicators of one grouping, one per GPU of this process (in the order of its Ranks), or
// why they could not be made: kept, so that every later call with the grouping fails alike on
// every rank instead of retrying.
struct GroupComms {
  std::vector<ncclComm_t> comms;
  Diagnostics failure;
};

class NcclCommunicator final : public Communicator {
 public:
  ~NcclCommunicator() override;
  static Result<std::unique_ptr<Communicator>> create(int* argc, char*** argv);

  std::string name() const override { return "nccl"; }
  std::string runtime() const override {
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess) return "NCCL";
    // NCCL 2.9+ encodes major * 10000 + minor * 100 + patch.
    return "NCCL " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
           std::to_string(v % 100);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_size() const override { return local_size_; }
  using Communicator::collective;
  Result<Stats> collective(CollectiveOp op, double bytes, const TimingPolicy& policy,
                           Grouping group) override;
  double max_over_ranks(double v) override;

 private:
  NcclCommunicator() = default;
  Diagnostics init_single_process();
#ifdef PARALLAX_CALIBRATE_NCCL_MPI
  Diagnostics init_multi_process();
  bool any_rank_failed(bool failed);
#endif
  Diagnostics add_rank(int device);
  // Each GPU of this process in its group of `g` (valid); makes the communicators on first use.
  Result<std::vector<GroupSeat>> seats(Grouping g);
  Diagnostics init_group(Grouping g, std::vector<ncclComm_t>* comms);
  Diagnostics init_group_single_process(Grouping g, std::vector<ncclComm_t>* comms);
#ifdef PARALLAX_CALIBRATE_NCCL_MPI
  Diagnostics init_group_multi_process(Grouping g, ncclComm_t* comm);
#endif
  void destroy_comms(std::vector<ncclComm_t>* comms);
  Diagnostics reserve_buffers(const gpu::CollectiveCounts& c, const std::string& what);
  Diagnostics enqueue(Rank& r, const GroupSeat& seat, CollectiveOp op,
                      const gpu::CollectiveCounts& c);
  double time_once(CollectiveOp op, const gpu::CollectiveCounts& c,
                   const std::vector<GroupSeat>& seats);

  std::vector<Rank> ranks_;  // one in multi-process mode, every visible GPU otherwise
  std::map<std::pair<int, int>, GroupComms> groups_;  // by (size, stride), whole world excepted
  int rank_ = 0, size_ = 1, local_size_ = 1;
  bool multi_process_ = false;
  bool owns_mpi_ = false;  // we initialised MPI, so we finalise it
  std::optional<Diagnostic> error_;
};

NcclCommunicator::~NcclCommunicator() {
  // Errors are ignored here: a destructor has no one to report to.
  for (Rank& r : ranks_) {
    cudaSetDevice(r.device);
    if (r.stream != nullptr) cudaStreamSynchronize(r.stream);
  }
  for (auto& [key, group] : groups_) destroy_comms(&group.comms);
  for (Rank& r : ranks_) {
    cudaSetDevice(r.device);
    if (r.comm != nullptr) ncclCommDestroy(r.comm);
    if (r.start != nullptr) cudaEventDestroy(r.start);
    if (r.stop != nullptr) cudaEventDestroy(r.stop);
    if (r.stream != nullptr) cudaStreamDestroy(r.stream);
    r.send.reset();
    r.recv.reset();
  }
#ifdef PARALLAX_CALIBRATE_NCCL_MPI
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_mpi_ && !finalized) MPI_Finalize();
#endif
}

Diagnostics NcclCommunicator::add_rank(int device) {
  Rank& r = ranks_.emplace_back();
  r.device = device;
  PX_CUDA_TRY(cudaSetDevice(device));
  PX_CUDA_TRY(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
  PX_CUDA_TRY(cudaEventCreate(&r.start));
  PX_CUDA_TRY(cudaEventCreate(&r.stop));
  return {};
}

Diagnostics NcclCommunicator::init_single_process() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    cudaGetLastError();
    const std::string why = e != cudaSuccess ? std::string(": ") + cudaGetErrorString(e) : "";
    return {Diagnostic{"nccl", "no CUDA device" + why,
                       "run on a machine with NVIDIA GPUs (check nvidia-smi)"}};
  }
  size_ = local_size_ = count;
  for (int d = 0; d < count; ++d) PX_DIAG_TRY(add_rank(d));
  std::vector<ncclComm_t> comms(count);
  PX_NCCL_TRY(ncclCommInitAll(comms.data(), count, nullptr));
  for (int d = 0; d < count; ++d) ranks_[d].comm = comms[d];
  return {};
}

#ifdef PARALLAX_CALIBRATE_NCCL_MPI
// Every rank learns whether any rank failed, so that all give up together instead of some
// waiting forever in a collective the others never join.
bool NcclCommunicator::any_rank_failed(bool failed) {
  int flag = failed ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &flag, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return flag != 0;
}

Diagnostics NcclCommunicator::init_multi_process() {
  multi_process_ = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
  int local_rank = 0;
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_size(node, &local_size_);
  MPI_Comm_free(&node);
  const std::string where = "nccl rank " + std::to_string(rank_);

  Diagnostics local;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    local.push_back({where, "no CUDA device", "run one rank per GPU on GPU nodes"});
  } else if (local_rank >= count) {
    local.push_back(
        {where,
         "local rank " + std::to_string(local_rank) + " has no GPU, got " + std::to_string(count) +
             " GPUs on this node",
         "launch at most one rank per GPU (mpirun -npernode " + std::to_string(count) + ")"});
  } else {
    local = add_rank(local_rank);
  }
  if (any_rank_failed(!local.empty())) {
    if (local.empty()) local.push_back({where, "another rank failed to set up its GPU", ""});
    return local;
  }

  // Rank 0 makes the id; its status travels with it so that everyone stops on a failure.
  ncclUniqueId id{};
  int id_status = rank_ == 0 ? static_cast<int>(ncclGetUniqueId(&id)) : 0;
  MPI_Bcast(&id_status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (id_status != ncclSuccess) {
    return {nccl_diagnostic("ncclGetUniqueId on rank 0", static_cast<ncclResult_t>(id_status))};
  }
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  const ncclResult_t init = ncclCommInitRank(&ranks_[0].comm, size_, id, rank_);
  if (init != ncclSuccess) ranks_[0].comm = nullptr;
  if (any_rank_failed(init != ncclSuccess)) {
    if (init != ncclSuccess) return {nccl_diagnostic("ncclCommInitRank", init)};
    return {Diagnostic{where, "another rank failed to join the NCCL communicator", ""}};
  }
  return {};
}
#endif

Result<std::unique_ptr<Communicator>> NcclCommunicator::create(int* argc, char*** argv) {
  std::unique_ptr<NcclCommunicator> c(new NcclCommunicator());
#ifdef PARALLAX_CALIBRATE_NCCL_MPI
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
      return Diagnostic{"nccl", "MPI_Init_thread failed", "check the MPI installation"};
    }
    c->owns_mpi_ = true;
  }
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  PX_DIAG_TRY(world > 1 ? c->init_multi_process() : c->init_single_process());
#else
  (void)argc;
  (void)argv;
  PX_DIAG_TRY(c->init_single_process());
#endif
  return std::unique_ptr<Communicator>(std::move(c));
}

Result<std::vector<GroupSeat>> NcclCommunicator::seats(Grouping g) {
  std::vector<ncclComm_t> comms;
  if (g.size == size_ && g.stride == 1) {
    for (const Rank& r : ranks_) comms.push_back(r.comm);
  } else {
    const auto key = std::make_pair(g.size, g.stride);
    auto it = groups_.find(key);
    if (it == groups_.end()) {
      GroupComms made;
      made.comms.assign(ranks_.size(), nullptr);
      made.failure = init_group(g, &made.comms);
      it = groups_.emplace(key, std::move(made)).first;
    }
    if (!it->second.failure.empty()) return it->second.failure;
    comms = it->second.comms;
  }
  std::vector<GroupSeat> out;
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    // In one process the GPUs are the ranks 0..n-1 of the job.
    const int world_rank = multi_process_ ? rank_ : static_cast<int>(i);
    out.push_back({comms[i], group_rank(world_rank, g), g.size});
  }
  return out;
}

Diagnostics NcclCommunicator::init_group(Grouping g, std::vector<ncclComm_t>* comms) {
#ifdef PARALLAX_CALIBRATE_NCCL_MPI
  if (multi_process_) return init_group_multi_process(g, &comms->front());
#endif
  return init_group_single_process(g, comms);
}

// One clique per group, over the GPUs of the group in group-rank order, so that NCCL's rank i
// of a clique is the GPU of group rank i.
Diagnostics NcclCommunicator::init_group_single_process(Grouping g,
                                                        std::vector<ncclComm_t>* comms) {
  for (const std::vector<int>& members : gpu::grouping_members(g, size_)) {
    std::vector<int> devices;
    std::string listed;
    for (int m : members) {
      devices.push_back(ranks_[m].device);
      if (!listed.empty()) listed += ",";
      listed += std::to_string(ranks_[m].device);
    }
    std::vector<ncclComm_t> clique(devices.size(), nullptr);
    const ncclResult_t r = ncclCommInitAll(clique.data(), g.size, devices.data());
    if (r != ncclSuccess) {
      destroy_comms(comms);  // the cliques of the groups before
      return {nccl_diagnostic(
          "ncclCommInitAll over GPUs {" + listed + "} (" + gpu::describe_grouping(g) + ")", r)};
    }
    for (std::size_t k = 0; k < members.size(); ++k) (*comms)[members[k]] = clique[k];
  }
  return {};
}

#ifdef PARALLAX_CALIBRATE_NCCL_MPI
// Every rank of the job takes part (all call collective with the same grouping), and every
// failure is agreed over the whole job, so that either all groups have a communicator or all
// ranks give up; a group that succeeded while another failed destroys its communicator.
Diagnostics NcclCommunicator::init_group_multi_process(Grouping g, ncclComm_t* comm) {
  const std::string where = "nccl rank " + std::to_string(rank_);
  const std::string in = " (" + gpu::describe_grouping(g) + ")";
  const int index = group_rank(rank_, g);
  // Keyed by world rank, the group's ranks keep their order: the sub-communicator's rank 0 is
  // the group's rank 0.
  MPI_Comm sub = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, group_color(rank_, g), rank_, &sub);
  ncclUniqueId id{};
  int id_status = index == 0 ? static_cast<int>(ncclGetUniqueId(&id)) : 0;
  MPI_Bcast(&id_status, 1, MPI_INT, 0, sub);
  if (id_status == ncclSuccess) MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, sub);
  MPI_Comm_free(&sub);
  if (any_rank_failed(id_status != ncclSuccess)) {
    if (id_status != ncclSuccess) {
      return {nccl_diagnostic("ncclGetUniqueId on group rank 0" + in,
                              static_cast<ncclResult_t>(id_status))};
    }
    return {Diagnostic{where, "another group failed to make its NCCL id" + in, ""}};
  }
  const cudaError_t device = cudaSetDevice(ranks_[0].device);
  ncclResult_t init = ncclInvalidUsage;
  if (device == cudaSuccess) init = ncclCommInitRank(comm, g.size, id, index);
  if (init != ncclSuccess) *comm = nullptr;
  if (any_rank_failed(init != ncclSuccess)) {
    if (device != cudaSuccess) return {gpu::cuda_diagnostic("cudaSetDevice", device)};
    if (init != ncclSuccess) return {nccl_diagnostic("ncclCommInitRank" + in, init)};
    ncclCommDestroy(*comm);
    *comm = nullptr;
    return {
        Diagnostic{where, "another rank failed to join its group's NCCL communicator" + in, ""}};
  }
  return {};
}
#endif

void NcclCommunicator::destroy_comms(std::vector<ncclComm_t>* comms) {
  for (std::size_t i = 0; i < comms->size(); ++i) {
    if ((*comms)[i] == nullptr) continue;
    cudaSetDevice(ranks_[i].device);
    ncclCommDestroy((*comms)[i]);
    (*comms)[i] = nullptr;
  }
}

Diagnostics NcclCommunicator::enqueue(Rank& r, const GroupSeat& seat, CollectiveOp op,
                                      const gpu::CollectiveCounts& c) {
  const void* send = r.send.as<void>();
  void* recv = r.recv.as<void>();
  const auto count = [](int64_t elems) { return static_cast<size_t>(elems); };
  switch (op) {
    case CollectiveOp::kAllReduce:
      PX_NCCL_TRY(ncclAllReduce(send, recv, count(c.send_elems), ncclBfloat16, ncclSum, seat.comm,
                                r.stream));
      break;
    case CollectiveOp::kAllGather:
      PX_NCCL_TRY(
          ncclAllGather(send, recv, count(c.chunk_elems), ncclBfloat16, seat.comm, r.stream));
      break;
    case CollectiveOp::kReduceScatter:
      PX_NCCL_TRY(ncclReduceScatter(send, recv, count(c.chunk_elems), ncclBfloat16, ncclSum,
                                    seat.comm, r.stream));
      break;
    case CollectiveOp::kAllToAll: {
      const size_t chunk_bytes = count(c.chunk_elems) * kElemBytes;
      PX_NCCL_TRY(ncclGroupStart());
      for (int peer = 0; peer < seat.size; ++peer) {
        PX_NCCL_TRY(ncclSend(static_cast<const char*>(send) + peer * chunk_bytes,
                             count(c.chunk_elems), ncclBfloat16, peer, seat.comm, r.stream));
        PX_NCCL_TRY(ncclRecv(static_cast<char*>(recv) + peer * chunk_bytes, count(c.chunk_elems),
                             ncclBfloat16, peer, seat.comm, r.stream));
      }
      PX_NCCL_TRY(ncclGroupEnd());
      break;
    }
    case CollectiveOp::kSendRecv: {
      // Both ranks of a pair of the group send one message and receive one, at the same time.
      const int partner = gpu::sendrecv_partner(seat.rank, seat.size);
      if (partner < 0) break;  // the odd rank out of the group idles
      PX_NCCL_TRY(ncclGroupStart());
      PX_NCCL_TRY(ncclSend(send, count(c.send_elems), ncclBfloat16, partner, seat.comm, r.stream));
      PX_NCCL_TRY(ncclRecv(recv, count(c.recv_elems), ncclBfloat16, partner, seat.comm, r.stream));
      PX_NCCL_TRY(ncclGroupEnd());
      break;
    }
  }
  return {};
}

// One repetition on every GPU of this process, each in its group; in multi-process mode the
// slowest rank's time over all groups, agreed by all ranks (so every rank's time_repeated sees
// the same values and stops together).
double NcclCommunicator::time_once(CollectiveOp op, const gpu::CollectiveCounts& c,
                                   const std::vector<GroupSeat>& seats) {
  // The host enqueues for every GPU of this process in turn; the shield must outlast all that.
  const uint64_t shield_ns = gpu::kLaunchShieldNs * (1 + ranks_.size());
#ifdef PARALLAX_CALIBRATE_NCCL_MPI
  // Ranks leave the barrier within microseconds of each other, so that a rank's time is the
  // collective's, not the wait for a late peer; a barrier over the whole job starts every group
  // together.
  if (multi_process_) MPI_Barrier(MPI_COMM_WORLD);
#endif
  auto step = [&]() -> Diagnostics {
    for (Rank& r : ranks_) {
      PX_CUDA_TRY(cudaSetDevice(r.device));
      PX_CUDA_TRY(gpu::launch_delay(shield_ns, r.stream));
      PX_CUDA_TRY(cudaEventRecord(r.start, r.stream));
    }
    PX_NCCL_TRY(ncclGroupStart());
    for (std::size_t i = 0; i < ranks_.size(); ++i) {
      Diagnostics ds = enqueue(ranks_[i], seats[i], op, c);
      if (!ds.empty()) {
        ncclGroupEnd();
        return ds;
      }
    }
    PX_NCCL_TRY(ncclGroupEnd());
    for (Rank& r : ranks_) PX_CUDA_TRY(cudaEventRecord(r.stop, r.stream));
    return {};
  };
  double slowest = 0;
  Diagnostics ds = step();
  for (Rank& r : ranks_) {
    if (!ds.empty()) break;
    float ms = 0;
    cudaError_t e = cudaEventSynchronize(r.stop);
    if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, r.start, r.stop);
    if (e != cudaSuccess) ds.push_back(gpu::cuda_diagnostic("cudaEventElapsedTime", e));
    slowest = std::max(slowest, ms / 1000.0);
  }
  if (!ds.empty() && !error_) error_ = ds.front();
  double result[2] = {slowest, ds.empty() ? 0.0 : 1.0};
#ifdef PARALLAX_CALIBRATE_NCCL_MPI
  if (multi_process_) MPI_Allreduce(MPI_IN_PLACE, result, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
#endif
  return result[1] > 0 ? -1.0 : result[0];
}

Diagnostics NcclCommunicator::reserve_buffers(const gpu::CollectiveCounts& c,
                                              const std::string& what) {
  const auto send_bytes = static_cast<std::size_t>(c.send_elems) * kElemBytes;
  const auto recv_bytes = static_cast<std::size_t>(c.recv_elems) * kElemBytes;
  for (Rank& r : ranks_) {
    bool grown = false;
    if (cudaSetDevice(r.device) != cudaSuccess)
      return {Diagnostic{what, "cudaSetDevice failed", ""}};
    PX_DIAG_TRY(r.send.reserve(send_bytes, "collective send buffer", &grown));
    if (grown) PX_CUDA_TRY(cudaMemset(r.send.as<void>(), 0, r.send.bytes()));
    PX_DIAG_TRY(r.recv.reserve(recv_bytes, "collective receive buffer", &grown));
  }
  return {};
}

Result<Stats> NcclCommunicator::collective(CollectiveOp op, double bytes,
                                           const TimingPolicy& policy, Grouping group) {
  const std::string what = std::string("nccl ") + to_string(op) + " " +
                           std::to_string(static_cast<int64_t>(bytes)) + " B in " +
                           gpu::describe_grouping(group);
  // Every rank has the same arguments and the same world, so every rank refuses alike.
  if (!valid_grouping(group, size_)) return gpu::check_grouping(group, size_, what);
  Result<std::vector<GroupSeat>> seated = seats(group);
  if (!seated.ok()) return seated.errors();
  // Counts within a group: the nccl-tests sizes are per group.
  const gpu::CollectiveCounts c = gpu::collective_counts(op, bytes, group.size, kElemBytes);
  Diagnostics local = reserve_buffers(c, what);
#ifdef PARALLAX_CALIBRATE_NCCL_MPI
  if (multi_process_ && any_rank_failed(!local.empty()) && local.empty()) {
    local.push_back({what, "another rank failed to allocate its buffers", ""});
  }
#endif
  if (!local.empty()) return local;

  error_.reset();
  Result<Stats> stats = time_repeated([&] { return time_once(op, c, *seated); }, policy, what);
  if (stats.ok() || !error_) return stats;
  Diagnostics ds = stats.errors();
  ds.push_back(*error_);
  return ds;
}

double NcclCommunicator::max_over_ranks(double v) {
#ifdef PARALLAX_CALIBRATE_NCCL_MPI
  if (multi_process_) MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
#endif
  return v;
}

}  // namespace

Result<std::unique_ptr<Communicator>> make_nccl_communicator(int* argc, char*** argv) {
  return NcclCommunicator::create(argc, argv);
}

}  // namespace parallax::calibrate
