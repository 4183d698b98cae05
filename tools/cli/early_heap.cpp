// Compiled into every ExoGym executable (tools and tests): runs
// prepare_heap_for_startup() before any library's static initialisers, which
// only an executable's .preinit_array can do (shared libraries have none).
// Sanitizers set up their own allocator from the same place, so their builds
// leave the heap alone.
#include "exogym/runtime/cluster/malloc_tuning.h"

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
namespace {

void prepare_heap() { exogym::runtime::cluster::prepare_heap_for_startup(); }

__attribute__((section(".preinit_array"), used)) void (*const g_prepare_heap)() = prepare_heap;

}  // namespace
#endif
