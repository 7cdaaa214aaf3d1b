#include "executor/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <type_traits>

#include "core/json_io.h"
#include "core/names.h"

// The format (checkpoint.h) is little-endian, written in host byte order: the executor runs on
// little-endian hosts only (x86-64, AArch64), and this keeps a big-endian build from writing
// files nobody else can read.
static_assert(std::endian::native == std::endian::little,
              "the checkpoint format is little-endian and is written in host byte order");

namespace parallax::exec {
namespace {

namespace fs = std::filesystem;
using std::to_string;

Diagnostic diag(std::string where, std::string what, std::string hint = "") {
  return {std::move(where), std::move(what), std::move(hint)};
}

constexpr char kMagic[8] = {'P', 'X', 'C', 'K', 'P', 'T', '0', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 24;
constexpr size_t kTrailerBytes = 8;
// Bounds every dimension so that rows * cols * sizeof(float) fits in uint64.
constexpr int64_t kMaxDim = int64_t{1} << 31;

constexpr std::array<uint64_t, 256> make_crc_table() {
  std::array<uint64_t, 256> t{};
  for (uint64_t i = 0; i < 256; ++i) {
    uint64_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0xc96c5795d7870f42ull : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint64_t, 256> kCrcTable = make_crc_table();

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string shard_name(int rank) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "shard-%05d.bin", rank);
  return buf;
}

std::string describe(const PieceHeader& h) {
  auto s = [](int64_t v) { return to_string(v); };
  return h.kind + "/" + h.tensor + " [" + s(h.row0) + ":" + s(h.row0 + h.rows) + ", " + s(h.col0) +
         ":" + s(h.col0 + h.cols) + "] of " + s(h.full_rows) + "x" + s(h.full_cols);
}

/// What is wrong with a piece's header, or "" if nothing.
std::string header_problem(const PieceHeader& h) {
  if (h.kind.empty() || h.tensor.empty()) return "kind and tensor name must not be empty";
  if (h.full_rows < 1 || h.full_cols < 1 || h.full_rows >= kMaxDim || h.full_cols >= kMaxDim)
    return "full shape " + to_string(h.full_rows) + "x" + to_string(h.full_cols) +
           " must be positive and below 2^31 in each dimension";
  if (h.row0 < 0 || h.col0 < 0 || h.rows < 0 || h.cols < 0 || h.row0 > h.full_rows ||
      h.col0 > h.full_cols || h.rows > h.full_rows - h.row0 || h.cols > h.full_cols - h.col0)
    return "rectangle " + describe(h) + " is outside the tensor";
  return "";
}

Diagnostic sys_error(const std::string& path, const std::string& doing, int err) {
  return {path, doing + ": " + std::strerror(err), ""};
}

/// Appends a value (a string as its u32 length and bytes) in host (little-endian) byte order.
template <typename T>
void put(std::vector<std::byte>& b, const T& v) {
  if constexpr (std::is_same_v<T, std::string>) {
    put(b, static_cast<uint32_t>(v.size()));
    const auto bytes = std::as_bytes(std::span(v));
    b.insert(b.end(), bytes.begin(), bytes.end());
  } else {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    b.insert(b.end(), p, p + sizeof v);
  }
}

/// Reads what put() wrote from the front of `in` and drops it; false when `in` runs short.
template <typename T>
bool take(std::span<const std::byte>& in, T* v) {
  constexpr bool kString = std::is_same_v<T, std::string>;
  size_t n = sizeof(T);
  if constexpr (kString) {
    uint32_t len = 0;
    if (!take(in, &len)) return false;
    n = len;
  }
  if (in.size() < n) return false;
  if constexpr (kString)
    v->assign(reinterpret_cast<const char*>(in.data()), n);
  else
    std::memcpy(v, in.data(), n);
  in = in.subspan(n);
  return true;
}

Diagnostics fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return {sys_error(dir, "cannot open directory to fsync", errno)};
  Diagnostics ds;
  if (::fsync(fd) != 0) ds.push_back(sys_error(dir, "fsync of directory failed", errno));
  ::close(fd);
  return ds;
}

/// Writes <dir>/<name> so that the final name never holds a partial file: <name>.tmp, fsync,
/// rename, fsync of the directory. The temporary is removed if anything fails before the rename.
Diagnostics write_atomically(const std::string& dir, const std::string& name,
                             std::span<const std::byte> b) {
  const std::string final_path = dir + "/" + name;
  const std::string tmp = final_path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return {sys_error(tmp, "cannot create", errno)};
  Diagnostics ds;
  for (size_t done = 0; done < b.size() && ds.empty();) {
    const ssize_t n = ::write(fd, b.data() + done, b.size() - done);
    if (n < 0 && errno != EINTR) ds.push_back(sys_error(tmp, "write failed", errno));
    done += static_cast<size_t>(std::max<ssize_t>(n, 0));
  }
  if (ds.empty() && ::fsync(fd) != 0) ds.push_back(sys_error(tmp, "fsync failed", errno));
  if (::close(fd) != 0 && ds.empty()) ds.push_back(sys_error(tmp, "close failed", errno));
  if (ds.empty() && ::rename(tmp.c_str(), final_path.c_str()) != 0)
    ds.push_back(sys_error(final_path, "cannot rename " + tmp + " to it", errno));
  if (!ds.empty()) {
    ::unlink(tmp.c_str());
    return ds;
  }
  return fsync_dir(dir);
}

Result<std::vector<std::byte>> read_whole(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return sys_error(path, "cannot open", errno);
  std::vector<std::byte> buf;
  std::vector<std::byte> chunk(size_t{1} << 20);
  for (;;) {
    const ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      if (n < 0) return sys_error(path, "read failed", err);
      return buf;
    }
    buf.insert(buf.end(), chunk.begin(), chunk.begin() + n);
  }
}

/// Creates `path` and its parents; fsyncs the parent of a new directory so that its entry
/// survives a crash.
Diagnostics make_dirs(const std::string& path) {
  std::error_code ec;
  const bool created = fs::create_directories(path, ec);
  if (ec) return {diag(path, "cannot create directory: " + ec.message())};
  if (!created) return {};
  return fsync_dir(fs::path(path).parent_path().string());
}

struct LoadedShard {
  int rank = 0;
  std::vector<std::pair<PieceHeader, std::vector<float>>> pieces;
};

/// Parses a shard's bytes before the trailer (already checksummed) and checks every bound.
Result<LoadedShard> parse_shard(std::span<const std::byte> body, const std::string& path) {
  LoadedShard out;
  std::span<const std::byte> r = body;
  char magic[8];
  uint32_t version = 0;
  int32_t rank = 0;
  uint64_t n = 0;
  take(r, &magic);  // cannot run short: the body holds at least the header
  take(r, &version);
  take(r, &rank);
  take(r, &n);
  if (std::memcmp(magic, kMagic, sizeof magic) != 0)
    return diag(path, "not a parallax checkpoint shard (bad magic)");
  if (version != kVersion)
    return diag(path, "shard format version " + to_string(version) + " is unsupported",
                "this build reads version " + to_string(kVersion));
  // An entry takes at least 72 bytes: bounds n before reserving.
  if (n > body.size() / 72) return diag(path, "piece count " + to_string(n) + " is corrupt");
  out.rank = rank;
  for (uint64_t i = 0; i < n; ++i) {
    PieceHeader h;
    uint64_t offset = 0, len = 0;
    const bool ok = take(r, &h.kind) && take(r, &h.tensor) && take(r, &h.full_rows) &&
                    take(r, &h.full_cols) && take(r, &h.row0) && take(r, &h.col0) &&
                    take(r, &h.rows) && take(r, &h.cols) && take(r, &offset) && take(r, &len);
    if (!ok) return diag(path, "piece table entry " + to_string(i) + " is cut short");
    const std::string problem = header_problem(h);
    if (!problem.empty()) return diag(path, "piece " + to_string(i) + ": " + problem);
    if (len != static_cast<uint64_t>(h.rows * h.cols) * sizeof(float) || offset > body.size() ||
        len > body.size() - offset)
      return diag(path, "piece " + to_string(i) + " (" + describe(h) +
                            ") has a payload outside the file or of the wrong length");
    std::vector<float> data(static_cast<size_t>(h.rows * h.cols));
    std::memcpy(data.data(), body.data() + offset, len);
    out.pieces.emplace_back(std::move(h), std::move(data));
  }
  return out;
}

/// Reads the shard at `path` back and checks it against what the manifest (or the writer)
/// says: size, checksum, rank; then parses it.
Result<LoadedShard> verify_shard(const std::string& path, const ShardInfo& want) {
  auto read = read_whole(path);
  if (!read.ok()) {
    Diagnostic d = read.errors().front();
    d.what = "missing or unreadable shard of rank " + to_string(want.rank) + ": " + d.what;
    return d;
  }
  const std::vector<std::byte>& bytes = read.value();
  const auto size = static_cast<int64_t>(bytes.size());
  if (size != want.bytes)
    return diag(path,
                std::string(size < want.bytes ? "truncated" : "wrong size") + ": " +
                    to_string(size) + " bytes, the manifest says " + to_string(want.bytes),
                "never loaded; the write was cut short or the file was altered");
  if (bytes.size() < kHeaderBytes + kTrailerBytes)
    return diag(path, "truncated: " + to_string(size) + " bytes, fewer than the " +
                          to_string(kHeaderBytes + kTrailerBytes) + "-byte minimum");
  const auto body = std::span<const std::byte>(bytes).first(bytes.size() - kTrailerBytes);
  const uint64_t computed = crc64_xz(body);
  uint64_t trailer = 0;
  std::memcpy(&trailer, bytes.data() + body.size(), sizeof trailer);
  if (computed != want.checksum || computed != trailer)
    return diag(path,
                "checksum mismatch: the bytes give " + hex64(computed) + ", the manifest says " +
                    hex64(want.checksum) + ", the trailer " + hex64(trailer),
                "the shard is corrupted; never loaded");
  auto parsed = parse_shard(body, path);
  if (parsed.ok() && parsed->rank != want.rank)
    return diag(path, "holds rank " + to_string(parsed->rank) +
                          "'s shard, the manifest lists it for rank " + to_string(want.rank));
  return parsed;
}

/// Reads a field of a manifest object (int64_t or std::string), recording a diagnostic when it
/// is absent or mistyped.
template <typename T>
std::optional<T> field(const Json& o, const char* key, const std::string& where, Diagnostics* ds) {
  constexpr bool kInt = std::is_same_v<T, int64_t>;
  if (o.is_object() && o.contains(key) &&
      (kInt ? o.at(key).is_number_integer() : o.at(key).is_string()))
    return o.at(key).get<T>();
  ds->push_back(
      diag(where + "/" + key, kInt ? "missing or not an integer" : "missing or not a string"));
  return std::nullopt;
}

/// The manifest's shard list, checked: ranks 0 .. world-1 once each, plain file names.
Result<std::vector<ShardInfo>> parse_shard_list(const Json& list, int64_t world,
                                                const std::string& where) {
  if (!list.is_array() || static_cast<int64_t>(list.size()) != world)
    return diag(where + "/shards",
                "expected an array of " + to_string(world) + " shards (one per rank)");
  Diagnostics ds;
  std::vector<ShardInfo> out;
  std::set<int64_t> seen;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string w = where + "/shards/" + to_string(i);
    const auto rank = field<int64_t>(list[i], "rank", w, &ds);
    const auto file = field<std::string>(list[i], "file", w, &ds);
    const auto bytes = field<int64_t>(list[i], "bytes", w, &ds);
    const auto sum = field<std::string>(list[i], "checksum", w, &ds);
    if (!rank || !file || !bytes || !sum) continue;
    uint64_t checksum = 0;
    const auto [end, ec] = std::from_chars(sum->data(), sum->data() + sum->size(), checksum, 16);
    if (sum->size() != 16 || ec != std::errc() || end != sum->data() + sum->size())
      ds.push_back(diag(w + "/checksum", "expected 16 hex digits, got '" + *sum + "'"));
    if (*rank < 0 || *rank >= world || !seen.insert(*rank).second)
      ds.push_back(diag(w + "/rank", "rank " + to_string(*rank) + " is out of range or repeated",
                        "ranks 0 to " + to_string(world - 1) + ", once each"));
    if (file->empty() || file->find('/') != std::string::npos || *file == "." || *file == "..")
      ds.push_back(diag(w + "/file", "'" + *file + "' is not a file name in the step directory"));
    out.push_back({*file, *bytes, checksum, static_cast<int>(*rank)});
  }
  if (!ds.empty()) return ds;
  return out;
}

