#pragma once
// Keeps the memory of a training step's large temporary tensors inside the
// process from one step to the next (glibc's malloc otherwise hands some of
// it back to the kernel after every step, and every step faults it in
// again), and keeps K nodes' threads from spreading it over many arenas.

namespace exogym::runtime::host {

// Sets glibc's malloc parameters for training on `cores` cores, once per
// process (the simulator calls it before it builds the replicas; later calls
// change nothing). Does nothing, and returns false, where malloc is not
// glibc's or where the user chose malloc settings through GLIBC_TUNABLES or
// MALLOC_*_ variables: theirs win.
bool tune_malloc_for_training(int cores);

// Makes the start of the main heap eligible for transparent huge pages, and
// lets it grow 64 MiB at a time, before LibTorch's static initialisers fill
// it: they fault in some 11,000 fresh 4 KiB pages, which took 0.18 s of a
// LibTorch program's 0.7 s start on the development machine (a virtual
// machine, where faults are dear). Meant to run first in the process, from
// an executable's .preinit_array (cli/early_heap.cpp); does nothing where
// malloc is not glibc's or the user chose malloc settings. Returns whether it
// advised the heap.
bool prepare_heap_for_startup();

// Hands the free pages inside malloc's heaps back to the kernel
// (malloc_trim): the replicas' own tensors, freed once their parameters
// moved into stacks, stayed resident (3.4 GB at 4,096 MLP nodes) with no
// allocation of their size left to reuse them. Returns whether any went back;
// false where malloc is not glibc's.
bool return_free_heap_memory();

// Whether GLIBC_TUNABLES names a glibc.malloc.* tunable or one of
// MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_ and
// MALLOC_TOP_PAD_ is set (tune_malloc_for_training() then leaves malloc be).
bool user_chose_malloc_settings();

}  // namespace exogym::runtime::host
