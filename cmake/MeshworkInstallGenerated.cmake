# Part of `cmake --install` (cmake/MeshworkInstall.cmake), files made from the built programs:
#  - share/man/man1/meshwork.1.gz and meshtrain.1.gz: each program's --help text (and `meshwork
#    COMMAND --help` for every command) wrapped as a manual page, so the manual never says
#    something the program does not;
#  - share/doc/meshwork/changelog.gz: one Debian-format entry naming the version and commit
#    (`meshwork --version`), dated by the commit (the same source gives the same file).
# Inputs: MESHWORK_BIN_DIR, MESHWORK_VERSION, MESHWORK_MAN_SCRATCH, MESHWORK_SOURCE_DIR,
# MESHWORK_DOC, MESHWORK_PACKAGE_MAINTAINER.
find_program(GZIP gzip REQUIRED)
# A folder of its own per install: a package build and `ctest -R install_tree` may install at once.
string(RANDOM LENGTH 8 suffix)
set(MESHWORK_MAN_SCRATCH "${MESHWORK_MAN_SCRATCH}-${suffix}")

function(help_text out)
  execute_process(COMMAND ${ARGN} OUTPUT_VARIABLE text ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install: `${ARGN}` failed (${rc}): ${err}")
  endif()
  # roff: a backslash is written \e; a line may not start with . or '
  string(REPLACE "\\" "\\e" text "${text}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

function(write_page name summary description)
  set(page ".TH ${name} 1 \"\" \"${name} ${MESHWORK_VERSION}\" \"User Commands\"\n.SH NAME\n${name} \\- ${summary}\n")
  string(APPEND page ".SH DESCRIPTION\n${description}\n")
  foreach(section IN LISTS ARGN)
    string(APPEND page "${section}")
  endforeach()
  string(APPEND page ".SH SEE ALSO\nREADME.md and docs/ in /usr/share/doc/meshwork/.\n")
  file(MAKE_DIRECTORY "${MESHWORK_MAN_SCRATCH}")
  file(WRITE "${MESHWORK_MAN_SCRATCH}/${name}.1" "${page}")
  # -n: no name or time stamp inside, so the same page gives the same bytes.
  execute_process(COMMAND ${GZIP} -9nf "${MESHWORK_MAN_SCRATCH}/${name}.1" COMMAND_ERROR_IS_FATAL ANY)
  file(INSTALL "${MESHWORK_MAN_SCRATCH}/${name}.1.gz" DESTINATION "${CMAKE_INSTALL_PREFIX}/share/man/man1"
       FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
endfunction()

set(commands plan probe launch calibrate deploy attach stop runs data serve)
help_text(usage "${MESHWORK_BIN_DIR}/meshwork" --help)
set(sections ".SH SYNOPSIS\n.nf\n${usage}.fi\n")
foreach(cmd IN LISTS commands)
  help_text(text "${MESHWORK_BIN_DIR}/meshwork" ${cmd} --help)
  string(APPEND sections ".SS meshwork ${cmd}\n.nf\n${text}.fi\n")
endforeach()
write_page(meshwork "plan, launch and watch N-D parallel training runs"
           "With no arguments, the Qt workbench; with a command, the command line. Every command below is shown as its --help prints it."
           "${sections}")

if(EXISTS "${MESHWORK_BIN_DIR}/meshtrain_cpu")
  help_text(text "${MESHWORK_BIN_DIR}/meshtrain_cpu" --help)
  write_page(meshtrain "the Meshwork trainer (LibTorch; Gloo on CPU)"
             "Trains a Llama-style model on any mesh shape (dp_replicate, dp_shard, cp, tp, pp); as its --help prints it."
             ".SH OPTIONS\n.nf\n${text}.fi\n")
endif()

# The changelog (Debian format: a native package's is changelog.gz).
execute_process(COMMAND "${MESHWORK_BIN_DIR}/meshwork" --version OUTPUT_VARIABLE version_text COMMAND_ERROR_IS_FATAL ANY)
string(REGEX MATCH "commit ([^)]+)" _ "${version_text}")
set(commit "${CMAKE_MATCH_1}")
set(date "")
find_program(GIT git)
if(GIT)
  execute_process(COMMAND ${GIT} -C "${MESHWORK_SOURCE_DIR}" log -1 --format=%aD
                  OUTPUT_VARIABLE date OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
if(date STREQUAL "")
  execute_process(COMMAND date -R OUTPUT_VARIABLE date OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()
file(WRITE "${MESHWORK_MAN_SCRATCH}/changelog"
"meshwork (${MESHWORK_VERSION}) unstable; urgency=medium

  * Built from commit ${commit}.

 -- ${MESHWORK_PACKAGE_MAINTAINER}  ${date}
")
execute_process(COMMAND ${GZIP} -9nf "${MESHWORK_MAN_SCRATCH}/changelog" COMMAND_ERROR_IS_FATAL ANY)
file(INSTALL "${MESHWORK_MAN_SCRATCH}/changelog.gz" DESTINATION "${CMAKE_INSTALL_PREFIX}/${MESHWORK_DOC}"
     FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
file(REMOVE_RECURSE "${MESHWORK_MAN_SCRATCH}")
