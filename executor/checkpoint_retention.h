#pragma once
/// Disk hygiene of a checkpoint directory (executor/checkpoint.h): the oldest complete
/// checkpoints beyond a count are deleted once a newer one is committed, and the temporaries of
/// interrupted writes (`<name>.tmp`, left by a process killed mid-write) are cleared. Only what
/// the checkpoint store writes is ever deleted: step-<8 digits> directories, and in them the
/// manifest, the shard files it lists and their temporaries; anything else stays, with a note.

#include <cstdint>
#include <string>
#include <vector>

namespace parallax::exec {

/// What a clean-up deleted, and what it left and why.
struct CheckpointCleanup {
  std::vector<int64_t> steps;      ///< checkpoints deleted, ascending
  std::vector<std::string> files;  ///< temporaries deleted (paths)
  std::vector<std::string> notes;  ///< "<path>: <what was left and why>"
};

/// Keeps the newest `keep_last` (>= 1) complete checkpoints under `dir` by step, and `written`
/// (the one just committed) whatever its step, and deletes the other complete ones whose
/// manifest names the checkpoint format: the manifest first (the step is then incomplete and
/// never loaded), then the shard files it lists and their temporaries, then the directory when
/// nothing else is in it. The newest complete checkpoint, the one a resume uses, is always kept.
CheckpointCleanup remove_old_checkpoints(const std::string& dir, int64_t keep_last,
                                         int64_t written);

/// Deletes the temporaries of interrupted writes (shard-<5 digits>.bin.tmp, manifest.json.tmp)
/// in the step directories under `dir`. Call it only while no rank writes there (before a run
/// starts): a write in progress has the same names.
CheckpointCleanup remove_stale_temporaries(const std::string& dir);

}  // namespace parallax::exec
