#pragma once
/// The threads a parallel search runs on (`--threads`).

#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include <optional>

namespace parallax {

/// A TBB arena of exactly `threads` threads (0: TBB's default, one a core). TBB caps its workers
/// at the cores unless told otherwise, and then runs fewer threads than asked and says so on
/// stderr; the cap is set to `threads` while the arena lives, so that `--threads 4` runs four
/// threads on any machine (the search's results do not depend on how many).
class ThreadArena {
 public:
  explicit ThreadArena(int threads) : arena_(threads > 0 ? threads : tbb::task_arena::automatic) {
    if (threads > 0) limit_.emplace(tbb::global_control::max_allowed_parallelism, threads);
  }
  tbb::task_arena& arena() { return arena_; }

 private:
  std::optional<tbb::global_control> limit_;
  tbb::task_arena arena_;
};

}  // namespace parallax
