# exogym_use_precompiled_headers(<targets...>)
#
# Compiles the targets' sources with cmake/precompiled.h precompiled once for
# the whole build (REUSE_FROM one target), instead of parsing LibTorch's
# headers in every source. A precompiled header is used only where the
# compiler finds it valid for the source's flags; CMake adds -Winvalid-pch,
# so with EXOGYM_WARNINGS_AS_ERRORS (tools/dev) a source it cannot serve is a
# build error rather than a silent slow path. The header's flags therefore
# match the libraries' and plugins' (position-independent, LibTorch's,
# OpenMP's and nlohmann/json's definitions); executables (-fPIE) compile
# without it. So must every source with compile options of its own
# (SKIP_PRECOMPILE_HEADERS, as exogym_cpu_clones() sets): with the header,
# GCC 12 compiled sdk/internal/fused_adamw.cpp as if its -ffp-contract=off
# were not there (its self-check against LibTorch's AdamW failed), without
# a word.
#
# Loading the header costs a source about 4 s, which pays for a batch of the
# unity build (cmake/UnityBatches.cmake) or a plugin that includes
# <ATen/ATen.h> (about 9 s saved), not for a small source by itself: it
# goes with the batches. Off (-DEXOGYM_PRECOMPILED_HEADERS=OFF) each source
# sees only what it includes, as an out-of-tree plugin, which never sees
# this header, does (the test that builds a plugin against the install
# compiles the SDK's and modules' headers it includes that way).
option(EXOGYM_PRECOMPILED_HEADERS "Parse LibTorch's headers once per build (cmake/precompiled.h)" ON)
if(EXOGYM_PRECOMPILED_HEADERS)
  add_library(exogym_precompiled OBJECT ${CMAKE_CURRENT_LIST_DIR}/precompiled.cpp)
  set_target_properties(exogym_precompiled PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_link_libraries(exogym_precompiled PRIVATE torch OpenMP::OpenMP_CXX nlohmann_json::nlohmann_json
    spdlog::spdlog Boost::headers)
  target_compile_definitions(exogym_precompiled PRIVATE BOOST_DLL_USE_STD_FS)
  if(EXOGYM_FMT_FIRST_DIR)  # cmake/FmtFirst.cmake, as on the SDK's include path
    target_include_directories(exogym_precompiled BEFORE PRIVATE ${EXOGYM_FMT_FIRST_DIR})
  endif()
  target_precompile_headers(exogym_precompiled PRIVATE ${CMAKE_CURRENT_LIST_DIR}/precompiled.h)
endif()

function(exogym_use_precompiled_headers)
  if(EXOGYM_PRECOMPILED_HEADERS)
    foreach(target IN LISTS ARGN)
      target_precompile_headers(${target} REUSE_FROM exogym_precompiled)
    endforeach()
  endif()
endfunction()
