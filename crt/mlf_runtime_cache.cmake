# mlf_runtime_cache.cmake — a generated project's runtime library, built once per key.
#
# The runtime library (mlf_runtime: executor, RPC server, device loop) of one board, compiler
# and set of options is the same in every project, and compiling it is most of a small
# project's build: AutoTVM builds one project per trial. The build step (the trusted parent
# of the confined build, project_api.build.runtime_cache) keys it over what it is built from:
# every file under runtime/ (mlf_runtime_build.cmake holds its options, definitions and
# flags) and board/, the build step's -D settings, the compiler variables of the environment
# and the compilers themselves. It passes -DMLF_RUNTIME_CACHE=<dir> and
# -DMLF_RUNTIME_CACHE_KEY=<key> to the first configure (a plain `cmake` passes neither and
# compiles as ever). A hit links <dir>/<key>/libmlf_runtime.a; a miss compiles the library
# and stages it as mlf-runtime-cache/<key>/libmlf_runtime.a in the build directory, from
# where the build step — outside the build's sandbox, which may only read the cache — stores
# it under the key it computed itself (copied under a private name, then renamed: concurrent
# builds never see half a file). Nothing the build prints names a place to the build step.
#
# A key describes the configuration it was given for. This file records a digest of that
# configuration (compiler, flags, definitions, options, the files under runtime/) at the
# first configure; a later configure that finds another (a runtime file edited, a -D given
# by hand) neither links nor stages: a stale key only ever misses.
#
#   mlf_runtime_library(SOURCES <files> INCLUDES <dirs> PRIVATE_INCLUDES <dirs>
#                       DEFINITIONS <defs> OPTIONS <options>)
include_guard(GLOBAL)

set(MLF_RUNTIME_CACHE_LIBRARY "libmlf_runtime.a")

function(_mlf_runtime_configuration out runtime_dir)
  string(TOUPPER "${CMAKE_BUILD_TYPE}" config)
  file(TIMESTAMP "${CMAKE_C_COMPILER}" compiler_time UTC)
  set(text "mlf-runtime-configuration 1\n${CMAKE_C_COMPILER}\n${compiler_time}\n")
  string(APPEND text "${CMAKE_C_COMPILER_ID} ${CMAKE_C_COMPILER_VERSION}\n")
  string(APPEND text "${CMAKE_C_COMPILER_TARGET}\n${CMAKE_SYSROOT}\n${CMAKE_BUILD_TYPE}\n")
  string(APPEND text "${CMAKE_C_FLAGS}\n${CMAKE_C_FLAGS_${config}}\n${CMAKE_AR}\n")
  string(APPEND text "${CMAKE_C_STANDARD} ${CMAKE_C_EXTENSIONS}\n${ARGN}\n")
  file(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE "${runtime_dir}" "${runtime_dir}/*")
  list(SORT files)
  foreach(file IN LISTS files)
    file(SHA256 "${runtime_dir}/${file}" digest)
    string(APPEND text "${file} ${digest}\n")
  endforeach()
  string(SHA256 digest "${text}")
  set(${out} "${digest}" PARENT_SCOPE)
  set(_mlf_runtime_files "${files}" PARENT_SCOPE)
endfunction()

function(mlf_runtime_library)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" ""
                        "SOURCES;INCLUDES;PRIVATE_INCLUDES;DEFINITIONS;OPTIONS")
  set(runtime_dir "${CMAKE_CURRENT_SOURCE_DIR}/runtime")
  set(library "")
  if(MLF_RUNTIME_CACHE AND MLF_RUNTIME_CACHE_KEY MATCHES "^[0-9a-f]+$")
    _mlf_runtime_configuration(digest "${runtime_dir}" "${arg_DEFINITIONS}" "${arg_OPTIONS}"
                               "${arg_SOURCES}" "${MLF_WERROR}")
    set(given "${MLF_RUNTIME_CACHE_KEY} ${digest}")
    if(NOT DEFINED MLF_RUNTIME_CACHE_KEYED)
      set(MLF_RUNTIME_CACHE_KEYED "${given}" CACHE INTERNAL
          "the runtime cache's key and the configuration it was given for")
    endif()
    set(key "${MLF_RUNTIME_CACHE_KEY}")
    if(MLF_RUNTIME_CACHE_KEYED STREQUAL given)
      set(library "${MLF_RUNTIME_CACHE}/${key}/${MLF_RUNTIME_CACHE_LIBRARY}")
    else()
      message(STATUS "mlf-runtime-cache: off (configured otherwise since the key was given)")
    endif()
    # An edited runtime file configures again, which finds the configuration changed.
    list(TRANSFORM _mlf_runtime_files PREPEND "${runtime_dir}/")
    set_property(DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}" APPEND PROPERTY
                 CMAKE_CONFIGURE_DEPENDS ${_mlf_runtime_files})
  endif()
  if(library AND EXISTS "${library}")
    message(STATUS "mlf-runtime-cache: hit ${key}")
    add_library(mlf_runtime STATIC IMPORTED GLOBAL)
    set_target_properties(mlf_runtime PROPERTIES
      IMPORTED_LOCATION "${library}"
      INTERFACE_INCLUDE_DIRECTORIES "${arg_INCLUDES}")
    return()
  endif()
  add_library(mlf_runtime STATIC ${arg_SOURCES})
  target_include_directories(mlf_runtime PUBLIC ${arg_INCLUDES} PRIVATE ${arg_PRIVATE_INCLUDES})
  target_compile_definitions(mlf_runtime PRIVATE ${arg_DEFINITIONS})
  target_compile_options(mlf_runtime PRIVATE ${arg_OPTIONS})
  if(library)
    set(staged "${CMAKE_BINARY_DIR}/mlf-runtime-cache/${key}")
    message(STATUS "mlf-runtime-cache: miss ${key}")
    add_custom_command(TARGET mlf_runtime POST_BUILD
      COMMAND "${CMAKE_COMMAND}" -E make_directory "${staged}"
      COMMAND "${CMAKE_COMMAND}" -E copy "$<TARGET_FILE:mlf_runtime>"
              "${staged}/${MLF_RUNTIME_CACHE_LIBRARY}"
      VERBATIM)
  endif()
endfunction()
