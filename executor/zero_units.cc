#include "executor/zero_units.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

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
    : data_(data),
      slice_(slice),
      shard_parameters_(shard_parameters),
      shard_gradients_(shard_gradients),
      buf_(buffers),
      errors_(errors) {
  PX_CHECK(slice > 0 && static_cast<int64_t>(buf_.params.size()) == slice * data.size(),
           "flat buffers of " << buf_.params.size() << " values, slices of " << slice);
}

std::vector<int64_t> ShardedUnits::counts(int64_t a, int64_t b) const {
  std::vector<int64_t> c(static_cast<size_t>(data_.size()));
  for (int q = 0; q < data_.size(); ++q)
    c[q] = std::max<int64_t>(0, std::min(b, (q + 1) * slice_) - std::max(a, q * slice_));
  return c;
}

int64_t ShardedUnits::slice_offset(int64_t a, int64_t mine) const {
  const int64_t begin = data_.rank() * slice_;
  return mine > 0 ? std::max(a, begin) - begin : 0;
}

void ShardedUnits::gather(int64_t a, int64_t b) {
  if (!errors_->empty()) return;
  const std::vector<int64_t> c = counts(a, b);
  const int64_t mine = c[static_cast<size_t>(data_.rank())];
  const int64_t from = slice_offset(a, mine);
  *errors_ = data_.all_gather(
      buf_.own_params.subspan(static_cast<size_t>(from), static_cast<size_t>(mine)), c,
      buf_.params.subspan(static_cast<size_t>(a), static_cast<size_t>(b - a)));
}

void ShardedUnits::reduce(int64_t a, int64_t b) {
  if (!errors_->empty()) return;
  const std::vector<int64_t> c = counts(a, b);
  const int64_t mine = c[static_cast<size_t>(data_.rank())];
  part_.resize(static_cast<size_t>(mine));
  const std::span<float> g = buf_.grads.subspan(static_cast<size_t>(a), static_cast<size_t>(b - a));
  *errors_ = data_.reduce_scatter_sum(g, c, part_);
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

}  // namespace parallax::exec
