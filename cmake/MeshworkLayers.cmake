# meshwork_layer(<target> <folder> MAY_INCLUDE <prefix>... [MAY_NOT_INCLUDE <prefix>...])
# Checks, before <target> compiles and whenever one of its files changes, that every source and
# header in <folder> (not its subfolders that are layers of their own) includes only headers under
# the MAY_INCLUDE prefixes (cmake/CheckLayers.cmake). The layer order is docs/design.md's.
function(meshwork_layer target folder)
  cmake_parse_arguments(L "" "" "MAY_INCLUDE;MAY_NOT_INCLUDE" ${ARGN})
  file(GLOB files CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${folder}/*.cpp ${CMAKE_SOURCE_DIR}/${folder}/*.h)
  file(GLOB nested CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${folder}/*/*.cpp ${CMAKE_SOURCE_DIR}/${folder}/*/*.h)
  foreach(sub IN LISTS nested)
    # A subfolder that is not a layer of its own (remote/..., trainer/hf, trainer/ops) belongs here.
    file(RELATIVE_PATH rel ${CMAKE_SOURCE_DIR} ${sub})
    get_filename_component(subdir ${rel} DIRECTORY)
    if(NOT subdir IN_LIST MESHWORK_LAYER_FOLDERS)
      list(APPEND files ${sub})
    endif()
  endforeach()
  string(REPLACE ";" "|" may "${L_MAY_INCLUDE}")
  string(REPLACE ";" "|" may_not "${L_MAY_NOT_INCLUDE}")
  string(REPLACE ";" "|" file_arg "${files}")
  string(REPLACE "/" "_" name "${folder}")
  set(stamp ${CMAKE_BINARY_DIR}/layers/${name}.checked)
  add_custom_command(OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND} -DROOT=${CMAKE_SOURCE_DIR} -DLAYER=${folder} "-DMAY_INCLUDE=${may}"
            "-DMAY_NOT_INCLUDE=${may_not}" "-DFILES=${file_arg}" -DSTAMP=${stamp}
            -P ${CMAKE_SOURCE_DIR}/cmake/CheckLayers.cmake
    DEPENDS ${files} ${CMAKE_SOURCE_DIR}/cmake/CheckLayers.cmake
    COMMENT "Checking that ${folder}/ includes only ${may}"
    VERBATIM)
  add_custom_target(${target}_layer_check DEPENDS ${stamp})
  add_dependencies(${target} ${target}_layer_check)
endfunction()
# The folders that are layers of their own (their files are not checked with their parent's).
set(MESHWORK_LAYER_FOLDERS core/store core/data core/interop)
