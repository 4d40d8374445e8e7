# `cmake --install build` (and the Debian package, cmake/MeshworkPackage.cmake): the FHS layout
#
#   bin/meshwork                         the workbench and CLI
#   bin/meshtrain                        the trainer (the cpu runtime bundle's, run path
#                                        $ORIGIN/../lib/meshwork/torch)
#   lib/meshwork/torch/*.so*             LibTorch's CPU runtime from the torch wheel, private to
#                                        meshtrain (no other program links it)
#   share/meshwork/models, data, python  presets, the sample corpus, the tokenizer worker
#                                        (core/resource_dir.h finds them from bin/)
#   share/meshwork/bundles/              the cpu runtime bundle for bare nodes (`--bundle cpu`)
#   share/applications/meshwork.desktop, share/icons/hicolor/scalable/apps/meshwork.svg
#   share/doc/meshwork/                  README.md, docs/, copyright, changelog
#   share/man/man1/meshwork.1.gz, meshtrain.1.gz  generated from --help
#
# The web pages are compiled into meshwork (Qt resources, web/CMakeLists.txt). meshtrain and its
# libraries are taken from the cpu bundle (scripts/bundle: ldd's list less the base system), so
# the installed trainer and the one deployed to bare nodes are the same bytes; the bundle target
# must be built first (scripts/package does).
include(GNUInstallDirs)

set(MESHWORK_SHARE ${CMAKE_INSTALL_DATADIR}/meshwork)
set(MESHWORK_DOC ${CMAKE_INSTALL_DATADIR}/doc/meshwork)

install(TARGETS meshwork RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/resources/models ${CMAKE_SOURCE_DIR}/resources/python
        DESTINATION ${MESHWORK_SHARE} FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
        PATTERN "__pycache__" EXCLUDE PATTERN "*.pyc" EXCLUDE)
install(FILES ${CMAKE_SOURCE_DIR}/resources/data/kjv.bin ${CMAKE_SOURCE_DIR}/resources/data/SOURCE.md
        DESTINATION ${MESHWORK_SHARE}/data)
install(FILES ${CMAKE_SOURCE_DIR}/resources/desktop/meshwork.desktop
        DESTINATION ${CMAKE_INSTALL_DATADIR}/applications)
install(FILES ${CMAKE_SOURCE_DIR}/resources/desktop/meshwork.svg
        DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/scalable/apps)
install(FILES ${CMAKE_SOURCE_DIR}/README.md DESTINATION ${MESHWORK_DOC})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/ DESTINATION ${MESHWORK_DOC}/docs
        FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
install(FILES ${CMAKE_SOURCE_DIR}/resources/desktop/copyright DESTINATION ${MESHWORK_DOC})
install(FILES ${CMAKE_SOURCE_DIR}/resources/web/vendor/dygraphs/LICENSE
        DESTINATION ${MESHWORK_DOC}/dygraphs)

if(TARGET meshtrain_cpu)
  install(CODE "set(MESHWORK_BUNDLE_DIR \"${CMAKE_BINARY_DIR}/bundles\")
                set(MESHWORK_SCRATCH \"${CMAKE_BINARY_DIR}/install-runtime\")
                set(MESHWORK_TORCH_LIB_DIR \"${MESHWORK_TORCH_LIB_DIR}\")
                set(MESHWORK_DOC \"${MESHWORK_DOC}\")")
  install(SCRIPT ${CMAKE_SOURCE_DIR}/cmake/MeshworkInstallRuntime.cmake)
endif()

# Manual pages from each program's --help, the changelog from `meshwork --version`.
install(CODE "set(MESHWORK_BIN_DIR \"${CMAKE_BINARY_DIR}/bin\")
              set(MESHWORK_VERSION \"${PROJECT_VERSION}\")
              set(MESHWORK_MAN_SCRATCH \"${CMAKE_BINARY_DIR}/install-generated\")
              set(MESHWORK_SOURCE_DIR \"${CMAKE_SOURCE_DIR}\")
              set(MESHWORK_DOC \"${MESHWORK_DOC}\")
              set(MESHWORK_PACKAGE_MAINTAINER \"${MESHWORK_PACKAGE_MAINTAINER}\")")
install(SCRIPT ${CMAKE_SOURCE_DIR}/cmake/MeshworkInstallGenerated.cmake)
