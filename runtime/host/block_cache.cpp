#include "exogym/runtime/host/block_cache.h"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace exogym::runtime::host {

namespace {

// Each block starts with a header holding its size, so that freeing needs
// only the data pointer (LibTorch's raw_allocate/raw_deallocate use that);
// 64 bytes keep the data at LibTorch's alignment.
constexpr size_t kHeader = 64;
constexpr size_t kAlignment = 64;
// Smaller blocks come from malloc's bins, which reuse them well.
constexpr size_t kMinCached = size_t{64} << 10;
// Cached sizes are rounded up to whole pages, so that sizes that differ by
// a few bytes share their blocks.
constexpr size_t kPage = 4096;

// Freed blocks are kept per CPU and taken from the CPU that asks first:
// the block freed last on this core is likely still in its caches (one
// list for all cores made a 16-node MLP run 13 % slower than malloc, whose
// arenas are per core too).
constexpr int kShards = 64;

// The kept blocks of one size: when one was last freed, and how many an
// allocation took.
struct KeptBlocks {
  std::vector<void*> starts;
  uint64_t last_freed = 0;  // Cache::clock
  uint64_t taken = 0;
};

struct Shard {
  std::mutex mutex;
  std::unordered_map<size_t, KeptBlocks> free_blocks;  // by size
};

struct Cache {
  Shard shards[kShards];
  std::atomic<size_t> cached_bytes{0}, reused{0}, allocated{0};
  // The installed limit plus the rooms that live (BlockCacheRoom).
  std::atomic<size_t> max_cached{0};
  std::atomic<uint64_t> clock{0};  // counts the large blocks freed
  // Bumped when a block is kept whose size no allocation has taken yet (a
  // candidate for make_room); a scan that found none records the value it
  // saw, and the next full cache skips the scan until it changes.
  std::atomic<uint64_t> untaken_kept{0}, scanned_at{~uint64_t{0}};
};

// Never destroyed: tensors may be freed during static destruction.
Cache& cache() {
  static Cache* c = new Cache;
  return *c;
}

int this_shard() {
  const int cpu = sched_getcpu();
  return cpu < 0 ? 0 : cpu % kShards;
}

size_t block_size(size_t n) { return n < kMinCached ? n : (n + kPage - 1) / kPage * kPage; }

// Counts `size` more bytes as kept if they fit under the limit.
bool reserve(Cache& c, size_t size) {
  if (c.cached_bytes.fetch_add(size) + size <= c.max_cached) return true;
  c.cached_bytes -= size;
  return false;
}

// Hands kept blocks back to malloc, of the sizes that no allocation has
// taken since they were kept, those freed longest ago first, until `size`
// more bytes fit under the limit; whether they do. Why: blocks that are not
// asked for again (what a run's set-up freed) would otherwise fill the cache
// for good and leave every step's own blocks to malloc (a stacked MLP's
// gradients: its arenas grew by 0.8 GB at 1,024 nodes). Sizes that were
// taken stay: where a step frees more than the cache keeps (nanoGPT's
// activations), the blocks kept are reused, and evicting them for others
// made the step 7 % slower.
bool make_room(Cache& c, size_t size) {
  if (size > c.max_cached) return false;
  const uint64_t version = c.untaken_kept.load();
  if (c.scanned_at.load() == version) return false;  // no candidate since the last scan
  struct Candidate {
    uint64_t last_freed;
    int shard;
    size_t size;
  };
  std::vector<Candidate> candidates;
  for (int i = 0; i < kShards; ++i) {
    std::lock_guard<std::mutex> lock(c.shards[i].mutex);
    for (const auto& [other, kept] : c.shards[i].free_blocks)
      if (other != size && kept.taken == 0 && !kept.starts.empty()) candidates.push_back({kept.last_freed, i, other});
  }
  if (candidates.empty()) {
    c.scanned_at = version;
    return false;
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const Candidate& a, const Candidate& b) { return a.last_freed < b.last_freed; });
  for (const Candidate& candidate : candidates) {
    Shard& shard = c.shards[candidate.shard];
    std::lock_guard<std::mutex> lock(shard.mutex);
    auto it = shard.free_blocks.find(candidate.size);
    if (it == shard.free_blocks.end()) continue;
    std::vector<void*>& starts = it->second.starts;
    while (!starts.empty() && c.cached_bytes.load() + size > c.max_cached) {
      std::free(starts.back());
      starts.pop_back();
      c.cached_bytes -= candidate.size;
    }
    if (c.cached_bytes.load() + size <= c.max_cached) return true;
  }
  return c.cached_bytes.load() + size <= c.max_cached;
}

