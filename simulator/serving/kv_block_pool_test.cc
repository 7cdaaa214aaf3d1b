#include "simulator/serving/kv_block_pool.h"

#include <gtest/gtest.h>

namespace parallax::serving {
namespace {

// A keyed block stays findable after it is freed, until the free queue hands it out again
// (from its head); a hit takes a free block out of the queue; a second block with the same key
// stays unkeyed.
TEST(KvBlockPool, FreedBlocksStayCachedUntilTheQueueReusesThem) {
  KvBlockPool pool(3);
  EXPECT_EQ(pool.free_blocks(), 3);
  const int32_t a = pool.allocate(), b = pool.allocate();
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 1);
  pool.set_key(a, 11);
  pool.set_key(b, 11);  // taken by a: b stays unkeyed
  EXPECT_EQ(pool.lookup(11), a);
  EXPECT_EQ(pool.cached_blocks(), 1);
  pool.release(b);
  pool.release(a);  // queue: [2, 1, 0]
  EXPECT_EQ(pool.free_blocks(), 3);
  EXPECT_EQ(pool.lookup(11), a);
  // A hit on the free block takes it out of the queue; releasing puts it back at the tail.
  pool.touch(a);
  EXPECT_EQ(pool.free_blocks(), 2);
  EXPECT_EQ(pool.ref_count(a), 1);
  pool.release(a);  // queue: [2, 1, 0]
  EXPECT_EQ(pool.allocate(), 2);
  EXPECT_EQ(pool.allocate(), 1);
  EXPECT_EQ(pool.lookup(11), a);  // still cached
  EXPECT_EQ(pool.allocate(), a);  // the last free block: its key is evicted
  EXPECT_EQ(pool.lookup(11), -1);
  EXPECT_EQ(pool.cached_blocks(), 0);
  EXPECT_EQ(pool.free_blocks(), 0);
}

TEST(KvBlockPool, SharedBlocksCountTheirOwners) {
  KvBlockPool pool(2);
  const int32_t a = pool.allocate();
  pool.touch(a);  // a second request shares it
  EXPECT_EQ(pool.ref_count(a), 2);
  pool.release(a);
  EXPECT_EQ(pool.free_blocks(), 1);  // still held by one
  pool.release(a);
  EXPECT_EQ(pool.free_blocks(), 2);
}

}  // namespace
}  // namespace parallax::serving
