# exogym_compile_in_batches(<targets...>)
#
# Compiles a library's sources eight at a time, as one translation unit each
# (CMake's unity build), so that LibTorch's headers and the templates the
# sources share are parsed and instantiated once per batch instead of once
# per source: the runtime, the SDK and the modules compile in about half the
# time, and CI builds them three times. The sources of one target must
# therefore not define one name twice in one namespace, file-local names
# included (tools/check_unity_names.py checks it for every batched target).
# Sources marked by exogym_cpu_clones() compile by themselves.
#
# Off (-DEXOGYM_UNITY_BUILD=OFF) every source compiles by itself: a faster
# rebuild after a one-file change, for whoever edits the runtime all day.
option(EXOGYM_UNITY_BUILD "Compile the libraries' sources in batches of eight (cmake/UnityBatches.cmake)" ON)
function(exogym_compile_in_batches)
  if(EXOGYM_UNITY_BUILD)
    set_target_properties(${ARGN} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
endfunction()