struct Manifest {
  Json meta;
  std::vector<ShardInfo> shards;
};

/// Reads and checks <step dir>/manifest.json (not the shards it lists).
Result<Manifest> read_manifest(const std::string& where, int64_t step) {
  auto text = read_whole(where);
  if (!text.ok()) {
    Diagnostic d = text.errors().front();
    d.hint = "a step directory without manifest.json is an incomplete checkpoint";
    return d;
  }
  auto parsed =
      parse_json(std::string(reinterpret_cast<const char*>(text->data()), text->size()), where);
  if (!parsed.ok()) return parsed.errors();
  const Json& m = parsed.value();
  Diagnostics ds;
  const auto format = field<std::string>(m, "format", where, &ds);
  const auto mstep = field<int64_t>(m, "step", where, &ds);
  const auto world = field<int64_t>(m, "world", where, &ds);
  if (format && *format != kCheckpointFormat)
    ds.push_back(diag(where + "/format", "unsupported format '" + *format + "'",
                      std::string("this build reads ") + kCheckpointFormat));
  if (mstep && *mstep != step)
    ds.push_back(diag(where + "/step", "says step " + to_string(*mstep) +
                                           ", its directory is step " + to_string(step)));
  if (world && (*world < 1 || *world >= kMaxDim))
    ds.push_back(diag(where + "/world", "world size " + to_string(*world) + " is out of range"));
  if (m.contains("meta") && !m.at("meta").is_object())
    ds.push_back(diag(where + "/meta", "expected an object"));
  if (!ds.empty()) return ds;
  auto shards = parse_shard_list(m.contains("shards") ? m.at("shards") : Json(), *world, where);
  if (!shards.ok()) return shards.errors();
  return Manifest{m.contains("meta") ? m.at("meta") : Json::object(), std::move(shards).value()};
}

}  // namespace

