# pip's LibTorch carries fmt's headers (fmt 12 in 2.11) in its include folder,
# which the compiler searches before the system's. spdlog from the
# distribution was built against the system's fmt (9 on Debian 12) and does
# not compile against another. When LibTorch carries fmt, a folder holding
# only a link to the fmt that spdlog uses goes first on the SDK's include path
# (-I, searched before LibTorch's -isystem folders), and so on every target's.
# LibTorch's own headers that ExoGym includes do not include fmt.
# Sets EXOGYM_FMT_FIRST_DIR (empty when nothing needs it).
set(EXOGYM_FMT_FIRST_DIR "")
set(_exogym_torch_fmt "")
foreach(dir IN LISTS TORCH_INCLUDE_DIRS)
  if(EXISTS "${dir}/fmt/core.h")
    set(_exogym_torch_fmt "${dir}")
  endif()
endforeach()
if(_exogym_torch_fmt)
  set(_exogym_fmt_dir "")
  if(TARGET fmt::fmt)
    get_target_property(_exogym_fmt_dir fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
  endif()
  if(NOT _exogym_fmt_dir OR NOT EXISTS "${_exogym_fmt_dir}/fmt/core.h")
    message(FATAL_ERROR "LibTorch carries fmt (${_exogym_torch_fmt}/fmt), but the fmt that spdlog was built "
      "against was not found (fmt::fmt from libfmt-dev)")
  endif()
  set(EXOGYM_FMT_FIRST_DIR ${CMAKE_BINARY_DIR}/fmt-first)
  file(MAKE_DIRECTORY ${EXOGYM_FMT_FIRST_DIR})
  file(CREATE_LINK "${_exogym_fmt_dir}/fmt" ${EXOGYM_FMT_FIRST_DIR}/fmt SYMBOLIC)
  message(STATUS "ExoGym: LibTorch carries fmt; spdlog's fmt (${_exogym_fmt_dir}/fmt) comes first")
endif()
