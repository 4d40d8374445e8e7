# The Debian package (CPack DEB): `scripts/package` builds build/meshwork_<version>_amd64.deb
# from the install rules (cmake/MeshworkInstall.cmake), prefix /usr.
#
# Depends: what dpkg-shlibdeps finds for every binary and library in the package (Qt 6, libssh,
# SQLite, OpenSSL, yaml-cpp, the C/C++ runtime), all in Debian 12's archive; LibTorch's runtime is
# not a dependency: it is inside the package, private to meshtrain (lib/meshwork/torch/, searched
# through the private directory below). Added by hand: what is loaded by name at run time and no
# ELF file names: the Qt platform plugins (xcb, offscreen) of the workbench.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME meshwork)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/package)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "plan, launch and watch N-D parallel training runs")
# CPack takes the synopsis from the summary; the description is the extended text (lines of at
# most 80 characters).
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "Meshwork answers which device-mesh shape (dp_replicate x dp_shard x cp
x tp, and pipeline stages) works best on a cluster and then runs it: a
Qt 6 workbench that probes nodes over SSH and checks every shape against
a memory estimate, the meshtrain trainer (LibTorch, Gloo on CPU), launch
over SSH or Slurm, live metrics into a SQLite run store, and the store
in a browser (meshwork serve).
.
The package carries LibTorch's CPU runtime privately in /usr/lib/meshwork
and the CPU runtime bundle that meshwork deploys to nodes without LibTorch.")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${MESHWORK_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS usr/lib/meshwork/torch)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "qt6-qpa-plugins")
# zstd: deploying a bundle to a node without zstd sends this machine's; openssh-client: ssh-keygen
# for the keys the remote layer uses (docs/remote.md); python3: the tokenizer worker of `meshwork
# data prepare` (which also needs the tokenizers module, from pip).
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "zstd, openssh-client")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3")
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)
set(CPACK_THREADS 0)
set(CPACK_STRIP_FILES ON)
include(CPack)
