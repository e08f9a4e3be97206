# mlf_runtime.cmake — the runtime's sources, for any CMake project (firmware, tests):
#   include(<crt>/mlf_runtime.cmake)
#   add_library(mlf_runtime STATIC ${MLF_RUNTIME_SOURCES})
#   target_include_directories(mlf_runtime PUBLIC ${MLF_RUNTIME_INCLUDE_DIR})
# MLF_RUNTIME_SOURCES         executor, graph.json parser, params, workspace, registry, errors
# MLF_RUNTIME_COMPAT_SOURCES  TVMGraphExecutor_* layer and TVM's platform hooks (optional;
#                             needs the firmware's TVMPlatformMemoryAllocate/Free)
# MLF_PLATFORM_HOST_SOURCES   mlf_platform.h for a POSIX process
set(MLF_RUNTIME_DIR ${CMAKE_CURRENT_LIST_DIR})
set(MLF_RUNTIME_INCLUDE_DIR ${MLF_RUNTIME_DIR}/include)
set(MLF_RUNTIME_SOURCES
    ${MLF_RUNTIME_DIR}/src/mlf_error.c
    ${MLF_RUNTIME_DIR}/src/mlf_executor.c
    ${MLF_RUNTIME_DIR}/src/mlf_graph_json.c
    ${MLF_RUNTIME_DIR}/src/mlf_json.c
    ${MLF_RUNTIME_DIR}/src/mlf_params.c
    ${MLF_RUNTIME_DIR}/src/mlf_registry.c
    ${MLF_RUNTIME_DIR}/src/mlf_workspace.c)
set(MLF_RUNTIME_COMPAT_SOURCES
    ${MLF_RUNTIME_DIR}/src/mlf_tvm_compat.c
    ${MLF_RUNTIME_DIR}/src/mlf_tvm_platform.c)
set(MLF_PLATFORM_HOST_SOURCES ${MLF_RUNTIME_DIR}/platform/host/mlf_platform_host.c)
