# exogym_resolve_first(<target> <PRIVATE|INTERFACE> [LIBRARIES <files...>])
#
# Puts the C++ standard library, and LIBRARIES, first in the list of needed
# libraries (DT_NEEDED) of <target> (PRIVATE) or of whatever links it
# (INTERFACE), ahead of LibTorch.
#
# Why: the dynamic linker resolves every symbol to the first library in the
# process's load order that defines it. pip's LibTorch exports copies of
# libstdc++'s std::filesystem (libtorch.so, libtorch_cpu.so) and of Gloo
# (libtorch_cpu.so), built from other sources than the ones we compile
# against; linked in the usual order they come before libstdc++ and Debian's
# libgloo, and every call of ours (std::filesystem::remove_all, Gloo's TCP
# device) lands in LibTorch's copy and crashes. An executable's needed
# libraries are the head of the process's load order, and a plugin opened
# later looks symbols up there first, so ordering the executables decides it
# for every library of the process; plugins and shared libraries get the same
# order too, for a host that is not ours. tests/interposition/ checks it with
# a library that exports poisoned copies where LibTorch sits.
function(exogym_resolve_first target scope)
  cmake_parse_arguments(ARG "" "" "LIBRARIES" ${ARGN})
  # A sanitizer's runtime must come first itself (ASan refuses to start
  # otherwise); sanitizer builds use Debian's LibTorch, which exports neither.
  if(EXOGYM_SANITIZE)
    return()
  endif()
  # The shared library by its file name: a GCC whose -lstdc++ is the static
  # archive (such as /opt/gcc on the GPU machine) would otherwise add nothing
  # here, the archive being read before any object needs it.
  set(first "-l:libstdc++.so.6")
  foreach(library IN LISTS ARG_LIBRARIES)
    list(APPEND first "${library}")
  endforeach()
  list(JOIN first " " first)
  # One SHELL: group, so that CMake neither splits nor de-duplicates it, in
  # front of the objects and every other library on the link line.
  target_link_options(${target} ${scope} "SHELL:-Wl,--push-state,--no-as-needed ${first} -Wl,--pop-state")
endfunction()

# The libraries every ExoGym executable resolves first besides libstdc++: the
# Gloo it was compiled against, when the build has the Gloo backend.
set(EXOGYM_RESOLVE_FIRST_LIBRARIES "")
if(EXOGYM_GLOO_FOUND)
  set(EXOGYM_RESOLVE_FIRST_LIBRARIES "${EXOGYM_GLOO_LIBRARY}")
endif()
