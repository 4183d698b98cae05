#pragma once
// LibTorch's CPU allocator, replaced by one that keeps freed blocks of
// 64 KiB and more for the next allocation of the same size.
//
// Why: a training step allocates and frees the same large tensors every
// time (gradients, the optimizer's temporaries, activations), but between
// K nodes' steps glibc's malloc splits and merges its free memory so that
// blocks of those sizes are not found again: with 512 MLP nodes the heaps
// grew by about 10 MB a step while the memory in use stayed flat, and every
// new page is a page fault (15-30 µs each on the development machine, a
// virtual machine). Keeping the blocks by size makes a step reuse the
// previous step's memory exactly.
#include <cstddef>

namespace exogym::runtime::host {

// Makes the caching allocator LibTorch's CPU allocator, once per process
// (later calls change nothing); tensors allocated before keep their own
// deleter. At most `max_cached_bytes` of freed blocks are kept; a block
// freed beyond that takes the place of kept blocks of sizes that no
// allocation has taken since (the oldest first), which go back to malloc,
// or, with none, goes back itself. Returns whether it is installed
// (false where EXOGYM_CPU_BLOCK_CACHE=0 is set in the environment).
bool install_block_cache(size_t max_cached_bytes = size_t{256} << 20);

// Hands every kept block back to malloc: blocks of sizes no allocation will
// ask for again (a replica's tensors once stacks took their place) would
// otherwise fill the cache's limit and leave no room for a step's own.
void release_kept_blocks();

// Room in the cache for `bytes` more while it lives: the gradient stacks of
// stacked execution, freed and allocated again every step, are larger than
// the default limit (3.3 GB at 4,096 MLP nodes), and unkept each step's
// gradients were fresh pages (13.9 million faults in 12 steps). Rooms add up;
// when one ends, kept blocks beyond the lowered limit go back to malloc.
class BlockCacheRoom {
 public:
  explicit BlockCacheRoom(size_t bytes);
  ~BlockCacheRoom();
  BlockCacheRoom(const BlockCacheRoom&) = delete;
  BlockCacheRoom& operator=(const BlockCacheRoom&) = delete;

 private:
  size_t bytes_;
};

struct BlockCacheStats {
  size_t reused = 0;        // allocations served from kept blocks
  size_t allocated = 0;     // allocations of 64 KiB and more served by malloc
  size_t cached_bytes = 0;  // freed bytes kept now
};
BlockCacheStats block_cache_stats();

}  // namespace exogym::runtime::host
