#pragma once
/// Running the `parallax` binary from tests: its exit code and output, parsing JSON it prints,
/// and scratch directories for the files it writes. PARALLAX_BINARY is the built CLI.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/json_io.h"

namespace parallax::testing::cli {

namespace fs = std::filesystem;

// A shell word in single quotes: it's -> 'it'\''s'.
inline std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct CliRun {
  int exit_code = -1;
  std::string out;  ///< stdout, and stderr unless the run asked for stdout only
};

inline std::ostream& operator<<(std::ostream& os, const CliRun& r) {
  constexpr size_t kShown = 1500;
  os << "exit " << r.exit_code << ", output:\n" << r.out.substr(0, kShown);
  if (r.out.size() > kShown) os << "... (" << r.out.size() - kShown << " more bytes)";
  return os;
}

enum class Streams { kBoth, kStdoutOnly };

// Runs a shell command line; its output is stdout (and stderr when the line redirects it).
inline CliRun RunShell(const std::string& cmd) {
  CliRun r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline std::string StreamRedirect(Streams streams) {
  return streams == Streams::kBoth ? " 2>&1" : " 2>/dev/null";
}

// Runs `parallax ARGS` (ARGS already shell-quoted where needed).
inline CliRun Parallax(const std::string& args, Streams streams = Streams::kBoth) {
  return RunShell(Quote(PARALLAX_BINARY) + " " + args + StreamRedirect(streams));
}

// Runs `mpirun -np RANKS parallax ARGS` as a user would (allowed as root, oversubscribed on a
// small machine), with `env` (e.g. "NAME=value ") before it.
inline CliRun MpiParallax(int ranks, const std::string& args, Streams streams = Streams::kBoth,
                          const std::string& env = "") {
  return RunShell(
      env +
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe "
      "-np " +
      std::to_string(ranks) + " " + Quote(PARALLAX_BINARY) + " " + args + StreamRedirect(streams));
}

// Whether an `mpirun` is on the PATH.
inline bool HaveMpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

inline bool Has(const CliRun& r, const std::string& needle) {
  return r.out.find(needle) != std::string::npos;
}

// The JSON in `text`, or null after recording a failure.
inline Json ParseOrFail(const std::string& text, const std::string& where) {
  auto j = parse_json(text, where);
  if (j.ok()) return j.value();
  ADD_FAILURE() << j.error_text() << text.substr(0, 2000);
  return nullptr;
}

// A fresh directory under the test temp dir, removed with everything in it.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (fs::path(::testing::TempDir()) / "parallax_cli_XXXXXX").string();
    PX_CHECK(::mkdtemp(tmpl.data()) != nullptr, "mkdtemp failed for " << tmpl);
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path_))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  fs::path path_;
};

}  // namespace parallax::testing::cli
