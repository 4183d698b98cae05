# exogym_compile_in_batches(<targets...> [PRECOMPILED])
#
# Compiles a library's sources eight at a time, as one translation unit each
# (CMake's unity build), so that LibTorch's headers and the templates the
# sources share are parsed and instantiated once per batch instead of once
# per source: the runtime, the SDK and the modules compile in about half the
# time, and CI builds them three times. The sources of one target must
# therefore not define one name twice in one namespace, file-local names
# included (tools/check_unity_names.py checks it for every batched target).
# Sources marked by exogym_cpu_clones() compile by themselves. PRECOMPILED:
# the batches also reuse the build's precompiled LibTorch headers
# (cmake/PrecompiledHeaders.cmake), which pay for a batch, not for a small
# source by itself.
#
# Off (-DEXOGYM_UNITY_BUILD=OFF) every source compiles by itself: a faster
# rebuild after a one-file change, for whoever edits the runtime all day.
option(EXOGYM_UNITY_BUILD "Compile the libraries' sources in batches of eight (cmake/UnityBatches.cmake)" ON)
function(exogym_compile_in_batches)
  cmake_parse_arguments(ARG "PRECOMPILED" "" "" ${ARGN})
  if(EXOGYM_UNITY_BUILD)
    set_target_properties(${ARG_UNPARSED_ARGUMENTS} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
    if(ARG_PRECOMPILED)
      exogym_use_precompiled_headers(${ARG_UNPARSED_ARGUMENTS})
    endif()
  endif()
endfunction()
