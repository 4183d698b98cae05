#pragma once
// Hot loops of the modules compiled several times: EXOGYM_CLONED functions
// exist for AVX-512, AVX2 and plain x86-64, and the best one the CPU has is
// picked when the library loads (GCC's target_clones), since a build for the
// lowest common CPU would run them 4 floats at a time. EXOGYM_INLINE
// helpers are inlined into each clone and vectorised for its target.
// Every clone computes the same bits: its sources are compiled without
// fused multiply-adds (cmake/CpuClones.cmake), which the AVX-512 clone
// would otherwise use. Internal to the modules library and the plugins
// built with it (not installed): the one top-k (compression/chunk_topk.cpp),
// DeMo's DCT.
// Not under a sanitizer: the loader runs a clone's resolver while it
// relocates the library, before the sanitizer's runtime is set up, and the
// instrumented resolver crashed every ThreadSanitizer build at start-up.
#ifndef EXOGYM_CPU_CLONES_EXACT
#error "a source using EXOGYM_CLONED must be marked with exogym_cpu_clones() (cmake/CpuClones.cmake)"
#endif
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__) && \
    !defined(__SANITIZE_ADDRESS__)
#define EXOGYM_CLONED __attribute__((target_clones("avx512f", "avx2", "default")))
#define EXOGYM_INLINE inline __attribute__((always_inline))
#else
#define EXOGYM_CLONED
#define EXOGYM_INLINE inline
#endif
