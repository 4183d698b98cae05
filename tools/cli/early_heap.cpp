// Compiled into every ExoGym executable (tools and tests): runs
// prepare_heap_for_startup() before any library's static initialisers, which
// only an executable's .preinit_array can do (shared libraries have none).
// Under a sanitizer, whose allocator replaces glibc's, it does nothing.
#include "exogym/runtime/host/malloc_tuning.h"

namespace {

void prepare_heap() { exogym::runtime::host::prepare_heap_for_startup(); }

__attribute__((section(".preinit_array"), used)) void (*const g_prepare_heap)() = prepare_heap;

}  // namespace
