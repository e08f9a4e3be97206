# mlf_runtime_cache.cmake — a generated project's runtime library, built once per key.
#
# The runtime library (mlf_runtime: executor, RPC server, device loop) of one board, compiler
# and set of options is the same in every project, and compiling it is most of a small
# project's build: AutoTVM builds one project per trial. With -DMLF_RUNTIME_CACHE=<dir> (the
# build step passes its cache; a plain `cmake` passes nothing and compiles as ever) the
# library is looked up under a key over everything it is built from: every file under
# runtime/, the compiler (path, identity, version, timestamp), the language and CPU flags, the
# definitions and options of the library. A hit links the cached library; a miss compiles it
# and stages it in the build directory (mlf-runtime-cache/<key>/), from where the build step
# — outside the build's sandbox, which may only read the cache — stores it (copied under a
# private name, then renamed: concurrent builds never see half a file). Editing a file under
# runtime/ configures again, which changes the key.
#
#   mlf_runtime_library(SOURCES <files> INCLUDES <dirs> PRIVATE_INCLUDES <dirs>
#                       DEFINITIONS <defs> OPTIONS <options>)
include_guard(GLOBAL)

function(_mlf_runtime_cache_key out runtime_dir)
  string(TOUPPER "${CMAKE_BUILD_TYPE}" config)
  file(TIMESTAMP "${CMAKE_C_COMPILER}" compiler_time UTC)
  set(text "mlf-runtime-cache 1\n${CMAKE_C_COMPILER}\n${compiler_time}\n")
  string(APPEND text "${CMAKE_C_COMPILER_ID} ${CMAKE_C_COMPILER_VERSION}\n")
  string(APPEND text "${CMAKE_C_COMPILER_TARGET}\n${CMAKE_SYSROOT}\n${CMAKE_BUILD_TYPE}\n")
  string(APPEND text "${CMAKE_C_FLAGS}\n${CMAKE_C_FLAGS_${config}}\n")
  string(APPEND text "${CMAKE_C_STANDARD} ${CMAKE_C_EXTENSIONS}\n${ARGN}\n")
  file(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE "${runtime_dir}" "${runtime_dir}/*")
  list(SORT files)
  foreach(file IN LISTS files)
    file(SHA256 "${runtime_dir}/${file}" digest)
    string(APPEND text "${file} ${digest}\n")
  endforeach()
  string(SHA256 key "${text}")
  set(${out} "${key}" PARENT_SCOPE)
  set(_mlf_runtime_files "${files}" PARENT_SCOPE)
endfunction()

function(mlf_runtime_library)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" ""
                        "SOURCES;INCLUDES;PRIVATE_INCLUDES;DEFINITIONS;OPTIONS")
  set(runtime_dir "${CMAKE_CURRENT_SOURCE_DIR}/runtime")
  set(library "")
  if(MLF_RUNTIME_CACHE)
    _mlf_runtime_cache_key(key "${runtime_dir}" "${arg_DEFINITIONS}" "${arg_OPTIONS}"
                           "${arg_SOURCES}" "${MLF_WERROR}")
    set(entry "${MLF_RUNTIME_CACHE}/${key}")
    set(library "${entry}/${CMAKE_STATIC_LIBRARY_PREFIX}mlf_runtime${CMAKE_STATIC_LIBRARY_SUFFIX}")
  endif()
  if(library AND EXISTS "${library}")
    message(STATUS "mlf-runtime-cache: hit ${library}")
    add_library(mlf_runtime STATIC IMPORTED GLOBAL)
    set_target_properties(mlf_runtime PROPERTIES
      IMPORTED_LOCATION "${library}"
      INTERFACE_INCLUDE_DIRECTORIES "${arg_INCLUDES}")
    list(TRANSFORM _mlf_runtime_files PREPEND "${runtime_dir}/")
    set_property(DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}" APPEND PROPERTY
                 CMAKE_CONFIGURE_DEPENDS ${_mlf_runtime_files})
    return()
  endif()
  add_library(mlf_runtime STATIC ${arg_SOURCES})
  target_include_directories(mlf_runtime PUBLIC ${arg_INCLUDES} PRIVATE ${arg_PRIVATE_INCLUDES})
  target_compile_definitions(mlf_runtime PRIVATE ${arg_DEFINITIONS})
  target_compile_options(mlf_runtime PRIVATE ${arg_OPTIONS})
  if(library)
    set(staged "${CMAKE_BINARY_DIR}/mlf-runtime-cache/${key}")
    message(STATUS "mlf-runtime-cache: miss ${library} staged ${staged}")
    add_custom_command(TARGET mlf_runtime POST_BUILD
      COMMAND "${CMAKE_COMMAND}" -E make_directory "${staged}"
      COMMAND "${CMAKE_COMMAND}" -E copy "$<TARGET_FILE:mlf_runtime>" "${staged}/"
      VERBATIM)
  endif()
endfunction()
