# Finds the collective backends between processes (see runtime/CMakeLists.txt).
# Sets EXOGYM_GLOO_FOUND, and EXOGYM_NCCL_FOUND with EXOGYM_NCCL_INCLUDE_DIR
# and EXOGYM_NCCL_LIBRARY.

# Gloo: its header and library are found by name (CMAKE_PREFIX_PATH and the
# usual folders), not through Debian's Gloo CMake package, which names its
# library by an absolute path and so breaks in an unpacked or moved root.
# ExoGym::gloo is that library; cmake/LinkOrder.cmake puts it ahead of
# LibTorch, which may carry a Gloo of its own (pip's does).
set(EXOGYM_GLOO_FOUND OFF)
if(NOT EXOGYM_WITH_GLOO STREQUAL "OFF")
  find_path(EXOGYM_GLOO_INCLUDE_DIR gloo/config.h)
  find_library(EXOGYM_GLOO_LIBRARY NAMES gloo)
  if(EXOGYM_GLOO_INCLUDE_DIR AND EXOGYM_GLOO_LIBRARY)
    set(EXOGYM_GLOO_FOUND ON)
    add_library(ExoGym::gloo UNKNOWN IMPORTED)
    set_target_properties(ExoGym::gloo PROPERTIES IMPORTED_LOCATION "${EXOGYM_GLOO_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${EXOGYM_GLOO_INCLUDE_DIR}")
  elseif(EXOGYM_WITH_GLOO STREQUAL "ON")
    message(FATAL_ERROR "EXOGYM_WITH_GLOO=ON but Gloo (gloo/config.h and libgloo, Debian's libgloo-dev) was not found")
  endif()
endif()
message(STATUS "ExoGym: Gloo backend between processes: ${EXOGYM_GLOO_FOUND}")

# NCCL: only with a CUDA build of LibTorch (torch_cuda) and NCCL's header and
# library (NCCL_ROOT, or the CUDA toolkit's folders). NCCL is not in Debian.
set(EXOGYM_NCCL_FOUND OFF)
if(NOT EXOGYM_WITH_NCCL STREQUAL "OFF")
  set(_exogym_torch_has_cuda OFF)
  if(TARGET torch_cuda OR TORCH_CUDA_LIBRARIES OR CUDA_FOUND)
    set(_exogym_torch_has_cuda ON)
  endif()
  if(_exogym_torch_has_cuda)
    find_package(CUDAToolkit QUIET)
    find_path(EXOGYM_NCCL_INCLUDE_DIR nccl.h
      HINTS $ENV{NCCL_ROOT}/include $ENV{NCCL_HOME}/include ${CUDAToolkit_INCLUDE_DIRS})
    find_library(EXOGYM_NCCL_LIBRARY NAMES nccl
      HINTS $ENV{NCCL_ROOT}/lib $ENV{NCCL_HOME}/lib ${CUDAToolkit_LIBRARY_DIR})
    if(EXOGYM_NCCL_INCLUDE_DIR AND EXOGYM_NCCL_LIBRARY)
      set(EXOGYM_NCCL_FOUND ON)
    endif()
  endif()
  if(NOT EXOGYM_NCCL_FOUND AND EXOGYM_WITH_NCCL STREQUAL "ON")
    message(FATAL_ERROR "EXOGYM_WITH_NCCL=ON needs a CUDA build of LibTorch and NCCL (nccl.h, libnccl; set NCCL_ROOT)")
  endif()
endif()
message(STATUS "ExoGym: NCCL backend between processes: ${EXOGYM_NCCL_FOUND}")