void release(void* data) {
  if (!data) return;
  char* start = static_cast<char*>(data) - kHeader;
  size_t size;
  std::memcpy(&size, start, sizeof size);
  if (size >= kMinCached) {
    Cache& c = cache();
    const uint64_t now = ++c.clock;
    if (reserve(c, size) || (make_room(c, size) && reserve(c, size))) {
      Shard& shard = c.shards[this_shard()];
      std::lock_guard<std::mutex> lock(shard.mutex);
      KeptBlocks& kept = shard.free_blocks[size];
      kept.starts.push_back(start);
      kept.last_freed = now;
      if (kept.taken == 0) ++c.untaken_kept;
      return;
    }
  }
  std::free(start);
}

// Hands kept blocks back to malloc until no more than `limit` bytes are kept.
void trim_to(size_t limit) {
  Cache& c = cache();
  for (Shard& shard : c.shards) {
    std::lock_guard<std::mutex> lock(shard.mutex);
    for (auto& [size, kept] : shard.free_blocks) {
      while (!kept.starts.empty() && c.cached_bytes.load() > limit) {
        std::free(kept.starts.back());
        kept.starts.pop_back();
        c.cached_bytes -= size;
      }
    }
  }
}

void* take_from(Shard& shard, size_t size) {
  std::lock_guard<std::mutex> lock(shard.mutex);
  auto it = shard.free_blocks.find(size);
  if (it == shard.free_blocks.end() || it->second.starts.empty()) return nullptr;
  void* start = it->second.starts.back();
  it->second.starts.pop_back();
  ++it->second.taken;
  return start;
}

// This CPU's block of `size` if it has one, else another CPU's.
void* take_cached(size_t size) {
  Cache& c = cache();
  const int own = this_shard();
  for (int i = 0; i < kShards; ++i) {
    if (void* start = take_from(c.shards[(own + i) % kShards], size)) {
      c.cached_bytes -= size;
      ++c.reused;
      return start;
    }
  }
  ++c.allocated;
  return nullptr;
}

// c10::Allocator changed between LibTorch versions: 1.x declares
// `allocate(size_t) const`, 2.x `allocate(size_t)` (non-const) and a pure
// virtual `copy_data`. Both spellings are defined here without `override`, so
// one source builds against either: whichever the base declares, one of them
// overrides it and the other is a plain member.
class CachingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) { return std::as_const(*this).allocate(n); }
  void copy_data(void* dest, const void* src, std::size_t count) const { std::memcpy(dest, src, count); }
  c10::DataPtr allocate(size_t n) const {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (n == 0) return {nullptr, nullptr, &release, cpu};
    const size_t size = block_size(n);
    void* start = size >= kMinCached ? take_cached(size) : nullptr;
    if (!start && posix_memalign(&start, kAlignment, kHeader + size) != 0) start = nullptr;
    // The wording of LibTorch's own allocator, which the runtime recognises
    // as running out of memory (util/exception_text.h).
    TORCH_CHECK(start, "DefaultCPUAllocator: can't allocate memory: you tried to allocate ", n, " bytes.");
    std::memcpy(start, &size, sizeof size);
    void* data = static_cast<char*>(start) + kHeader;
    return {data, data, &release, cpu};
  }
  c10::DeleterFnPtr raw_deleter() const { return &release; }
};

}  // namespace

bool install_block_cache(size_t max_cached_bytes) {
  static const bool installed = [max_cached_bytes] {
    const char* setting = std::getenv("EXOGYM_CPU_BLOCK_CACHE");
    if (setting && std::strcmp(setting, "0") == 0) return false;
    cache().max_cached += max_cached_bytes;
    static CachingCpuAllocator allocator;
    // Above the default allocator's priority (0).
    c10::SetCPUAllocator(&allocator, /*priority=*/1);
    return true;
  }();
  return installed;
}

void release_kept_blocks() { trim_to(0); }

BlockCacheRoom::BlockCacheRoom(size_t bytes) : bytes_(bytes) { cache().max_cached += bytes_; }

BlockCacheRoom::~BlockCacheRoom() {
  Cache& c = cache();
  c.max_cached -= bytes_;
  trim_to(c.max_cached.load());
}

BlockCacheStats block_cache_stats() {
  const Cache& c = cache();
  return {c.reused.load(), c.allocated.load(), c.cached_bytes.load()};
}

}  // namespace exogym::runtime::host
