#include "executor/mpi_liveness.h"

#ifdef PARALLAX_HAVE_MPI
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

namespace parallax::exec {
namespace {

using Clock = std::chrono::steady_clock;

/// Sends one empty message and lets MPI free the request: pings and answers are fire and
/// forget (a peer that never receives one must not hold this rank up).
void post(int tag, int dest, MPI_Comm comm) {
  static const int kNothing = 0;
  MPI_Request r = MPI_REQUEST_NULL;
  if (MPI_Isend(&kNothing, 1, MPI_INT, dest, tag, comm, &r) == MPI_SUCCESS) MPI_Request_free(&r);
}

}  // namespace

MpiLiveness::MpiLiveness() {
  MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiLiveness::~MpiLiveness() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized || comm_ == MPI_COMM_NULL) return;
  // Answers nobody collected are cancelled with the communicator's pending receives.
  for (;;) {
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, &st);
    if (!flag) break;
    int v = 0;
    MPI_Recv(&v, 1, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, comm_, MPI_STATUS_IGNORE);
  }
  MPI_Comm_free(&comm_);
}

void MpiLiveness::answer() {
  for (;;) {
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, kPingTag, comm_, &flag, &st);
    if (!flag) return;
    int v = 0;
    MPI_Recv(&v, 1, MPI_INT, st.MPI_SOURCE, kPingTag, comm_, MPI_STATUS_IGNORE);
    post(kPongTag, st.MPI_SOURCE, comm_);
  }
}

std::vector<int> MpiLiveness::silent_ranks(double grace_s) {
  std::vector<char> answered(static_cast<size_t>(size_), 0);
  answered[static_cast<size_t>(rank_)] = 1;
  for (int r = 0; r < size_; ++r)
    if (r != rank_) post(kPingTag, r, comm_);
  const auto deadline = Clock::now() + std::chrono::duration<double>(grace_s);
  int missing = size_ - 1;
  while (missing > 0 && Clock::now() < deadline) {
    answer();
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, kPongTag, comm_, &flag, &st);
    if (!flag) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    int v = 0;
    MPI_Recv(&v, 1, MPI_INT, st.MPI_SOURCE, kPongTag, comm_, MPI_STATUS_IGNORE);
    if (!answered[static_cast<size_t>(st.MPI_SOURCE)]) --missing;
    answered[static_cast<size_t>(st.MPI_SOURCE)] = 1;
  }
  std::vector<int> silent;
  for (int r = 0; r < size_; ++r)
    if (!answered[static_cast<size_t>(r)]) silent.push_back(r);
  return silent;
}

void MpiLiveness::linger(double seconds) {
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < until) {
    answer();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void MpiLiveness::abort_job(const std::string& line, double grace_s) {
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  std::thread([grace_s] {
    std::this_thread::sleep_for(std::chrono::duration<double>(grace_s));
    ::_exit(3);
  }).detach();
  MPI_Abort(MPI_COMM_WORLD, 3);
  ::_exit(3);
}

}  // namespace parallax::exec
#endif  // PARALLAX_HAVE_MPI
