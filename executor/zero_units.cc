#include "executor/zero_units.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <tuple>

namespace parallax::exec {

PageBuffer::PageBuffer(size_t n) : size_(n) {
  if (n == 0) return;
  void* p =
      mmap(nullptr, n * sizeof(float), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  PX_CHECK(p != MAP_FAILED, "mmap of " << n * sizeof(float) << " bytes failed");
  data_ = static_cast<float*>(p);
}

PageBuffer::~PageBuffer() {
  if (data_ != nullptr) munmap(data_, size_ * sizeof(float));
}

void release_pages(std::span<float> v) {
  if (v.empty()) return;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(v.data());
  const uintptr_t end = begin + v.size() * sizeof(float);
  const uintptr_t a = (begin + page - 1) / page * page, b = end / page * page;
  if (b > a && madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED) == 0) {
    std::fill(v.data(), reinterpret_cast<float*>(a), 0.0f);
    std::fill(reinterpret_cast<float*>(b), v.data() + v.size(), 0.0f);
  } else {
    std::fill(v.begin(), v.end(), 0.0f);
  }
}

ShardedUnits::ShardedUnits(ProcessGroup& data, int64_t slice, bool shard_parameters,
                           bool shard_gradients, Buffers buffers, Diagnostics* errors)
    : data_(&data),
      slice_(slice),
      shard_parameters_(shard_parameters),
      shard_gradients_(shard_gradients),
      buf_(buffers),
      errors_(errors) {
  PX_CHECK(slice > 0 && static_cast<int64_t>(buf_.params.size()) == slice * data.size(),
           "flat buffers of " << buf_.params.size() << " values, slices of " << slice);
}

ShardedUnits::ShardedUnits(SplitShards& split, bool shard_parameters, bool shard_gradients,
                           Buffers buffers, Diagnostics* errors)
    : split_(&split),
      slice_(split.size()),
      shard_parameters_(shard_parameters),
      shard_gradients_(shard_gradients),
      buf_(buffers),
      errors_(errors) {
  PX_CHECK(static_cast<int64_t>(buf_.grad_slice.size()) == slice_ &&
               (!shard_parameters || static_cast<int64_t>(buf_.own_params.size()) == slice_),
           "slices of " << buf_.grad_slice.size() << " and " << buf_.own_params.size()
                        << " values, want " << slice_);
}

std::vector<int64_t> ShardedUnits::counts(int64_t a, int64_t b) const {
  std::vector<int64_t> c(static_cast<size_t>(data_->size()));
  for (int q = 0; q < data_->size(); ++q)
    c[q] = std::max<int64_t>(0, std::min(b, (q + 1) * slice_) - std::max(a, q * slice_));
  return c;
}

int64_t ShardedUnits::slice_offset(int64_t a, int64_t mine) const {
  const int64_t begin = data_->rank() * slice_;
  return mine > 0 ? std::max(a, begin) - begin : 0;
}

void ShardedUnits::gather(int64_t a, int64_t b) {
  if (!errors_->empty()) return;
  if (split_ != nullptr) {
    *errors_ = split_->gather(a, b, buf_.own_params, buf_.params);
    return;
  }
  const std::vector<int64_t> c = counts(a, b);
  const int64_t mine = c[static_cast<size_t>(data_->rank())];
  const int64_t from = slice_offset(a, mine);
  *errors_ = data_->all_gather(
      buf_.own_params.subspan(static_cast<size_t>(from), static_cast<size_t>(mine)), c,
      buf_.params.subspan(static_cast<size_t>(a), static_cast<size_t>(b - a)));
}

void ShardedUnits::reduce(int64_t a, int64_t b) {
  if (!errors_->empty()) return;
  const std::span<float> g = buf_.grads.subspan(static_cast<size_t>(a), static_cast<size_t>(b - a));
  if (split_ != nullptr) {
    *errors_ = split_->reduce(a, b, buf_.grads, buf_.grad_slice);
    if (errors_->empty()) release_pages(g);
    return;
  }
  const std::vector<int64_t> c = counts(a, b);
  const int64_t mine = c[static_cast<size_t>(data_->rank())];
  part_.resize(static_cast<size_t>(mine));
  *errors_ = data_->reduce_scatter_sum(g, c, part_);
  if (!errors_->empty()) return;
  const int64_t from = slice_offset(a, mine);
  for (int64_t i = 0; i < mine; ++i) buf_.grad_slice[static_cast<size_t>(from + i)] += part_[i];
  release_pages(g);
}

ParamUnits ShardedUnits::hooks(const Transformer<float>& chunk, int64_t offset) {
  auto range = [&chunk, offset](int64_t unit) {
    const auto [a, b] = chunk.unit_range(unit);
    return std::pair<int64_t, int64_t>{offset + a, offset + b};
  };
  ParamUnits u;
  if (shard_parameters_) {
    u.gather = [this, range](int64_t unit) {
      const auto [a, b] = range(unit);
      gather(a, b);
    };
    u.release = [this, range](int64_t unit) {
      const auto [a, b] = range(unit);
      release_pages(buf_.params.subspan(static_cast<size_t>(a), static_cast<size_t>(b - a)));
    };
  }
  if (shard_gradients_) {
    u.grads_done = [this, range](int64_t unit) {
      const auto [a, b] = range(unit);
      reduce(a, b);
    };
  }
  return u;
}

namespace {

constexpr int64_t kSplitBucket = int64_t{1} << 22;

}  // namespace

SplitShards::SplitShards(std::vector<std::pair<int64_t, int64_t>> dense,
                         std::vector<std::pair<int64_t, int64_t>> expert, ProcessGroup& data,
                         ProcessGroup& expert_data) {
  int64_t at = 0;
  for (auto [kind, runs, group] :
       {std::tuple{&dense_, &dense, &data}, std::tuple{&expert_, &expert, &expert_data}}) {
    Kind& k = *kind;
    k.runs = std::move(*runs);
    k.group = group;
    for (const auto& r : k.runs) k.total += r.second;
    const int64_t ranks = group->size();
    k.per_rank = (k.total + ranks - 1) / ranks;
    k.first = group->rank() * k.per_rank;
    k.mine = std::clamp<int64_t>(k.total - k.first, 0, k.per_rank);
    k.at = at;
    each_run(k, k.first, k.first + k.mine, [&](int64_t flat, int64_t packed, int64_t len) {
      runs_.push_back({flat, at + (packed - k.first), len});
    });
    at += k.mine;
  }
  dense_mine_ = dense_.mine;
  expert_mine_ = expert_.mine;
}

template <typename F>
void SplitShards::each_run(const Kind& k, int64_t a, int64_t b, F f) {
  int64_t packed = 0;
  for (const auto& [flat, len] : k.runs) {
    const int64_t x = std::max(packed, a), y = std::min(packed + len, b);
    if (x < y) f(flat + (x - packed), x, y - x);
    packed += len;
    if (packed >= b) break;
  }
}

std::vector<int64_t> SplitShards::Kind::counts(int64_t a, int64_t b) const {
  std::vector<int64_t> out(static_cast<size_t>(group->size()));
  for (int r = 0; r < group->size(); ++r) {
    const int64_t lo = std::max(a, r * per_rank), hi = std::min(b, (r + 1) * per_rank);
    out[static_cast<size_t>(r)] = std::max<int64_t>(0, hi - lo);
  }
  return out;
}

void SplitShards::pack(const Kind& k, int64_t a, std::span<const float> flat,
                       std::span<float> out) {
  std::fill(out.begin(), out.end(), 0.0f);
  each_run(k, a, a + static_cast<int64_t>(out.size()), [&](int64_t f, int64_t p, int64_t len) {
    std::copy_n(flat.begin() + f, len, out.begin() + (p - a));
  });
}

void SplitShards::unpack(const Kind& k, int64_t a, std::span<const float> in,
                         std::span<float> flat) {
  each_run(k, a, a + static_cast<int64_t>(in.size()), [&](int64_t f, int64_t p, int64_t len) {
    std::copy_n(in.begin() + (p - a), len, flat.begin() + f);
  });
}

int64_t SplitShards::Kind::packed(int64_t x) const {
  int64_t p = 0;
  for (const auto& [flat, len] : runs) {
    if (flat >= x) break;
    p += std::min(len, x - flat);
  }
  return p;
}

int64_t SplitShards::contiguous(const Kind& k, int64_t a, int64_t b) {
  int64_t packed = 0;
  for (const auto& [flat, len] : k.runs) {
    if (a >= packed && b <= packed + len) return flat + (a - packed);
    packed += len;
    if (packed > a) break;
  }
  return -1;
}

Diagnostics SplitShards::reduce_packed(const Kind& k, int64_t a, int64_t b,
                                       std::span<const float> grads, std::span<float> slice) {
  std::span<const float> in;
  if (const int64_t flat = contiguous(k, a, b); flat >= 0) {
    in = grads.subspan(static_cast<size_t>(flat), static_cast<size_t>(b - a));
  } else {
    bucket_.resize(static_cast<size_t>(b - a));
    pack(k, a, grads, bucket_);
    in = bucket_;
  }
  const std::vector<int64_t> counts = k.counts(a, b);
  const int64_t mine = counts[static_cast<size_t>(k.group->rank())];
  // Per call, not kept: between steps the heap hands its pages to the activations.
  std::vector<float> part(static_cast<size_t>(mine));
  if (Diagnostics d = k.group->reduce_scatter_sum(in, counts, part); !d.empty()) return d;
  if (mine == 0) return {};
  float* out = slice.data() + k.at + (std::max(a, k.first) - k.first);
  for (int64_t i = 0; i < mine; ++i) out[i] += part[static_cast<size_t>(i)];
  return {};
}

Diagnostics SplitShards::gather_packed(const Kind& k, int64_t a, int64_t b,
                                       std::span<const float> own, std::span<float> params) {
  const std::vector<int64_t> counts = k.counts(a, b);
  const int64_t mine = counts[static_cast<size_t>(k.group->rank())];
  const int64_t lo = std::max(a, k.first);
  std::span<const float> part;
  std::vector<float> packed;  // this rank's values when they are not read from `own`
  if (mine > 0 && !own.empty()) {
    part = own.subspan(static_cast<size_t>(k.at + (lo - k.first)), static_cast<size_t>(mine));
  } else {
    packed.resize(static_cast<size_t>(mine));
    if (mine > 0) pack(k, lo, params, packed);
    part = packed;
  }
  const int64_t flat = contiguous(k, a, b);
  if (flat >= 0)
    return k.group->all_gather(
        part, counts, params.subspan(static_cast<size_t>(flat), static_cast<size_t>(b - a)));
  bucket_.resize(static_cast<size_t>(b - a));
  if (Diagnostics d = k.group->all_gather(part, counts, bucket_); !d.empty()) return d;
  unpack(k, a, bucket_, params);
  return {};
}

Diagnostics SplitShards::reduce(std::span<const float> grads, std::span<float> slice) {
  PX_CHECK(static_cast<int64_t>(slice.size()) == size(), "SplitShards::reduce: slice size");
  for (const Kind* k : {&dense_, &expert_})
    for (int64_t a = 0; a < k->total; a += kSplitBucket)
      if (Diagnostics d = reduce_packed(*k, a, std::min(k->total, a + kSplitBucket), grads, slice);
          !d.empty())
        return d;
  return {};
}

Diagnostics SplitShards::gather(std::span<float> params) {
  for (const Kind* k : {&dense_, &expert_})
    for (int64_t a = 0; a < k->total; a += kSplitBucket)
      if (Diagnostics d = gather_packed(*k, a, std::min(k->total, a + kSplitBucket), {}, params);
          !d.empty())
        return d;
  return {};
}

Diagnostics SplitShards::reduce(int64_t a, int64_t b, std::span<const float> grads,
                                std::span<float> slice) {
  PX_CHECK(static_cast<int64_t>(slice.size()) == size(), "SplitShards::reduce: slice size");
  for (const Kind* k : {&dense_, &expert_}) {
    const int64_t pa = k->packed(a), pb = k->packed(b);
    if (pa < pb)
      if (Diagnostics d = reduce_packed(*k, pa, pb, grads, slice); !d.empty()) return d;
  }
  return {};
}

Diagnostics SplitShards::gather(int64_t a, int64_t b, std::span<const float> own,
                                std::span<float> params) {
  PX_CHECK(static_cast<int64_t>(own.size()) == size(), "SplitShards::gather: slice size");
  for (const Kind* k : {&dense_, &expert_}) {
    const int64_t pa = k->packed(a), pb = k->packed(b);
    if (pa < pb)
      if (Diagnostics d = gather_packed(*k, pa, pb, own, params); !d.empty()) return d;
  }
  return {};
}

}  // namespace parallax::exec
