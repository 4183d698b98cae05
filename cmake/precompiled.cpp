// The one source of exogym_precompiled (cmake/PrecompiledHeaders.cmake): a
// target exists to build cmake/precompiled.h once, for the others to reuse.
