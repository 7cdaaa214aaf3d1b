#include "executor/checkpoint_retention.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/json_read.h"
#include "executor/checkpoint.h"

namespace parallax::exec {
namespace {

namespace fs = std::filesystem;

bool digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// shard-<5 digits>.bin, as write_shard names a shard (ranks past 99999 take more digits).
bool is_shard_name(std::string_view s) {
  return s.size() >= 15 && s.starts_with("shard-") && s.ends_with(".bin") &&
         digits(s.substr(6, s.size() - 10));
}

/// The shard files a manifest lists, when it is a checkpoint manifest of this format; else
/// nothing, with the reason in `why`.
std::optional<std::vector<std::string>> listed_shards(const fs::path& manifest, std::string* why) {
  std::ifstream in(manifest);
  std::ostringstream text;
  text << in.rdbuf();
  // Through the one parsing layer: a damaged manifest is no manifest, never an exception.
  const auto parsed = parse_json(text.str(), manifest.string());
  const Json m = parsed ? parsed.value() : Json();
  if (!m.is_object() || text_at(m, "format") != kCheckpointFormat || !m.contains("shards") ||
      !m["shards"].is_array()) {
    *why = std::string("its manifest is not a ") + kCheckpointFormat + " manifest";
    return std::nullopt;
  }
  std::vector<std::string> files;
  for (const auto& s : m["shards"]) {
    const std::string file = text_at(s, "file");
    if (!is_shard_name(file)) {
      *why = "its manifest lists '" + text_excerpt(file, 60) + "', not a shard file name";
      return std::nullopt;
    }
    files.push_back(file);
  }
  return files;
}

/// Deletes one complete checkpoint as remove_old_checkpoints describes; false (with a note)
/// when any of it stays.
bool remove_checkpoint(const fs::path& sdir, std::vector<std::string>* notes) {
  std::string why;
  const auto shards = listed_shards(sdir / "manifest.json", &why);
  if (!shards) {
    notes->push_back(sdir.string() + ": not deleted: " + why);
    return false;
  }
  std::error_code ec;
  // The manifest first: from here on the step is incomplete, never loaded, whatever follows.
  if (!fs::remove(sdir / "manifest.json", ec) || ec) {
    notes->push_back(sdir.string() + ": not deleted: cannot remove manifest.json: " + ec.message());
    return false;
  }
  fs::remove(sdir / "manifest.json.tmp", ec);
  for (const std::string& f : *shards) {
    fs::remove(sdir / f, ec);
    fs::remove(sdir / (f + ".tmp"), ec);
  }
  if (fs::remove(sdir, ec) && !ec) return true;
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(sdir, ec))
    left.push_back(e.path().filename().string());
  std::string list;
  for (const std::string& l : left) list += (list.empty() ? "" : ", ") + l;
  notes->push_back(sdir.string() + ": deleted the checkpoint but kept the directory: it holds " +
                   (list.empty() ? ec.message() : "files the checkpoint does not list: " + list));
  return true;
}

/// The step directories under dir (step-<digits>), by step.
std::vector<std::pair<int64_t, fs::path>> step_directories(const std::string& dir) {
  std::vector<std::pair<int64_t, fs::path>> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() < 13 || !name.starts_with("step-") || !digits(name.substr(5))) continue;
    std::error_code ec2;
    int64_t step = 0;
    const auto [end_of, err] = std::from_chars(name.data() + 5, name.data() + name.size(), step);
    if (err == std::errc() && it->is_directory(ec2)) out.emplace_back(step, it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

CheckpointCleanup remove_old_checkpoints(const std::string& dir, int64_t keep_last,
                                         int64_t written) {
  CheckpointCleanup c;
  const std::vector<int64_t> steps = complete_steps(dir);
  if (keep_last < 1 || static_cast<int64_t>(steps.size()) <= keep_last) return c;
  std::set<int64_t> keep(steps.end() - keep_last, steps.end());
  keep.insert(written);
  for (const int64_t s : steps)
    if (!keep.contains(s) && remove_checkpoint(step_directory(dir, s), &c.notes))
      c.steps.push_back(s);
  return c;
}

CheckpointCleanup remove_stale_temporaries(const std::string& dir) {
  CheckpointCleanup c;
  for (const auto& step_dir : step_directories(dir)) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(step_dir.second, ec)) {
      const std::string name = e.path().filename().string();
      if (!name.ends_with(".tmp")) continue;
      const std::string base = name.substr(0, name.size() - 4);
      if (base != "manifest.json" && !is_shard_name(base)) continue;
      std::error_code ec2;
      if (fs::remove(e.path(), ec2) && !ec2)
        c.files.push_back(e.path().string());
      else
        c.notes.push_back(e.path().string() + ": cannot remove: " + ec2.message());
    }
  }
  return c;
}

}  // namespace parallax::exec
