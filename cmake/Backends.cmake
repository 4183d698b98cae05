# Finds the collective backends between processes (see runtime/CMakeLists.txt).
# Sets EXOGYM_GLOO_FOUND, and EXOGYM_NCCL_FOUND with EXOGYM_NCCL_INCLUDE_DIR
# and EXOGYM_NCCL_LIBRARY.

# Gloo: Debian's libgloo-dev ships a CMake package (target `gloo`). The
# rendezvous also needs c10d's TCPStore header from LibTorch.
set(EXOGYM_GLOO_FOUND OFF)
if(NOT EXOGYM_WITH_GLOO STREQUAL "OFF")
  find_package(Gloo CONFIG QUIET)
  find_path(EXOGYM_TCPSTORE_HEADER torch/csrc/distributed/c10d/TCPStore.hpp HINTS ${TORCH_INCLUDE_DIRS})
  if(TARGET gloo AND EXOGYM_TCPSTORE_HEADER)
    set(EXOGYM_GLOO_FOUND ON)
  elseif(EXOGYM_WITH_GLOO STREQUAL "ON")
    message(FATAL_ERROR "EXOGYM_WITH_GLOO=ON but Gloo (libgloo-dev) or LibTorch's c10d headers were not found")
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
