#include "executor/train_state.h"

#include <algorithm>

#include "core/json_read.h"

namespace parallax::exec {
namespace {

/// Calls fn(row0, col0, rows, cols, at) for the rectangles of the logical tensor that cover the
/// slot's elements [a, b) (row-major within the slot's block); `at` is the element index of the
/// rectangle's first value within the slot.
template <typename Fn>
void rectangles(const TensorSlot& s, int64_t a, int64_t b, Fn&& fn) {
  while (a < b) {
    const int64_t r = a / s.cols, c = a % s.cols;
    int64_t rows = 1, cols = std::min(s.cols - c, b - a);
    if (c == 0 && b - a >= s.cols) {  // whole rows
      rows = (b - a) / s.cols;
      cols = s.cols;
    }
    fn(s.row0 + r, s.col0 + c, rows, cols, a);
    a += rows * cols;
  }
}

/// Calls fn(chunk, slot, a, b, data_index) for each tensor of the chunks that the flat range
/// [first, first + n) touches: elements [a, b) of the slot, starting at data[data_index].
template <typename Fn>
void for_each_overlap(std::span<const ChunkView> chunks, int64_t first, int64_t n, Fn&& fn) {
  for (const ChunkView& c : chunks) {
    for (const TensorSlot& s : c.model->layout()) {
      const int64_t start = c.offset + s.offset, end = start + s.size();
      const int64_t lo = std::max(start, first), hi = std::min(end, first + n);
      if (lo < hi) fn(s, lo - start, hi - start, lo - first);
    }
  }
}

}  // namespace

void append_pieces(std::span<const ChunkView> chunks, int64_t first, std::span<const float> data,
                   const std::string& kind, const SlotFilter& keep, std::vector<Piece>& out) {
  const auto n = static_cast<int64_t>(data.size());
  for_each_overlap(chunks, first, n, [&](const TensorSlot& s, int64_t a, int64_t b, int64_t at) {
    if (keep && !keep(s)) return;
    rectangles(s, a, b, [&](int64_t row0, int64_t col0, int64_t rows, int64_t cols, int64_t e) {
      out.push_back(
          {PieceHeader{kind, s.name, s.full_rows, s.full_cols, row0, col0, rows, cols},
           data.subspan(static_cast<size_t>(at + e - a), static_cast<size_t>(rows * cols))});
    });
  });
}

Diagnostics read_pieces(const Checkpoint& ckpt, std::span<const ChunkView> chunks, int64_t first,
                        std::span<float> data, const std::string& kind) {
  Diagnostics all;
  const auto n = static_cast<int64_t>(data.size());
  for_each_overlap(chunks, first, n, [&](const TensorSlot& s, int64_t a, int64_t b, int64_t at) {
    rectangles(s, a, b, [&](int64_t row0, int64_t col0, int64_t rows, int64_t cols, int64_t e) {
      if (!all.empty()) return;  // the first problem is enough; the rest would repeat it
      all = ckpt.read(
          kind, s.name, s.full_rows, s.full_cols, row0, col0, rows, cols,
          data.subspan(static_cast<size_t>(at + e - a), static_cast<size_t>(rows * cols)));
    });
  });
  return all;
}

nlohmann::json checkpoint_model(const ModelShape& shape) {
  nlohmann::json m = {{"layers", shape.layers},     {"hidden", shape.hidden},
                      {"heads", shape.heads},       {"kv_heads", shape.kv_heads},
                      {"head_dim", shape.head_dim}, {"ffn_hidden", shape.ffn_hidden},
                      {"vocab", shape.vocab},       {"tied_embeddings", shape.tied_embeddings}};
  if (shape.moe.experts > 0)
    m["moe"] = {{"experts", shape.moe.experts},
                {"top_k", shape.moe.top_k},
                {"expert_ffn_hidden", shape.moe.expert_ffn_hidden},
                {"shared_experts", shape.moe.shared_experts},
                {"dense_layers", shape.moe.dense_layers}};
  return m;
}

Diagnostics check_checkpoint_model(const Checkpoint& ckpt, const ModelShape& shape) {
  const nlohmann::json& meta = ckpt.meta();
  const nlohmann::json held =
      meta.is_object() && meta.contains("model") ? meta["model"] : nlohmann::json();
  if (held == checkpoint_model(shape)) return {};
  return {Diagnostic{ckpt.path(), "the checkpoint holds another model: " + json_excerpt(held, 200),
                     "use the model that wrote it"}};
}

}  // namespace parallax::exec
