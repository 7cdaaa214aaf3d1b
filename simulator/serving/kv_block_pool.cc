#include "simulator/serving/kv_block_pool.h"

#include "core/result.h"

namespace parallax::serving {

uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

KvBlockPool::KvBlockPool(int64_t blocks) {
  PX_CHECK(blocks >= 1 && blocks < (int64_t{1} << 31), "KvBlockPool: blocks=" << blocks);
  const auto n = static_cast<size_t>(blocks);
  ref_.assign(n, 0);
  prev_.assign(n, -1);
  next_.assign(n, -1);
  key_.assign(n, 0);
  for (int32_t b = 0; b < static_cast<int32_t>(n); ++b) push_back(b);
}

void KvBlockPool::unlink(int32_t b) {
  const auto i = static_cast<size_t>(b);
  if (prev_[i] >= 0) {
    next_[static_cast<size_t>(prev_[i])] = next_[i];
  } else {
    head_ = next_[i];
  }
  if (next_[i] >= 0) {
    prev_[static_cast<size_t>(next_[i])] = prev_[i];
  } else {
    tail_ = prev_[i];
  }
  prev_[i] = next_[i] = -1;
  --free_count_;
}

void KvBlockPool::push_back(int32_t b) {
  const auto i = static_cast<size_t>(b);
  prev_[i] = tail_;
  next_[i] = -1;
  if (tail_ >= 0) {
    next_[static_cast<size_t>(tail_)] = b;
  } else {
    head_ = b;
  }
  tail_ = b;
  ++free_count_;
}

int32_t KvBlockPool::allocate() {
  PX_CHECK(head_ >= 0, "KvBlockPool::allocate: no free block");
  const int32_t b = head_;
  unlink(b);
  const auto i = static_cast<size_t>(b);
  if (key_[i] != 0) {
    auto it = index_.find(key_[i]);
    if (it != index_.end() && it->second == b) index_.erase(it);
    key_[i] = 0;
  }
  ref_[i] = 1;
  return b;
}

int32_t KvBlockPool::lookup(uint64_t key) const {
  auto it = index_.find(key);
  return it == index_.end() ? -1 : it->second;
}

void KvBlockPool::touch(int32_t b) {
  const auto i = static_cast<size_t>(b);
  if (ref_[i] == 0) unlink(b);
  ++ref_[i];
}

void KvBlockPool::release(int32_t b) {
  const auto i = static_cast<size_t>(b);
  PX_CHECK(ref_[i] >= 1, "KvBlockPool::release: block " << b << " is already free");
  if (--ref_[i] == 0) push_back(b);
}

void KvBlockPool::set_key(int32_t b, uint64_t key) {
  const auto i = static_cast<size_t>(b);
  PX_CHECK(key != 0 && ref_[i] >= 1, "KvBlockPool::set_key: block " << b << " key " << key);
  if (key_[i] != 0) return;
  if (index_.emplace(key, b).second) key_[i] = key;
}

}  // namespace parallax::serving
