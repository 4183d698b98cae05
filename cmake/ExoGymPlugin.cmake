# exogym_add_plugin(<name> KIND <model|strategy|dataset> SOURCES <files...>
#                   [LIBRARIES <targets...>])
#
# Builds exogym_<kind>_<name>.so against the ExoGym SDK, where the loader
# looks for it. Used in this tree and, through find_package(ExoGym), by
# third-party plugins built out of tree. LIBRARIES are linked in as well,
# e.g. ExoGym::modules to compose the built-in strategy modules.
function(exogym_add_plugin name)
  cmake_parse_arguments(ARG "" "KIND" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT ARG_KIND MATCHES "^(model|strategy|dataset)$")
    message(FATAL_ERROR "exogym_add_plugin(${name}): KIND must be model, strategy or dataset")
  endif()
  set(target exogym_${ARG_KIND}_${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES PREFIX "" OUTPUT_NAME ${target} CXX_VISIBILITY_PRESET hidden)
  target_link_libraries(${target} PRIVATE ExoGym::sdk ${ARG_LIBRARIES})
  exogym_resolve_first(${target} PRIVATE)
  # In this tree, LibTorch's headers precompiled once (cmake/PrecompiledHeaders.cmake);
  # a plugin built out of tree against the install compiles as written.
  if(COMMAND exogym_use_precompiled_headers)
    exogym_use_precompiled_headers(${target})
  endif()
  if(DEFINED EXOGYM_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${EXOGYM_PLUGIN_OUTPUT_DIR})
  endif()
  set_property(GLOBAL APPEND PROPERTY EXOGYM_PLUGIN_TARGETS ${target})
  if(DEFINED EXOGYM_PLUGIN_INSTALL_DIR)
    install(TARGETS ${target} LIBRARY DESTINATION ${EXOGYM_PLUGIN_INSTALL_DIR})
  endif()
endfunction()