uint64_t crc64_xz(std::span<const std::byte> bytes, uint64_t crc) {
  crc = ~crc;
  for (std::byte b : bytes) crc = kCrcTable[(crc ^ static_cast<uint64_t>(b)) & 0xff] ^ (crc >> 8);
  return ~crc;
}

std::string step_directory(const std::string& dir, int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", static_cast<long long>(step));
  return (fs::path(dir) / buf).string();
}

Result<ShardInfo> write_shard(const std::string& dir, int64_t step, int rank,
                              std::span<const Piece> pieces) {
  const std::string sdir = step_directory(dir, step);
  const std::string name = shard_name(rank);
  Diagnostics ds;
  if (step < 0) ds.push_back(diag(sdir, "step " + to_string(step) + " is negative"));
  if (rank < 0) ds.push_back(diag(sdir + "/" + name, "rank " + to_string(rank) + " is negative"));
  for (size_t i = 0; i < pieces.size(); ++i) {
    const PieceHeader& h = pieces[i].h;
    const std::string where = sdir + "/" + name + ": piece " + to_string(i);
    const std::string problem = header_problem(h);
    if (!problem.empty()) {
      ds.push_back(diag(where, problem));
    } else if (static_cast<int64_t>(pieces[i].data.size()) != h.rows * h.cols) {
      ds.push_back(diag(where, describe(h) + " has " + to_string(pieces[i].data.size()) +
                                   " values, want rows * cols = " + to_string(h.rows * h.cols)));
    } else if (const auto bad = std::find_if_not(pieces[i].data.begin(), pieces[i].data.end(),
                                                 [](float v) { return std::isfinite(v); });
               bad != pieces[i].data.end()) {
      ds.push_back(diag(where,
                        describe(h) + " holds " + std::to_string(*bad) + " at element " +
                            to_string(bad - pieces[i].data.begin()),
                        "a checkpoint holds finite values only; the previous one is intact"));
    }
  }
  if (!ds.empty()) return ds;

  // Header, then the table, whose size fixes where the payloads start.
  size_t table = 0;
  for (const Piece& p : pieces) table += 8 + p.h.kind.size() + p.h.tensor.size() + 6 * 8 + 16;
  std::vector<std::byte> b;
  put(b, kMagic);
  put(b, kVersion);
  put(b, static_cast<int32_t>(rank));
  put(b, static_cast<uint64_t>(pieces.size()));
  uint64_t offset = kHeaderBytes + table;
  for (const Piece& p : pieces) {
    put(b, p.h.kind);
    put(b, p.h.tensor);
    for (int64_t v : {p.h.full_rows, p.h.full_cols, p.h.row0, p.h.col0, p.h.rows, p.h.cols})
      put(b, v);
    put(b, offset);
    put(b, static_cast<uint64_t>(p.data.size_bytes()));
    offset += p.data.size_bytes();
  }
  for (const Piece& p : pieces) {
    const auto payload = std::as_bytes(p.data);
    b.insert(b.end(), payload.begin(), payload.end());
  }
  const uint64_t checksum = crc64_xz(b);
  put(b, checksum);

  ds = make_dirs(sdir);
  if (ds.empty()) ds = write_atomically(sdir, name, b);
  if (!ds.empty()) return ds;
  return ShardInfo{name, static_cast<int64_t>(b.size()), checksum, rank};
}

