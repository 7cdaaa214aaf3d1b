#pragma once
/// Sharded, fault-tolerant checkpoints of the executor's training state.
///
/// Every rank writes the pieces of the logical tensors it holds (a rectangle of a row-major
/// rows x cols float matrix, per state kind: "param", "adam_m", "adam_v", ...) into its own
/// shard file; rank 0 then verifies every shard and writes the manifest that makes the step
/// complete. Any layout can read any other layout's checkpoint: a read asks for a rectangle of a
/// logical tensor and is assembled from whichever pieces of whichever shards cover it.
///
/// On disk:
///   <dir>/step-00000120/shard-00000.bin    one per rank (format below)
///   <dir>/step-00000120/manifest.json      "parallax-checkpoint/1": step, world, shards with
///                                          bytes and CRC-64/XZ checksums, the caller's meta
/// Files are written under a temporary name (`<name>.tmp`), fsync'ed, renamed and the directory
/// fsync'ed, so a final name never holds a partial file. A step directory without manifest.json
/// is incomplete and is never loaded.
///
/// Shard file, version 1, all integers and floats little-endian:
///   offset  bytes  field
///   0       8      magic "PXCKPT01"
///   8       4      u32 version (1)
///   12      4      i32 rank
///   16      8      u64 number of pieces n
///   24             piece table, n entries:
///                    u32 length + bytes of kind, u32 length + bytes of tensor (no terminator)
///                    i64 full_rows, full_cols, row0, col0, rows, cols
///                    u64 payload offset (from the start of the file), u64 payload bytes
///                  payloads: each piece's rows * cols float32 values, row-major, table order
///   size-8  8      u64 CRC-64/XZ of bytes [0, size - 8)

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"

namespace parallax::exec {

/// The manifest's "format" value.
inline constexpr const char* kCheckpointFormat = "parallax-checkpoint/1";

/// Which part of which logical tensor a piece holds. The tensor is a row-major
/// full_rows x full_cols float matrix; the piece is the rectangle starting at (row0, col0) of
/// rows x cols elements.
struct PieceHeader {
  std::string kind;    ///< state kind: "param", "adam_m", "adam_v", ...
  std::string tensor;  ///< logical tensor name: "embed", "layers.3.wq", ...
  int64_t full_rows = 0, full_cols = 0;
  int64_t row0 = 0, col0 = 0, rows = 0, cols = 0;
  int64_t row1() const { return row0 + rows; }  ///< one past the last row
  int64_t col1() const { return col0 + cols; }  ///< one past the last column
};

/// A piece and its rows * cols values, row-major within the rectangle.
struct Piece {
  PieceHeader h;
  std::span<const float> data;
};

/// What one rank wrote: file name (relative to the step directory), size and checksum.
struct ShardInfo {
  std::string file;       ///< "shard-00003.bin"
  int64_t bytes = 0;      ///< file size, trailer included
  uint64_t checksum = 0;  ///< CRC-64/XZ of every byte before the 8-byte trailer
  int rank = 0;
};

/// CRC-64/XZ (ECMA-182 polynomial, reflected, init and xorout all ones; check value of
/// "123456789" is 0x995dc9bbdf1939fa). Continues from `crc`, the result of a previous call over
/// the bytes before these (0 to start).
uint64_t crc64_xz(std::span<const std::byte> bytes, uint64_t crc = 0);

/// <dir>/step-<step, 8 digits>.
std::string step_directory(const std::string& dir, int64_t step);

/// Writes rank `rank`'s shard of step `step` into <dir>/step-<8 digits>/shard-<5 digits>.bin:
/// written to `<name>.tmp` in the same directory (a leftover one from a crashed write is
/// overwritten), fsync'ed, renamed, directory fsync'ed. Creates the directories as needed.
/// Every rank writes a shard, possibly with no pieces. Fails, writing nothing, on a piece whose
/// rectangle is outside its tensor, whose data does not hold rows * cols values or holds a value
/// that is not finite (NaN, infinity: such a state is never saved); on a file error, with the
/// path and strerror.
Result<ShardInfo> write_shard(const std::string& dir, int64_t step, int rank,
                              std::span<const Piece> pieces);

/// Rank 0, after every rank's write_shard returned: verifies each listed shard (ranks 0 .. n-1,
/// once each) exists with the given size and checksum by reading it back, then writes
/// <step dir>/manifest.json atomically. `meta` (a JSON object, or null for none) is stored as
/// given: the trainer's step, data position, layout, ... Writes no manifest if any check fails.
Diagnostics write_manifest(const std::string& dir, int64_t step, std::span<const ShardInfo> shards,
                           const nlohmann::json& meta);

/// Steps with a manifest under dir, ascending (manifests not verified). Empty when dir does not
/// exist.
std::vector<int64_t> complete_steps(const std::string& dir);

/// A verified checkpoint held in memory: every shard read whole, its size and checksum checked
/// against the manifest, its pieces indexed by (kind, tensor).
class Checkpoint {
 public:
  /// The newest step under dir that has a manifest. If that one is unusable (a shard missing,
  /// truncated or corrupted) it is an error naming the file and what is wrong; an older complete
  /// step is never used silently: the hint names it. No checkpoint at all is an error too.
  static Result<Checkpoint> open_latest(const std::string& dir);
  /// Step `step` under dir; an error if it has no manifest or is unusable.
  static Result<Checkpoint> open_step(const std::string& dir, int64_t step);

  int64_t step() const { return step_; }
  int world() const { return world_; }
  const nlohmann::json& meta() const { return meta_; }
  /// The step directory this checkpoint was read from.
  const std::string& path() const { return path_; }

  /// Fills `out` (rows * cols values, row-major) with the rectangle (row0, col0, rows, cols) of
  /// logical tensor `tensor` of kind `kind`, assembled from every piece that overlaps it (where
  /// pieces overlap, e.g. replicas, they hold the same values). Fails if the tensor is unknown,
  /// its full shape is not full_rows x full_cols, the rectangle is outside it, out has the wrong
  /// size, or any element is covered by no piece.
  Diagnostics read(const std::string& kind, const std::string& tensor, int64_t full_rows,
                   int64_t full_cols, int64_t row0, int64_t col0, int64_t rows, int64_t cols,
                   std::span<float> out) const;

  /// The tensors present, sorted by (kind, tensor): each header is the whole tensor
  /// (row0 = col0 = 0, rows = full_rows, cols = full_cols).
  std::vector<PieceHeader> tensors() const;

 private:
  struct StoredPiece {
    PieceHeader h;
    std::vector<float> data;
    int rank = 0;
  };
  using Key = std::pair<std::string, std::string>;  // (kind, tensor)

  Checkpoint() = default;

  int64_t step_ = 0;
  int world_ = 0;
  nlohmann::json meta_;
  std::string path_;
  std::map<Key, std::vector<StoredPiece>> index_;
};

}  // namespace parallax::exec
