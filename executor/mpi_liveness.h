#pragma once
/// Which ranks of an MPI job still answer, for the process group's watchdog
/// (executor/process_group.cc): every rank answers pings while it waits in MPI, and a rank whose
/// wait has expired pings the others to name those that have stopped answering (stopped by a
/// signal, crashed, or busy outside MPI), then ends the job without hanging on them.
/// Only with MPI.

#ifdef PARALLAX_HAVE_MPI
#include <mpi.h>

#include <string>
#include <vector>

namespace parallax::exec {

/// One per process, shared by the world group and every group split from it: its pings travel
/// on a duplicate of MPI_COMM_WORLD, apart from every group's traffic.
class MpiLiveness {
 public:
  MpiLiveness();
  ~MpiLiveness();
  MpiLiveness(const MpiLiveness&) = delete;
  MpiLiveness& operator=(const MpiLiveness&) = delete;

  int world_rank() const { return rank_; }
  /// Answers the pings that have arrived; call it often while waiting in MPI.
  void answer();
  /// Pings every other rank and waits up to `grace_s` seconds (answering pings meanwhile) for
  /// their answers: the world ranks that did not answer, ascending.
  std::vector<int> silent_ranks(double grace_s);
  /// Keeps answering pings for `seconds` (while another rank reports and ends the job).
  void linger(double seconds);
  /// Writes `line` to stderr in one write and ends the job with exit code 3: MPI_Abort, and
  /// _exit(3) from a thread should MPI_Abort not return within `grace_s` seconds (it can wait
  /// on a peer that does not answer).
  [[noreturn]] static void abort_job(const std::string& line, double grace_s);

 private:
  static constexpr int kPingTag = 1, kPongTag = 2;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

}  // namespace parallax::exec
#endif  // PARALLAX_HAVE_MPI
