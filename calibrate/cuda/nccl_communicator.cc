// NcclCommunicator: times NCCL collectives in one of two modes.
//   Multi-process (launched with mpirun, world size > 1): one GPU per rank, the GPU being the
//     rank's index on its node; rank 0's ncclUniqueId is broadcast with MPI_Bcast.
//   Single process (no MPI, or a world of one): this process drives every visible GPU through
//     ncclCommInitAll, each call issued for all GPUs between ncclGroupStart and ncclGroupEnd.
// Buffers are bf16; sizes follow the nccl-tests conventions of Communicator::collective.

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
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

class NcclCommunicator final : public Communicator {
 public:
  ~NcclCommunicator() override;
  static Result<std::unique_ptr<Communicator>> create(int* argc, char*** argv);

  std::string name() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_size() const override { return local_size_; }
  Result<Stats> collective(CollectiveOp op, double bytes, const TimingPolicy& policy) override;
  double max_over_ranks(double v) override;

 private:
  NcclCommunicator() = default;
  Diagnostics init_single_process();
#ifdef PARALLAX_CALIBRATE_NCCL_MPI
  Diagnostics init_multi_process();
  bool any_rank_failed(bool failed);
#endif
  Diagnostics add_rank(int device);
  Diagnostics enqueue(Rank& r, int nccl_rank, CollectiveOp op, const gpu::CollectiveCounts& c);
  double time_once(CollectiveOp op, const gpu::CollectiveCounts& c);

  std::vector<Rank> ranks_;  // one in multi-process mode, every visible GPU otherwise
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

Diagnostics NcclCommunicator::enqueue(Rank& r, int nccl_rank, CollectiveOp op,
                                      const gpu::CollectiveCounts& c) {
  const void* send = r.send.as<void>();
  void* recv = r.recv.as<void>();
  const auto count = [](int64_t elems) { return static_cast<size_t>(elems); };
  switch (op) {
    case CollectiveOp::kAllReduce:
      PX_NCCL_TRY(
          ncclAllReduce(send, recv, count(c.send_elems), ncclBfloat16, ncclSum, r.comm, r.stream));
      break;
    case CollectiveOp::kAllGather:
      PX_NCCL_TRY(ncclAllGather(send, recv, count(c.chunk_elems), ncclBfloat16, r.comm, r.stream));
      break;
    case CollectiveOp::kReduceScatter:
      PX_NCCL_TRY(ncclReduceScatter(send, recv, count(c.chunk_elems), ncclBfloat16, ncclSum, r.comm,
                                    r.stream));
      break;
    case CollectiveOp::kAllToAll: {
      const size_t chunk_bytes = count(c.chunk_elems) * kElemBytes;
      PX_NCCL_TRY(ncclGroupStart());
      for (int peer = 0; peer < size_; ++peer) {
        PX_NCCL_TRY(ncclSend(static_cast<const char*>(send) + peer * chunk_bytes,
                             count(c.chunk_elems), ncclBfloat16, peer, r.comm, r.stream));
        PX_NCCL_TRY(ncclRecv(static_cast<char*>(recv) + peer * chunk_bytes, count(c.chunk_elems),
                             ncclBfloat16, peer, r.comm, r.stream));
      }
      PX_NCCL_TRY(ncclGroupEnd());
      break;
    }
    case CollectiveOp::kSendRecv: {
      // Both ranks of a pair send one message and receive one, at the same time.
      const int partner = gpu::sendrecv_partner(nccl_rank, size_);
      if (partner < 0) break;  // the odd rank out idles
      PX_NCCL_TRY(ncclGroupStart());
      PX_NCCL_TRY(ncclSend(send, count(c.send_elems), ncclBfloat16, partner, r.comm, r.stream));
      PX_NCCL_TRY(ncclRecv(recv, count(c.recv_elems), ncclBfloat16, partner, r.comm, r.stream));
      PX_NCCL_TRY(ncclGroupEnd());
      break;
    }
  }
  return {};
}

// One repetition on every GPU of this process; in multi-process mode the slowest rank's time,
// agreed by all ranks (so every rank's time_repeated sees the same values and stops together).
double NcclCommunicator::time_once(CollectiveOp op, const gpu::CollectiveCounts& c) {
  // The host enqueues for every GPU of this process in turn; the shield must outlast all that.
  const uint64_t shield_ns = gpu::kLaunchShieldNs * (1 + ranks_.size());
#ifdef PARALLAX_CALIBRATE_NCCL_MPI
  // Ranks leave the barrier within microseconds of each other, so that a rank's time is the
  // collective's, not the wait for a late peer.
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
      const int nccl_rank = multi_process_ ? rank_ : static_cast<int>(i);
      Diagnostics ds = enqueue(ranks_[i], nccl_rank, op, c);
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

Result<Stats> NcclCommunicator::collective(CollectiveOp op, double bytes,
                                           const TimingPolicy& policy) {
  const std::string what = std::string("nccl ") + to_string(op) + " " +
                           std::to_string(static_cast<int64_t>(bytes)) + " B";
  if (op == CollectiveOp::kSendRecv && size_ < 2) {
    return Diagnostic{what, "send/recv needs at least 2 ranks, got " + std::to_string(size_),
                      "run on 2 or more GPUs"};
  }
  const gpu::CollectiveCounts c = gpu::collective_counts(op, bytes, size_, kElemBytes);
  Diagnostics local;
  for (Rank& r : ranks_) {
    bool grown = false;
    const auto send_bytes = static_cast<std::size_t>(c.send_elems) * kElemBytes;
    const auto recv_bytes = static_cast<std::size_t>(c.recv_elems) * kElemBytes;
    if (cudaSetDevice(r.device) != cudaSuccess) {
      local.push_back({what, "cudaSetDevice failed", ""});
      break;
    }
    local = r.send.reserve(send_bytes, "collective send buffer", &grown);
    if (local.empty() && grown) {
      const cudaError_t e = cudaMemset(r.send.as<void>(), 0, r.send.bytes());
      if (e != cudaSuccess) local.push_back(gpu::cuda_diagnostic("cudaMemset", e));
    }
    if (local.empty()) local = r.recv.reserve(recv_bytes, "collective receive buffer", &grown);
    if (!local.empty()) break;
  }
#ifdef PARALLAX_CALIBRATE_NCCL_MPI
  if (multi_process_ && any_rank_failed(!local.empty()) && local.empty()) {
    local.push_back({what, "another rank failed to allocate its buffers", ""});
  }
#endif
  if (!local.empty()) return local;

  error_.reset();
  Result<Stats> stats = time_repeated([&] { return time_once(op, c); }, policy, what);
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
