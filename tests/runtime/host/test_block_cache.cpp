// LibTorch's CPU allocator replaced by the runtime's block cache
// (runtime/host/block_cache.h): a training step's large tensors reuse
// the previous step's blocks.
#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "exogym/runtime/host/block_cache.h"
#include "testing.h"

namespace host = exogym::runtime::host;

namespace {

bool cache_disabled() {
  const char* setting = std::getenv("EXOGYM_CPU_BLOCK_CACHE");
  return setting && std::strcmp(setting, "0") == 0;
}

}  // namespace

TEST_CASE("the block cache gives a freed large block to the next tensor of its size", "[malloc]") {
  if (cache_disabled()) {
    CHECK_FALSE(host::install_block_cache());
    return;
  }
  REQUIRE(host::install_block_cache());
  const host::BlockCacheStats before = host::block_cache_stats();
  void* first = nullptr;
  {
    at::Tensor gradient = at::ones({256, 784});  // the MLP's first weight: 784 KiB
    first = gradient.data_ptr();
    REQUIRE(reinterpret_cast<uintptr_t>(first) % 64 == 0);  // LibTorch's alignment
  }
  at::Tensor next = at::empty({784, 256});
  CHECK(next.data_ptr() == first);
  const host::BlockCacheStats after = host::block_cache_stats();
  CHECK(after.reused >= before.reused + 1);
  // A block freed on another thread is found too (it is kept by the CPU
  // that freed it, and taken from there when this one has none).
  void* moved = next.data_ptr();
  std::thread([t = std::move(next)]() mutable { t = at::Tensor(); }).join();
  at::Tensor again = at::zeros({256, 784});
  CHECK(again.data_ptr() == moved);
  CHECK(again.sum().item<float>() == 0.f);
}

TEST_CASE("the block cache leaves small tensors to malloc and serves LibTorch's raw allocations", "[malloc]") {
  if (cache_disabled()) return;
  REQUIRE(host::install_block_cache());
  const host::BlockCacheStats before = host::block_cache_stats();
  for (int i = 0; i < 10; ++i) at::Tensor small = at::ones({1000});  // 4 kB
  const host::BlockCacheStats after = host::block_cache_stats();
  CHECK(after.reused == before.reused);
  CHECK(after.allocated == before.allocated);
  // raw_allocate/raw_deallocate (used by some LibTorch kernels) need the
  // pointer alone to free a block.
  c10::Allocator* allocator = c10::GetCPUAllocator();
  REQUIRE(allocator->raw_deleter() != nullptr);
  void* raw = allocator->raw_allocate(1 << 20);
  std::memset(raw, 1, 1 << 20);
  allocator->raw_deallocate(raw);
  at::Tensor empty = at::empty({0});
  CHECK(empty.numel() == 0);
}

TEST_CASE("a room keeps blocks beyond the cache's limit while it lives, and hands them back when it ends", "[malloc]") {
  if (cache_disabled()) return;
  REQUIRE(host::install_block_cache());
  host::release_kept_blocks();
  CHECK(host::block_cache_stats().cached_bytes == 0);
  // Beyond the default limit of 256 MiB, as 4,096 nodes' gradient stacks
  // are; at::empty leaves its pages untouched.
  const int64_t floats = int64_t{300} << 18;  // 300 MiB
  const size_t bytes = static_cast<size_t>(floats) * sizeof(float);
  { at::Tensor unkept = at::empty({floats}); }
  CHECK(host::block_cache_stats().cached_bytes == 0);  // back to malloc
  {
    const host::BlockCacheRoom room(bytes);
    void* first = nullptr;
    {
      at::Tensor gradient = at::empty({floats});
      first = gradient.data_ptr();
    }
    CHECK(host::block_cache_stats().cached_bytes == bytes);
    const host::BlockCacheStats before = host::block_cache_stats();
    at::Tensor next = at::empty({floats});
    CHECK(next.data_ptr() == first);
    CHECK(host::block_cache_stats().reused == before.reused + 1);
  }
  // The room ended with the block kept: it went back to malloc.
  CHECK(host::block_cache_stats().cached_bytes == 0);
  { at::Tensor kept = at::empty({1 << 20}); }  // 4 MiB, kept under the limit
  CHECK(host::block_cache_stats().cached_bytes == size_t{4} << 20);
  host::release_kept_blocks();
  CHECK(host::block_cache_stats().cached_bytes == 0);
}

TEST_CASE("a full cache keeps a freed block in place of sizes no allocation took, never of those taken", "[malloc]") {
  if (cache_disabled()) return;
  REQUIRE(host::install_block_cache());
  host::release_kept_blocks();
  // A set-up's blocks fill the default 256 MiB limit: 64 blocks of 4 MiB.
  const int64_t floats = int64_t{1} << 20;  // 4 MiB
  {
    std::vector<at::Tensor> set_up;
    for (int i = 0; i < 64; ++i) set_up.push_back(at::empty({floats}));
  }
  REQUIRE(host::block_cache_stats().cached_bytes == size_t{256} << 20);
  // A step's block of another size, freed: kept, in place of two of them
  // (the cache no longer refuses every block a set-up did not leave room for).
  const int64_t five = floats + (int64_t{1} << 18), six = floats + (int64_t{1} << 19);
  void* first = nullptr;
  {
    at::Tensor gradient = at::empty({five});
    first = gradient.data_ptr();
  }
  CHECK(host::block_cache_stats().cached_bytes == (size_t{256} << 20) - (size_t{3} << 20));
  const host::BlockCacheStats before = host::block_cache_stats();
  at::Tensor next = at::empty({five});
  CHECK(next.data_ptr() == first);
  CHECK(host::block_cache_stats().reused == before.reused + 1);
  next = at::Tensor();
  // A 6 MiB block takes the place of a 4 MiB one, not of the 5 MiB block,
  // which an allocation took: it is still there for the next.
  { at::Tensor other = at::empty({six}); }
  CHECK(host::block_cache_stats().cached_bytes == (size_t{255} << 20));
  next = at::empty({five});
  CHECK(next.data_ptr() == first);
  next = at::Tensor();
  // A block larger than the whole limit goes back to malloc, and takes no
  // kept block's place.
  const size_t kept = host::block_cache_stats().cached_bytes;
  { at::Tensor huge = at::empty({int64_t{300} << 18}); }  // 300 MiB
  CHECK(host::block_cache_stats().cached_bytes == kept);
  host::release_kept_blocks();
}
