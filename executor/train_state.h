#pragma once
/// The training state a checkpoint holds, in terms of the model's logical tensors: the pieces of
/// a rank's flat parameter (or optimizer-moment) buffer as rectangles of the unsharded tensors,
/// and the way back. A rank's buffer holds its model chunks one after the other; a sharded
/// optimizer owns a flat range of it, which cuts tensors anywhere, so a range is turned into at
/// most three rectangles per tensor (a partial first row, whole rows, a partial last row).

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "executor/checkpoint.h"
#include "executor/model.h"

namespace parallax::exec {

/// One model chunk of a rank's flat buffer: its model and where its parameters start.
struct ChunkView {
  const Transformer<float>* model = nullptr;
  int64_t offset = 0;
};

/// Which tensors this rank writes (a replicated tensor is written by one of its holders).
using SlotFilter = std::function<bool(const TensorSlot&)>;

/// Appends to `out` the pieces of kind `kind` that cover `data`, the values of the rank's flat
/// range [first, first + data.size()), for the tensors `keep` accepts. The pieces point into
/// `data`.
void append_pieces(std::span<const ChunkView> chunks, int64_t first, std::span<const float> data,
                   const std::string& kind, const SlotFilter& keep, std::vector<Piece>& out);

/// Fills `data`, the rank's flat range [first, first + data.size()), with the values of kind
/// `kind` from the checkpoint, whatever layout wrote it. Padding beyond the last tensor is left.
Diagnostics read_pieces(const Checkpoint& ckpt, std::span<const ChunkView> chunks, int64_t first,
                        std::span<float> data, const std::string& kind);

/// The model as a checkpoint's meta records it ("model"): its dimensions and MoE settings.
nlohmann::json checkpoint_model(const ModelShape& shape);

/// Whether `ckpt` was written for `shape`: an error naming the checkpoint and the model it holds
/// otherwise (its tensors could have the same sizes and still belong to another model).
Diagnostics check_checkpoint_model(const Checkpoint& ckpt, const ModelShape& shape);

}  // namespace parallax::exec
