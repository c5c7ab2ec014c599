# PSPXDP_GIT_REVISION: `git describe` of the source tree when it is a git
# checkout ("cfb120b", or "v0.1.0-3-gcfb120b" once tagged), else "unknown"
# (a source tarball). Read at configure time; HEAD's reflog changes with every
# commit and checkout, and CMake watches it, so the next build configures
# again and --version stays true.
find_package(Git QUIET)
set(PSPXDP_GIT_REVISION "unknown")
if(GIT_FOUND)
    execute_process(COMMAND ${GIT_EXECUTABLE} describe --tags --always
                    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                    OUTPUT_VARIABLE describe OUTPUT_STRIP_TRAILING_WHITESPACE
                    RESULT_VARIABLE rc ERROR_QUIET)
    execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --path-format=absolute --git-path logs/HEAD
                    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                    OUTPUT_VARIABLE reflog OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(rc EQUAL 0 AND describe)
        set(PSPXDP_GIT_REVISION "${describe}")
    endif()
    if(reflog AND EXISTS "${reflog}")
        set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${reflog}")
    endif()
endif()
