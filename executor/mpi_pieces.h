#pragma once
/// Reductions in pieces. Open MPI's algorithms for large messages can run an order of magnitude
/// slower than its small-message ones: on the 2-core development machine (shared memory, 2
/// ranks) a whole 64-256 MiB all-reduce ran at 0.5 GB/s and a reduce-scatter at 0.3 GB/s, the
/// same buffers in 4 MiB pieces at 4.5-5.6 and 3.3-3.8 GB/s. The executor reduces in pieces of
/// at most kMpiPieceBytes, and `parallax calibrate` times the same pieces, so that a CPU profile
/// describes what the executor runs.

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#ifdef PARALLAX_HAVE_MPI
#include <mpi.h>
#endif

namespace parallax::exec {

inline constexpr int64_t kMpiPieceBytes = int64_t{4} << 20;

/// How a reduce-scatter of counts[r] values for each rank r splits into pieces of at most about
/// `max_values` values over all ranks: pieces[j][r] values of rank r's block, starting where
/// pieces 0..j-1 of that block end. Every block is cut into the same number of pieces (each is
/// one collective call, and every rank makes the same calls), in proportion to its size.
inline std::vector<std::vector<int64_t>> reduce_scatter_pieces(std::span<const int64_t> counts,
                                                               int64_t max_values) {
  int64_t total = 0;
  for (const int64_t c : counts) total += c;
  const int64_t n =
      std::max<int64_t>(1, (total + max_values - 1) / std::max<int64_t>(1, max_values));
  std::vector<std::vector<int64_t>> pieces(static_cast<size_t>(n),
                                           std::vector<int64_t>(counts.size()));
  for (size_t r = 0; r < counts.size(); ++r)
    for (int64_t j = 0; j < n; ++j)
      pieces[static_cast<size_t>(j)][r] = counts[r] * (j + 1) / n - counts[r] * j / n;
  return pieces;
}

#ifdef PARALLAX_HAVE_MPI

/// In-place sum over `comm` of n values of `type` (element_bytes each), in pieces of at most
/// kMpiPieceBytes; the first failing MPI return code, else MPI_SUCCESS.
inline int all_reduce_in_pieces(void* data, int64_t n, MPI_Datatype type, int element_bytes,
                                MPI_Comm comm) {
  const int64_t piece = kMpiPieceBytes / element_bytes;
  for (int64_t off = 0; off < n; off += piece) {
    const int rc = MPI_Allreduce(MPI_IN_PLACE, static_cast<char*>(data) + off * element_bytes,
                                 static_cast<int>(std::min(piece, n - off)), type, MPI_SUM, comm);
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

/// Sum over `comm` of `data` (counts[r] floats for each rank r, back to back), this rank's block
/// (counts[rank]) into `out`, in pieces of at most kMpiPieceBytes staged in `scratch`; the first
/// failing MPI return code, else MPI_SUCCESS.
inline int reduce_scatter_in_pieces(const float* data, std::span<const int64_t> counts, int rank,
                                    float* out, MPI_Comm comm, std::vector<float>* scratch) {
  const auto pieces = reduce_scatter_pieces(counts, kMpiPieceBytes / int64_t{sizeof(float)});
  const size_t ranks = counts.size();
  std::vector<int64_t> start(ranks, 0), done(ranks, 0);  // block starts, values sent so far
  for (size_t r = 1; r < ranks; ++r) start[r] = start[r - 1] + counts[r - 1];
  std::vector<int> piece_counts(ranks);
  for (const auto& p : pieces) {
    int64_t staged = 0;
    for (size_t r = 0; r < ranks; ++r) staged += p[r];
    if (pieces.size() > 1) scratch->resize(static_cast<size_t>(staged));
    int64_t at = 0;
    for (size_t r = 0; r < ranks; ++r) {
      if (pieces.size() > 1) std::copy_n(data + start[r] + done[r], p[r], scratch->data() + at);
      piece_counts[r] = static_cast<int>(p[r]);
      at += p[r];
    }
    const float* send = pieces.size() > 1 ? scratch->data() : data;
    const int rc = MPI_Reduce_scatter(send, out + done[static_cast<size_t>(rank)],
                                      piece_counts.data(), MPI_FLOAT, MPI_SUM, comm);
    if (rc != MPI_SUCCESS) return rc;
    for (size_t r = 0; r < ranks; ++r) done[r] += p[r];
  }
  return MPI_SUCCESS;
}

#endif  // PARALLAX_HAVE_MPI

}  // namespace parallax::exec