Diagnostics write_manifest(const std::string& dir, int64_t step, std::span<const ShardInfo> shards,
                           const nlohmann::json& meta) {
  const std::string sdir = step_directory(dir, step);
  const std::string where = sdir + "/manifest.json";
  Diagnostics ds;
  if (shards.empty()) ds.push_back(diag(where, "no shards to list", "every rank writes a shard"));
  if (!meta.is_object() && !meta.is_null())
    ds.push_back(diag(where, std::string("meta must be a JSON object, got ") + meta.type_name()));
  if (!ds.empty()) return ds;
  Json list = Json::array();
  for (const ShardInfo& s : shards)
    list.push_back(
        {{"rank", s.rank}, {"file", s.file}, {"bytes", s.bytes}, {"checksum", hex64(s.checksum)}});
  // The reader's own checks of the list (ranks 0 .. n-1 once each, plain names), then every
  // shard read back.
  const auto world = static_cast<int64_t>(shards.size());
  auto parsed_list = parse_shard_list(list, world, where);
  if (!parsed_list.ok()) return parsed_list.errors();
  for (const ShardInfo& s : shards) {
    auto v = verify_shard(sdir + "/" + s.file, s);
    if (!v.ok()) ds.insert(ds.end(), v.errors().begin(), v.errors().end());
  }
  if (!ds.empty()) return ds;

  Json m = {{"format", kCheckpointFormat},
            {"step", step},
            {"world", world},
            {"checksum", "crc64-xz"},
            {"shards", list},
            {"meta", meta.is_null() ? Json::object() : meta}};
  std::string text;
  try {
    text = m.dump(2) + "\n";
  } catch (const Json::exception& e) {  // invalid UTF-8 in meta
    return {diag(where, std::string("cannot serialise the manifest: ") + e.what())};
  }
  return write_atomically(sdir, "manifest.json", std::as_bytes(std::span(text)));
}

