#include "exogym/runtime/host/malloc_tuning.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

// AddressSanitizer and ThreadSanitizer replace glibc's malloc with an
// allocator of their own (which may still accept mallopt and ignore it).
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define EXOGYM_GLIBC_MALLOC 1
#endif

#if defined(EXOGYM_GLIBC_MALLOC)
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#endif

namespace exogym::runtime::host {

bool user_chose_malloc_settings() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables && std::strstr(tunables, "glibc.malloc.")) return true;
  for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_ARENA_MAX"}) {
    if (std::getenv(name)) return true;
  }
  return false;
}

bool tune_malloc_for_training(int cores) {
#if defined(EXOGYM_GLIBC_MALLOC)
  static const bool tuned = [cores] {
    if (user_chose_malloc_settings()) return false;
    constexpr int MiB = 1 << 20;
    // Measured (docs/performance.md, "What profiling found"): with glibc's defaults, 16
    // nanoGPT nodes peaked at 2.5 GB and 4 CNN nodes spent 14 % of their CPU
    // time in the kernel, faulting in 60 MB of fresh pages per node-step.
    //
    // Blocks above the mmap threshold are mapped and unmapped on every
    // allocation. glibc raises that threshold as mapped blocks are freed, but
    // fixing any of the thresholds stops that, so all of them are set.
    // 32 MiB is the largest glibc accepts (half a thread's 64 MiB heap).
    bool ok = mallopt(M_MMAP_THRESHOLD, 32 * MiB) == 1;
    // Free memory at the top of a heap beyond this goes back to the kernel.
    // It is above a step's temporaries, so that they stay.
    ok = mallopt(M_TRIM_THRESHOLD, 128 * MiB) == 1 && ok;
    // A thread's arena is a chain of 64 MiB heaps, and glibc unmaps the last
    // one as soon as it empties unless the heap before it has less than the
    // top pad free. A step whose temporaries straddle a heap boundary then
    // maps, faults in and unmaps a heap every time (nanoGPT: three a step).
    // A pad of a whole heap (64 MiB) would keep every heap whatever the
    // layout, but 4,096 MLP nodes ran 10-20 % slower with it
    // (docs/performance.md, "glibc's malloc gave memory back").
    ok = mallopt(M_TOP_PAD, 32 * MiB) == 1 && ok;
    // glibc gives each thread an arena of its own, up to 8 per core, and
    // memory one arena holds is no use to another. Every node has a thread
    // but only one per core computes at a time: an arena per core (and the
    // main thread's) is enough, and K nodes then reuse each other's memory.
    ok = mallopt(M_ARENA_MAX, std::max(1, cores) + 1) == 1 && ok;
    return ok;
  }();
  return tuned;
#else
  (void)cores;
  return false;
#endif
}

bool return_free_heap_memory() {
#if defined(EXOGYM_GLIBC_MALLOC)
  return malloc_trim(0) == 1;
#else
  return false;
#endif
}

bool prepare_heap_for_startup() {
#if defined(EXOGYM_GLIBC_MALLOC)
  // Runs before other libraries' static initialisers: only plain C calls,
  // no C++ objects with constructors of their own.
  if (user_chose_malloc_settings()) return false;
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  constexpr int kTopPad = 64 << 20;
  // Without a trim threshold above the pad, the free() below would hand
  // the new memory straight back (and the advice with it). The threshold is
  // the one tune_malloc_for_training() sets; it later halves the pad.
  if (mallopt(M_TOP_PAD, kTopPad) != 1 || mallopt(M_TRIM_THRESHOLD, 2 * kTopPad) != 1) return false;
  // The heap begins at the break as it is now; the first allocation then
  // extends it by the top pad.
  const auto begin = reinterpret_cast<uintptr_t>(sbrk(0));
  // Volatile: compilers may drop a malloc whose block is only freed.
  void* volatile first = std::malloc(1);
  const auto end = reinterpret_cast<uintptr_t>(sbrk(0));
  std::free(first);
  const uintptr_t aligned = (begin + kHugePage - 1) & ~(kHugePage - 1);
  if (end <= aligned) return false;
  return madvise(reinterpret_cast<void*>(aligned), end - aligned, MADV_HUGEPAGE) == 0;
#else
  return false;
#endif
}

}  // namespace exogym::runtime::host
