#pragma once
/// ZeRO-2/3 by parameter units over the data-parallel group. The rank's flat buffers (its model
/// chunks one after the other, padded to a multiple of the group) are cut into equal slices and
/// the rank owns slice rank(): its parameters at rest under ZeRO-3 (`own_params`) and its part of
/// the reduced gradient (`grad_slice`). Each unit of a chunk (ParamUnits in model.h: the
/// embedding, one block, the head) is a range of the flat buffers that overlaps one or more
/// slices: ZeRO-3 gathers it from them just before a pass reads it and hands its pages back
/// after (FSDP's per-layer units), and ZeRO-2/3 reduce-scatters its gradient to them as soon as
/// the backward has finished it, then releases those pages too. Peak parameter and gradient
/// memory is then the rank's slices plus a unit or two, not the whole model. With expert
/// parallelism the slices are SplitShards' (below): a unit's dense values go over the data group
/// and its routed experts' over the expert-data group.

#include <cstdint>
#include <span>
#include <vector>

#include "core/result.h"
#include "executor/model.h"
#include "executor/process_group.h"

namespace parallax::exec {

/// A zero-filled float buffer mapped lazily (anonymous memory): pages never written cost no
/// memory, and release_pages hands written ones back. The flat parameter and gradient buffers
/// of a ZeRO-2/3 rank, of which only the units in use are resident.
class PageBuffer {
 public:
  explicit PageBuffer(size_t n);
  ~PageBuffer();
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;
  float* data() const { return data_; }
  size_t size() const { return size_; }
  float* begin() const { return data_; }
  float* end() const { return data_ + size_; }
  float& operator[](size_t i) const { return data_[i]; }

 private:
  float* data_ = nullptr;
  size_t size_ = 0;
};

/// Zeroes `v` and hands its whole pages back to the kernel (they come back zero-filled when
/// next touched): how a sharded buffer stops occupying memory between uses.
void release_pages(std::span<float> v);

class SplitShards;

class ShardedUnits {
 public:
  struct Buffers {
    std::span<float> params, grads;     ///< the whole flat buffers, sparse between uses
    std::span<const float> own_params;  ///< this rank's slice of the parameters (ZeRO-3)
    std::span<float> grad_slice;        ///< this rank's slice of the reduced gradient
  };
  /// `slice`: the values per rank; `errors` receives the first failed collective (the hooks
  /// cannot return one; the caller checks it after each pass call).
  ShardedUnits(ProcessGroup& data, int64_t slice, bool shard_parameters, bool shard_gradients,
               Buffers buffers, Diagnostics* errors);
  /// The same over `split`'s slices (expert parallelism): the buffers are not padded, and the
  /// slice spans hold split.size() values. Keeps a reference to `split`.
  ShardedUnits(SplitShards& split, bool shard_parameters, bool shard_gradients, Buffers buffers,
               Diagnostics* errors);

  /// The hooks of a chunk whose parameters start at `offset` in the flat buffers. Keeps
  /// references to this object and `chunk`.
  ParamUnits hooks(const Transformer<float>& chunk, int64_t offset);

  /// Sums grads[a, b) over the group into the owners' grad_slice (added) and releases those
  /// pages of grads: a unit under ZeRO-2/3, a bucket of the step's reduction under ZeRO-1.
  /// A failure goes to `errors`.
  void reduce(int64_t a, int64_t b);

 private:
  /// How many values of [a, b) each rank's slice holds (they add up to b - a).
  std::vector<int64_t> counts(int64_t a, int64_t b) const;
  void gather(int64_t a, int64_t b);
  /// Where [a, b)'s part in this rank's slice starts within the slice (`mine` values; 0 when
  /// it has none).
  int64_t slice_offset(int64_t a, int64_t mine) const;