std::vector<int64_t> complete_steps(const std::string& dir) {
  std::vector<int64_t> steps;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() < 13 || name.rfind("step-", 0) != 0) continue;
    int64_t step = 0;
    const char* first = name.data() + 5;
    const char* last = name.data() + name.size();
    if (!std::all_of(first, last, [](char c) { return c >= '0' && c <= '9'; })) continue;
    const auto [p, err] = std::from_chars(first, last, step);
    if (err != std::errc() || p != last) continue;
    std::error_code ec2;
    if (fs::is_regular_file(it->path() / "manifest.json", ec2)) steps.push_back(step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

Result<Checkpoint> Checkpoint::open_step(const std::string& dir, int64_t step) {
  Checkpoint ck;
  ck.path_ = step_directory(dir, step);
  auto m = read_manifest(ck.path_ + "/manifest.json", step);
  if (!m.ok()) return m.errors();
  ck.step_ = step;
  ck.world_ = static_cast<int>(m->shards.size());
  ck.meta_ = std::move(m.value().meta);
  Diagnostics ds;
  for (const ShardInfo& s : m->shards) {
    auto shard = verify_shard(ck.path_ + "/" + s.file, s);
    if (!shard.ok()) {
      ds.insert(ds.end(), shard.errors().begin(), shard.errors().end());
      continue;
    }
    for (auto& [h, data] : shard.value().pieces)
      ck.index_[{h.kind, h.tensor}].push_back({h, std::move(data), s.rank});
  }
  for (const auto& [key, pieces] : ck.index_)
    for (const StoredPiece& p : pieces)
      if (p.h.full_rows != pieces[0].h.full_rows || p.h.full_cols != pieces[0].h.full_cols)
        ds.push_back(diag(ck.path_ + "/" + shard_name(p.rank),
                          "piece " + describe(p.h) + " disagrees on the full shape with rank " +
                              to_string(pieces[0].rank) + "'s " + describe(pieces[0].h)));
  if (!ds.empty()) return ds;
  return ck;
}

Result<Checkpoint> Checkpoint::open_latest(const std::string& dir) {
  const std::vector<int64_t> steps = complete_steps(dir);
  if (steps.empty()) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
      return diag(dir, "no checkpoint: the directory does not exist",
                  "nothing has been saved there yet");
    return diag(dir, "no complete checkpoint (no step-<n>/manifest.json)",
                "a step directory without manifest.json is an interrupted write and is "
                "never loaded");
  }
  auto ck = open_step(dir, steps.back());
  if (ck.ok()) return ck;
  Diagnostics ds = ck.errors();
  const std::string newest = step_directory(dir, steps.back());
  std::string hint = "no older complete checkpoint exists";
  if (steps.size() > 1)
    hint = "step " + to_string(steps[steps.size() - 2]) +
           " is the newest older complete checkpoint (" +
           step_directory(dir, steps[steps.size() - 2]) + "); move " + newest +
           " aside to resume from it";
  ds.push_back(diag(newest,
                    "the newest checkpoint (step " + to_string(steps.back()) +
                        ") is unusable; an older one is not used silently",
                    hint));
  return ds;
}

