# Part of `cmake --install` (cmake/MeshworkInstall.cmake): meshtrain and LibTorch's CPU runtime,
# taken from the cpu runtime bundle (build/bundles/meshtrain-cpu.tar.zst, scripts/bundle):
#   bundle bin/meshtrain -> bin/meshtrain, run path moved to $ORIGIN/../lib/meshwork/torch
#   bundle lib/*         -> lib/meshwork/torch/ (not lib/meshwork/ itself: a library folder
#                           right under lib/ makes CPack add ldconfig calls, which a private
#                           folder does not need)
# With stripping (`cmake --install --strip`, the package: CPACK_STRIP_FILES) meshtrain and the
# libraries lose their symbol tables (--strip-unneeded: the dynamic symbols stay); without it
# they are the bundle's bytes.
#   the bundle itself    -> share/meshwork/bundles/ (what `meshwork launch --bundle cpu` deploys)
# Inputs (set by the install code before this script): MESHWORK_BUNDLE_DIR, MESHWORK_SCRATCH,
# MESHWORK_TORCH_LIB_DIR, MESHWORK_DOC.
set(dest "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")
set(link "${MESHWORK_BUNDLE_DIR}/meshtrain-cpu.tar.zst")
if(NOT EXISTS "${link}")
  message(FATAL_ERROR "install: ${link} is missing: build the bundle first (cmake --build build --target bundle-cpu; scripts/package does)")
endif()
file(REAL_PATH "${link}" archive)
file(REAL_PATH "${MESHWORK_BUNDLE_DIR}/meshtrain-cpu.json" manifest)

# A folder of its own per install: a package build and `ctest -R install_tree` may install at once.
string(RANDOM LENGTH 8 suffix)
set(MESHWORK_SCRATCH "${MESHWORK_SCRATCH}-${suffix}")
file(REMOVE_RECURSE "${MESHWORK_SCRATCH}")
file(ARCHIVE_EXTRACT INPUT "${archive}" DESTINATION "${MESHWORK_SCRATCH}" PATTERNS bin/meshtrain lib/*)
file(GLOB libs "${MESHWORK_SCRATCH}/lib/*")
# The bundle's tar has mtime 0 (deterministic); installed files get the time of the install.
file(TOUCH_NOCREATE ${libs} "${MESHWORK_SCRATCH}/bin/meshtrain")
if(CMAKE_INSTALL_DO_STRIP)
  find_program(STRIP strip REQUIRED)
  execute_process(COMMAND ${STRIP} --strip-unneeded ${libs} "${MESHWORK_SCRATCH}/bin/meshtrain" COMMAND_ERROR_IS_FATAL ANY)
endif()
file(INSTALL ${libs} DESTINATION "${CMAKE_INSTALL_PREFIX}/lib/meshwork/torch"
     FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
file(INSTALL "${MESHWORK_SCRATCH}/bin/meshtrain" DESTINATION "${CMAKE_INSTALL_PREFIX}/bin"
     FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
file(REMOVE_RECURSE "${MESHWORK_SCRATCH}")
find_program(PATCHELF patchelf REQUIRED)
# DT_RPATH (as in the bundle): it serves the libraries' own dependencies too, and comes before
# LD_LIBRARY_PATH, so another LibTorch on the machine is never picked up instead.
execute_process(COMMAND ${PATCHELF} --force-rpath --set-rpath "$ORIGIN/../lib/meshwork/torch" "${dest}/bin/meshtrain"
                COMMAND_ERROR_IS_FATAL ANY)

get_filename_component(archive_name "${archive}" NAME)
get_filename_component(manifest_name "${manifest}" NAME)
file(INSTALL "${archive}" "${manifest}" DESTINATION "${CMAKE_INSTALL_PREFIX}/share/meshwork/bundles"
     FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
file(CREATE_LINK "${archive_name}" "${dest}/share/meshwork/bundles/meshtrain-cpu.tar.zst" SYMBOLIC)
file(CREATE_LINK "${manifest_name}" "${dest}/share/meshwork/bundles/meshtrain-cpu.json" SYMBOLIC)

# LibTorch's licence (BSD-3-Clause) and its third-party notices, from the wheel.
file(GLOB torch_license "${MESHWORK_TORCH_LIB_DIR}/../../torch-*.dist-info/licenses/LICENSE")
if(torch_license)
  file(INSTALL ${torch_license} DESTINATION "${CMAKE_INSTALL_PREFIX}/${MESHWORK_DOC}/torch"
       FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
endif()
