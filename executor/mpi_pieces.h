#pragma once
/// Reductions in pieces, each a non-blocking collective and its wait. Open MPI's algorithms for
/// large messages can run an order of magnitude slower than its small-message ones: on the 2-core
/// development machine (shared memory, 2 ranks) a whole 64-256 MiB all-reduce ran at 0.5 GB/s and a
/// reduce-scatter at 0.3 GB/s, the same buffers in 4 MiB pieces at 4.5-5.6 and 3.3-3.8 GB/s. The
/// executor reduces in pieces of at most kMpiPieceBytes, and `parallax calibrate` times the same
/// pieces, so that a CPU profile describes what the executor runs.

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#ifdef PARALLAX_HAVE_MPI
#include <mpi.h>
#endif

namespace parallax::exec {

inline constexpr int64_t kMpiPieceBytes = int64_t{4} << 20;

/// The pieces a reduction of `total` values takes at most `max_values` a piece: at least one.
inline int64_t piece_number(int64_t total, int64_t max_values) {
  return std::max<int64_t>(1, (total + max_values - 1) / std::max<int64_t>(1, max_values));
}

/// Where piece j of n of a block of `count` values starts; piece j is [piece_start(count, j, n),
/// piece_start(count, j + 1, n)). Every rank's block of a reduce-scatter is cut into the same n
/// pieces (each one collective call every rank makes), in proportion to its size.
inline int64_t piece_start(int64_t count, int64_t j, int64_t n) { return count * j / n; }

#ifdef PARALLAX_HAVE_MPI

/// Call before MPI_Init. Open MPI's non-blocking all-reduce (libnbc) picks a binomial tree for
/// few ranks, which ran 4x slower than its blocking call here (1.2 against 4.7-5.6 GB/s in
/// 1-4 MiB pieces, 2 ranks on the 2-core machine); its ring ran at 5.4 GB/s, as the blocking
/// call. Both the executor and calibrate select the ring (a user's own setting wins; other MPIs
/// ignore the variable).
inline void prefer_ring_all_reduce() {
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", /*overwrite=*/0);
}

/// Waits for a started piece: MPI_Wait, or the executor's polled wait against a deadline (a
/// rank that stops answering mid-collective must not hold its peers in a blocking call). Returns
/// an MPI return code.
inline int wait_blocking(MPI_Request& r) { return MPI_Wait(&r, MPI_STATUS_IGNORE); }

/// In-place sum over `comm` of n values of `type` (element_bytes each), in pieces of at most
/// kMpiPieceBytes, each a non-blocking all-reduce waited for by `wait` (int(MPI_Request&));
/// the first failing MPI return code, else MPI_SUCCESS.
template <typename Wait>
int all_reduce_in_pieces(void* data, int64_t n, MPI_Datatype type, int element_bytes, MPI_Comm comm,
                         Wait&& wait) {
  const int64_t piece = kMpiPieceBytes / element_bytes;
  for (int64_t off = 0; off < n; off += piece) {
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, static_cast<char*>(data) + off * element_bytes,
                            static_cast<int>(std::min(piece, n - off)), type, MPI_SUM, comm, &r);
    if (rc == MPI_SUCCESS) rc = wait(r);
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

/// Sum over `comm` of `data` (counts[r] floats for each rank r, back to back), this rank's block
/// (counts[rank]) into `out`, in pieces of at most kMpiPieceBytes staged in `scratch`, each a
/// non-blocking reduce-scatter waited for by `wait`; the first failing MPI return code, else
/// MPI_SUCCESS.
template <typename Wait>
int reduce_scatter_in_pieces(const float* data, std::span<const int64_t> counts, int rank,
                             float* out, MPI_Comm comm, std::vector<float>* scratch, Wait&& wait) {
  const size_t ranks = counts.size();
  int64_t total = 0;
  for (const int64_t c : counts) total += c;
  const int64_t n = piece_number(total, kMpiPieceBytes / int64_t{sizeof(float)});
  std::vector<int> piece_counts(ranks);
  MPI_Request r = MPI_REQUEST_NULL;
  if (n == 1) {
    for (size_t i = 0; i < ranks; ++i) piece_counts[i] = static_cast<int>(counts[i]);
    const int rc =
        MPI_Ireduce_scatter(data, out, piece_counts.data(), MPI_FLOAT, MPI_SUM, comm, &r);
    return rc == MPI_SUCCESS ? wait(r) : rc;
  }
  std::vector<int64_t> block(ranks, 0);  // where each rank's block starts in data
  for (size_t i = 1; i < ranks; ++i) block[i] = block[i - 1] + counts[i - 1];
  for (int64_t j = 0; j < n; ++j) {
    scratch->clear();
    for (size_t i = 0; i < ranks; ++i) {
      const int64_t from = piece_start(counts[i], j, n), to = piece_start(counts[i], j + 1, n);
      scratch->insert(scratch->end(), data + block[i] + from, data + block[i] + to);
      piece_counts[i] = static_cast<int>(to - from);
    }
    int rc = MPI_Ireduce_scatter(scratch->data(),
                                 out + piece_start(counts[static_cast<size_t>(rank)], j, n),
                                 piece_counts.data(), MPI_FLOAT, MPI_SUM, comm, &r);
    if (rc == MPI_SUCCESS) rc = wait(r);
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

#endif  // PARALLAX_HAVE_MPI

}  // namespace parallax::exec