Diagnostics Checkpoint::read(const std::string& kind, const std::string& tensor, int64_t full_rows,
                             int64_t full_cols, int64_t row0, int64_t col0, int64_t rows,
                             int64_t cols, std::span<float> out) const {
  const std::string where = path_ + ": " + kind + "/" + tensor;
  const auto it = index_.find({kind, tensor});
  if (it == index_.end()) {
    std::vector<std::string> names;
    for (const auto& [key, pieces] : index_) names.push_back(key.first + "/" + key.second);
    return {diag(where, "no such tensor in the checkpoint",
                 unknown_name_hint(kind + "/" + tensor, names))};
  }
  const std::vector<StoredPiece>& pieces = it->second;
  const PieceHeader& first = pieces.front().h;
  if (first.full_rows != full_rows || first.full_cols != full_cols)
    return {diag(where,
                 "full shape is " + to_string(first.full_rows) + "x" + to_string(first.full_cols) +
                     " in the checkpoint, the reader expects " + to_string(full_rows) + "x" +
                     to_string(full_cols),
                 "the checkpoint is of a different model")};
  const PieceHeader want{kind, tensor, full_rows, full_cols, row0, col0, rows, cols};
  const std::string problem = header_problem(want);
  if (!problem.empty()) return {diag(where, problem)};
  if (static_cast<int64_t>(out.size()) != rows * cols)
    return {diag(where, "output holds " + to_string(out.size()) +
                            " values, want rows * cols = " + to_string(rows * cols))};

  std::vector<uint8_t> covered(out.size(), 0);
  for (const StoredPiece& p : pieces) {
    // The intersection [r_lo, r_hi) x [c_lo, c_hi) of the piece and the request.
    const int64_t r_lo = std::max(row0, p.h.row0), r_hi = std::min(row0 + rows, p.h.row1());
    const int64_t c_lo = std::max(col0, p.h.col0), c_hi = std::min(col0 + cols, p.h.col1());
    if (r_lo >= r_hi || c_lo >= c_hi) continue;
    for (int64_t r = r_lo; r < r_hi; ++r) {
      const size_t src = static_cast<size_t>((r - p.h.row0) * p.h.cols + (c_lo - p.h.col0));
      const size_t dst = static_cast<size_t>((r - row0) * cols + (c_lo - col0));
      const size_t n = static_cast<size_t>(c_hi - c_lo);
      std::copy_n(p.data.data() + src, n, out.data() + dst);
      std::fill_n(covered.data() + dst, n, uint8_t{1});
    }
  }
  const auto missing = std::count(covered.begin(), covered.end(), uint8_t{0});
  if (missing == 0) return {};
  const size_t at =
      static_cast<size_t>(std::find(covered.begin(), covered.end(), 0) - covered.begin());
  std::vector<std::string> held;
  for (const StoredPiece& p : pieces)
    if (held.size() < 8) held.push_back("rank " + to_string(p.rank) + " " + describe(p.h));
  return {diag(where,
               to_string(missing) + " of " + to_string(out.size()) + " elements of " +
                   describe(want) + " are covered by no piece, the first at (" +
                   to_string(row0 + static_cast<int64_t>(at) / cols) + ", " +
                   to_string(col0 + static_cast<int64_t>(at) % cols) + ")",
               "pieces held: " + join(held, "; "))};
}

std::vector<PieceHeader> Checkpoint::tensors() const {
  std::vector<PieceHeader> out;
  for (const auto& [key, pieces] : index_) {
    const PieceHeader& h = pieces.front().h;
    out.push_back({h.kind, h.tensor, h.full_rows, h.full_cols, 0, 0, h.full_rows, h.full_cols});
  }
  return out;
}

}  // namespace parallax::exec
