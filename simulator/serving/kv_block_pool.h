#pragma once
/// The KV-cache blocks of one engine replica with automatic prefix caching, as vLLM V1's
/// BlockPool keeps them (vllm/v1/core/block_pool.py, kv_cache_manager.py):
/// - every block is either held by requests (reference count >= 1) or in the FREE queue;
/// - a full block of computed tokens carries a key naming its content and everything before it
///   (vLLM's chained block hash); a keyed block stays findable after it is freed, until the
///   queue hands it out again: the cache is the free queue itself, evicted from its head;
/// - allocation pops the head of the free queue (evicting its key); a request that finishes or is
///   preempted returns its blocks to the tail in reverse order, so its last blocks are evicted
///   first and its prefix survives longest;
/// - a cache hit on a free block takes it out of the queue wherever it is (a "touch").
/// So free_blocks() counts cached-but-evictable blocks as free, as vLLM's KV usage does.
///
/// The keys are 64-bit hashes the caller computes; equal keys mean equal content. When two
/// blocks get the same key (two requests computed the same prefix at once), the first keeps it
/// and the second stays unkeyed, as a dictionary keeps one entry.

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace parallax::serving {

class KvBlockPool {
 public:
  /// `blocks` free blocks (>= 1), in the queue in index order.
  explicit KvBlockPool(int64_t blocks);

  int64_t num_blocks() const { return static_cast<int64_t>(ref_.size()); }
  int64_t free_blocks() const { return free_count_; }

  /// Pops the free queue's head for a new owner (reference count 1), dropping its key.
  /// PX_CHECKs that a free block exists.
  int32_t allocate();

  /// The block keyed `key`, held or free; -1 when no block holds it.
  int32_t lookup(uint64_t key) const;

  /// One more owner of `block` (a cache hit); a free block leaves the queue.
  void touch(int32_t block);

  /// One owner fewer; at zero the block joins the tail of the free queue, keeping its key.
  void release(int32_t block);

  /// Gives held `block` the key `key` (nonzero) unless it has one or another block holds it.
  void set_key(int32_t block, uint64_t key);

  int32_t ref_count(int32_t block) const { return ref_[static_cast<size_t>(block)]; }
  int64_t cached_blocks() const { return static_cast<int64_t>(index_.size()); }

 private:
  void unlink(int32_t block);
  void push_back(int32_t block);

  std::vector<int32_t> ref_;
  std::vector<int32_t> prev_, next_;  ///< the free queue, doubly linked; -1 ends it
  std::vector<uint64_t> key_;         ///< 0: none
  int32_t head_ = -1, tail_ = -1;
  int64_t free_count_ = 0;
  std::unordered_map<uint64_t, int32_t> index_;  ///< key -> the block holding it
};

/// A 64-bit mix (splitmix64's finaliser): the building block of the caller's block keys.
uint64_t mix64(uint64_t x);

}  // namespace parallax::serving