  // Exactly one is set: one group's equal slices of the padded buffers, or SplitShards'.
  ProcessGroup* data_ = nullptr;
  SplitShards* split_ = nullptr;
  int64_t slice_ = 0;
  bool shard_parameters_, shard_gradients_;
  Buffers buf_;
  Diagnostics* errors_;
  std::vector<float> part_;  // this rank's reduced part of a unit's gradient
};

/// A run of the flat buffers in a rank's optimizer slice: `length` values from flat offset
/// `flat`, at `at` in the slice.
struct SliceRun {
  int64_t flat = 0, at = 0, length = 0;
};

/// ZeRO-1/2/3 with expert parallelism, as Megatron and FSDP shard MoE models: the dense values
/// of the flat buffer (every tensor not of a routed expert, in flat order) shard over the data
/// group and the expert values over the expert-data group (the ranks holding the same experts),
/// each cut into equal slices (the last shorter). A rank's slice is its dense part then its
/// expert part; runs() maps it to the flat buffer. The step's collectives run in buckets of 4M
/// values, a unit's in one collective per kind; each reads and writes the flat buffer in place
/// when one run holds its values, else through a packed copy, so no buffer of the whole model
/// is added.
class SplitShards {
 public:
  /// `dense` and `expert`: the flat runs (offset, length) of each kind, in flat order.
  SplitShards(std::vector<std::pair<int64_t, int64_t>> dense,
              std::vector<std::pair<int64_t, int64_t>> expert, ProcessGroup& data,
              ProcessGroup& expert_data);

  int64_t size() const { return dense_mine_ + expert_mine_; }  ///< values of this rank's slice
  const std::vector<SliceRun>& runs() const { return runs_; }

  /// Sums the flat gradients over the groups (dense over the data group, expert over the
  /// expert-data group) into `slice` (size(); added).
  Diagnostics reduce(std::span<const float> grads, std::span<float> slice);
  /// Every rank's slice of the flat parameters (updated in place, at runs()) into every rank's.
  Diagnostics gather(std::span<float> params);

  /// The same for the flat range [a, b) only (a unit under ZeRO-2/3): its dense values over the
  /// data group, its expert values over the expert-data group, each collective the size of the
  /// range's values of that kind. reduce adds this rank's part of the sums to `slice`; gather
  /// takes this rank's part from `own` (its slice at rest, size() values) into `params`.
  Diagnostics reduce(int64_t a, int64_t b, std::span<const float> grads, std::span<float> slice);
  Diagnostics gather(int64_t a, int64_t b, std::span<const float> own, std::span<float> params);

 private:
  struct Kind {
    std::vector<std::pair<int64_t, int64_t>> runs;
    ProcessGroup* group = nullptr;
    int64_t total = 0, per_rank = 0, first = 0, mine = 0;
    int64_t at = 0;  ///< where this rank's values of the kind start in its slice
    /// Each rank's values of the packed range [a, b).
    std::vector<int64_t> counts(int64_t a, int64_t b) const;
    /// The packed position of flat offset x: the kind's values before it.
    int64_t packed(int64_t x) const;
  };
  /// The flat offset of the packed range [a, b) of `k` when one run holds it whole (a unit's
  /// experts, most buckets), whose collectives then read and write the flat buffer in place
  /// rather than through a packed copy; -1 otherwise.
  static int64_t contiguous(const Kind& k, int64_t a, int64_t b);
  /// The collectives of the packed range [a, b) of `k`. `own` empty: this rank's values are
  /// read from `params` at runs().
  Diagnostics reduce_packed(const Kind& k, int64_t a, int64_t b, std::span<const float> grads,
                            std::span<float> slice);
  Diagnostics gather_packed(const Kind& k, int64_t a, int64_t b, std::span<const float> own,
                            std::span<float> params);
  /// The packed values [a, b) of `k` from `flat` into `out` (b - a; zero beyond the last run).
  static void pack(const Kind& k, int64_t a, std::span<const float> flat, std::span<float> out);
  /// The reverse: `in`, the packed values [a, a + in.size()), into `flat`.
  static void unpack(const Kind& k, int64_t a, std::span<const float> in, std::span<float> flat);
  /// Calls f(flat offset, packed offset, length) for each run's part inside packed [a, b).
  template <typename F>
  static void each_run(const Kind& k, int64_t a, int64_t b, F f);
  Kind dense_, expert_;
  std::vector<float> bucket_;
  int64_t dense_mine_ = 0, expert_mine_ = 0;
  std::vector<SliceRun> runs_;
};

}  // namespace parallax::exec
