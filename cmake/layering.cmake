# The engine depends on nothing above it: no engine target (library, tool or test helper under engine/)
# may link, directly or through another target, a fetchd, serverd or gRPC library. Checked when the build
# is configured, so a change that breaks the layering fails at once and names the path that does.

# Every target defined in `dir` and the folders below it.
function(_targets_below dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _targets_below(${sub} sub_targets)
    list(APPEND targets ${sub_targets})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# Fails with the chain of links when `target` reaches a library named in `forbidden_regex`.
function(_check_links target chain forbidden_regex)
  foreach(property LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
    get_target_property(links ${target} ${property})
    if(NOT links)
      continue()
    endif()
    foreach(link IN LISTS links)
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" link "${link}")
      if(link MATCHES "${forbidden_regex}")
        message(FATAL_ERROR "layering: ${chain} -> ${link}: the engine must not depend on fetchd, serverd or "
                            "gRPC. Move what it needs into base/ (or into the engine).")
      endif()
      if(TARGET ${link} AND NOT "${chain}" MATCHES "(^| -> )${link}( |$)")
        _check_links(${link} "${chain} -> ${link}" "${forbidden_regex}")
      endif()
    endforeach()
  endforeach()
endfunction()

function(check_engine_layering)
  _targets_below(${PROJECT_SOURCE_DIR}/engine engine_targets)
  foreach(target IN LISTS engine_targets)
    _check_links(${target} ${target} "^(fetchd_|serverd_|fetch_proto|gRPC::|protobuf::|.*grpc)")
  endforeach()
  list(LENGTH engine_targets count)
  message(STATUS "Layering: ${count} engine targets link no fetchd, serverd or gRPC library")
endfunction()
