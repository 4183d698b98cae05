#pragma once
// Hot loops of the modules compiled several times: EXOGYM_CLONED functions
// exist for AVX-512, AVX2 and plain x86-64, and the best one the CPU has is
// picked when the library loads (GCC's target_clones), since a build for the
// lowest common CPU would run them 4 floats at a time. EXOGYM_INLINE
// helpers are inlined into each clone and vectorised for its target.
// Internal to the modules library (not installed).
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define EXOGYM_CLONED __attribute__((target_clones("avx512f", "avx2", "default")))
#define EXOGYM_INLINE inline __attribute__((always_inline))
#else
#define EXOGYM_CLONED
#define EXOGYM_INLINE inline
#endif
