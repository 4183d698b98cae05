# exogym_cpu_clones(<sources...>)
#
# Marks sources that use EXOGYM_CLONED (plugins/modules/internal/cpu_dispatch.h,
# functions compiled once per CPU kind): they are compiled without fused
# multiply-adds, so that every clone computes the same bits. GCC fuses
# a * b + c wherever the target has FMA and, in C++, does so by default;
# the AVX-512 clone has FMA, the AVX2 and plain ones do not, and DeMo's
# results depended on the CPU. The header refuses to compile in a source
# not marked (EXOGYM_CPU_CLONES_EXACT). Call it in the folder whose
# CMakeLists.txt adds the sources to their target.
function(exogym_cpu_clones)
  set_source_files_properties(${ARGN} PROPERTIES
    COMPILE_OPTIONS -ffp-contract=off
    COMPILE_DEFINITIONS EXOGYM_CPU_CLONES_EXACT=1
    # A precompiled header or a unity source is built with its target's
    # flags, not these.
    SKIP_PRECOMPILE_HEADERS ON
    SKIP_UNITY_BUILD_INCLUSION ON)
endfunction()
