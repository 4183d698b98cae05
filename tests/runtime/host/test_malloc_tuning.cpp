// Large temporaries stay in the process between training steps once malloc is
// tuned (runtime/host/malloc_tuning.cpp). Without LibTorch: plain malloc calls
// stand for a step's temporary tensors.
#include <malloc.h>
#include <sys/resource.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "exogym/runtime/host/malloc_tuning.h"
#include "testing.h"

namespace {

long thread_minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_minflt;
}

// How many arenas malloc has, from malloc_info's XML (one <heap> each).
int arena_count() {
  char* text = nullptr;
  size_t size = 0;
  FILE* out = open_memstream(&text, &size);
  malloc_info(0, out);
  std::fclose(out);
  const std::string xml(text, size);
  std::free(text);
  int count = 0;
  for (size_t at = xml.find("<heap nr="); at != std::string::npos; at = xml.find("<heap nr=", at + 1)) ++count;
  return count;
}

// AddressSanitizer and ThreadSanitizer replace glibc's malloc with their
// own, which has nothing to tune.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizerMalloc = true;
#else
constexpr bool kSanitizerMalloc = false;
#endif

// Whether tuning is expected to do nothing here (and says so by returning
// false).
bool nothing_to_tune() { return exogym::runtime::host::user_chose_malloc_settings() || kSanitizerMalloc; }

}  // namespace

using exogym::runtime::host::user_chose_malloc_settings;

TEST_CASE("malloc tuning keeps a thread's step-sized temporaries from being faulted in again every step", "[malloc]") {
  if (nothing_to_tune()) {
    CHECK_FALSE(exogym::runtime::host::tune_malloc_for_training(2));  // the user's settings win
    return;
  }
  REQUIRE(exogym::runtime::host::tune_malloc_for_training(2));
  // Each "step" holds 24 blocks of 3 MiB (72 MiB: more than one of glibc's
  // 64 MiB per-thread heaps) and frees them, newest first, as autograd does.
  constexpr size_t block = 3u << 20, blocks = 24;
  constexpr long pages_per_step = static_cast<long>(block * blocks / 4096);
  std::vector<long> faults;
  // A node's thread: with arenas limited, it may share the main thread's.
  std::thread step_runner([&] {
    for (int step = 0; step < 4; ++step) {
      const long before = thread_minor_faults();
      std::vector<void*> held;
      for (size_t i = 0; i < blocks; ++i) {
        held.push_back(std::malloc(block));
        std::memset(held.back(), step + 1, block);
      }
      while (!held.empty()) {
        std::free(held.back());
        held.pop_back();
      }
      faults.push_back(thread_minor_faults() - before);
    }
  });
  step_runner.join();
  INFO("faults per step: " << faults[0] << ", " << faults[1] << ", " << faults[2] << ", " << faults[3] << " ("
                           << pages_per_step << " pages touched per step)");
  CHECK(faults[0] >= pages_per_step / 2);  // the first step does fault its memory in
  // Untuned, steps 1-3 faulted in 18433, 2305 and 3073 pages here; tuned,
  // 768, 0 and 0.
  // This holds in a fresh process, as ctest runs each case: after other
  // work has shaped the heaps (the [cli] cases), glibc may unmap the
  // step's last heap every step (docs/performance.md, on the top pad).
  CHECK(faults[1] + faults[2] + faults[3] < pages_per_step / 4);
}

TEST_CASE("the heap LibTorch's static initialisers fill is advised onto huge pages first", "[malloc]") {
  // This binary runs prepare_heap_for_startup() from its .preinit_array
  // (tools/cli/early_heap.cpp), before LibTorch's initialisers.
  if (kSanitizerMalloc) {
    CHECK_FALSE(exogym::runtime::host::prepare_heap_for_startup());  // not glibc's malloc: nothing to do
    return;
  }
  std::ifstream smaps("/proc/self/smaps");
  bool in_heap = false, advised = false, found = false;
  for (std::string line; std::getline(smaps, line);) {
    // A mapping's first line ends with its name; "VmFlags:" is its last.
    if (line.size() > 6 && line.compare(line.size() - 6, 6, "[heap]") == 0) {
      in_heap = found = true;
    } else if (line.rfind("VmFlags:", 0) == 0) {
      if (in_heap && line.find(" hg") != std::string::npos) advised = true;  // hg: MADV_HUGEPAGE
      in_heap = false;
    }
  }
  REQUIRE(found);
  // A kernel built without transparent huge pages refuses the advice.
  const bool kernel_has_thp = std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled").good();
  CHECK(advised == (!nothing_to_tune() && kernel_has_thp));
}

TEST_CASE("malloc tuning has the threads of many nodes share one arena per core", "[malloc]") {
  if (nothing_to_tune()) {
    CHECK_FALSE(exogym::runtime::host::tune_malloc_for_training(2));
    return;
  }
  REQUIRE(exogym::runtime::host::tune_malloc_for_training(2));
  // 12 threads allocate at the same time, as 12 nodes' threads do; glibc
  // alone gives each an arena of its own (up to 8 per core: 13 here).
  constexpr int threads = 12;
  std::atomic<int> started{0}, allocated{0};
  std::atomic<bool> counted{false};
  std::vector<std::thread> nodes;
  for (int i = 0; i < threads; ++i) {
    nodes.emplace_back([&] {
      ++started;
      while (started < threads) std::this_thread::yield();
      for (int k = 0; k < 2000; ++k) {
        // Aligned, as LibTorch allocates (Catch's macros are not for threads).
        void* block = nullptr;
        if (posix_memalign(&block, 64, 4096 * (1 + k % 64)) != 0) std::abort();
        std::memset(block, 1, 4096);
        std::free(block);
      }
      ++allocated;
      while (!counted) std::this_thread::yield();
    });
  }
  while (allocated < threads) std::this_thread::yield();
  const int arenas = arena_count();
  counted = true;
  for (auto& node : nodes) node.join();
  CHECK(arenas <= 3);  // one per core and the main thread's
}

TEST_CASE("only malloc settings of the user's own stop the malloc tuning", "[malloc]") {
  // Restores the variables this case sets, so that other cases see the real ones.
  struct Saved {
    std::string name;
    bool had;
    std::string value;
  };
  std::vector<Saved> saved;
  for (const char* name : {"GLIBC_TUNABLES", "MALLOC_ARENA_MAX"}) {
    const char* value = std::getenv(name);
    saved.push_back({name, value != nullptr, value ? value : ""});
    unsetenv(name);
  }
  CHECK_FALSE(user_chose_malloc_settings());
  setenv("GLIBC_TUNABLES", "glibc.pthread.rseq=0", 1);  // not malloc's
  CHECK_FALSE(user_chose_malloc_settings());
  setenv("GLIBC_TUNABLES", "glibc.pthread.rseq=0:glibc.malloc.arena_max=2", 1);
  CHECK(user_chose_malloc_settings());
  unsetenv("GLIBC_TUNABLES");
  setenv("MALLOC_ARENA_MAX", "2", 1);
  CHECK(user_chose_malloc_settings());
  for (const auto& s : saved) {
    if (s.had) {
      setenv(s.name.c_str(), s.value.c_str(), 1);
    } else {
      unsetenv(s.name.c_str());
    }
  }
}
