/*
 * mlf_tvm_compat.c — TVM CRT's TVMGraphExecutor_* API over mlf_executor, with memory from
 * the firmware's TVMPlatformMemoryAllocate(). See tvm/runtime/crt/graph_executor.h.
 */
#include <string.h>

#include "mlf_internal.h"
#include "tvm/runtime/crt/graph_executor.h"
#include "tvm/runtime/crt/platform.h"

struct TVMGraphExecutor {
  mlf_executor ex;
  char* json; /* TVM's API lets the caller free its JSON: names need a copy that persists */
  void* tables;
  void* state;
  void* arena;
};

static const DLDevice kCpu = {kDLCPU, 0};

/* Names are compared as 32-bit lengths (mlf_name): a longer one cannot match any. */
static size_t name_length(const char* name) { return mlf_cstr_length(name, UINT32_MAX); }

static void report(const mlf_error* err) {
  char message[128];
  mlf_error_format(err, message, sizeof(message));
  TVMAPISetLastError(message);
}

static void* allocate(size_t bytes) {
  void* block = NULL;
  /* Ask for at least one byte: some allocators refuse zero-byte requests. */
  if (TVMPlatformMemoryAllocate(bytes != 0 ? bytes : 1, kCpu, &block) != kTvmErrorNoError) {
    return NULL;
  }
  return block;
}

static void release_memory(TVMGraphExecutor* g) {
  void* blocks[] = {g->arena, g->state, g->tables, g->json};
  for (size_t i = 0; i < sizeof(blocks) / sizeof(blocks[0]); ++i) {
    if (blocks[i] != NULL) TVMPlatformMemoryFree(blocks[i], kCpu);
  }
  TVMPlatformMemoryFree(g, kCpu);
}

static mlf_status build(TVMGraphExecutor* g, const char* sym_json, const TVMModule* lib,
                        mlf_error* err) {
  /* Bounded: a text without its NUL within the parser's limit is refused before it is copied. */
  size_t len = mlf_cstr_length(sym_json, MLF_JSON_MAX_BYTES), bytes;
  const mlf_graph* graph;
  if (len >= MLF_JSON_MAX_BYTES) return mlf_fail(err, MLF_ERR_ARGUMENT, MLF_WHY_GRAPH_ARGUMENT);
  if ((g->json = (char*)allocate(len + 1)) == NULL) {
    return mlf_fail(err, MLF_ERR_NO_MEMORY, MLF_WHY_PLATFORM_ALLOCATE);
  }
  memcpy(g->json, sym_json, len);
  g->json[len] = '\0';
  if (mlf_graph_measure_json(g->json, len, &bytes, err) != MLF_OK) return err->status;
  if ((g->tables = allocate(bytes)) == NULL) {
    return mlf_fail(err, MLF_ERR_NO_MEMORY, MLF_WHY_PLATFORM_ALLOCATE);
  }
  if (mlf_graph_parse_json(g->json, len, g->tables, bytes, &graph, err) != MLF_OK) {
    return err->status;
  }
  size_t state_bytes = mlf_executor_state_bytes(graph);
  mlf_status status = mlf_executor_arena_bytes(graph, NULL, 0, 0, &bytes);
  if (status != MLF_OK) return mlf_fail(err, status, MLF_WHY_ARENA_SIZE);
  if ((g->state = allocate(state_bytes)) == NULL || (g->arena = allocate(bytes)) == NULL) {
    return mlf_fail(err, MLF_ERR_NO_MEMORY, MLF_WHY_PLATFORM_ALLOCATE);
  }
  status = mlf_executor_init(&g->ex, graph, lib, NULL, 0, g->state, state_bytes, g->arena, bytes);
  if (status != MLF_OK) *err = g->ex.error;
  return status;
}

int TVMGraphExecutor_Create(const char* sym_json, TVMModuleHandle module_handle,
                            const DLDevice* devices, TVMGraphExecutor** executor) {
  mlf_error err;
  mlf_error_clear(&err);
  if (executor == NULL || sym_json == NULL || module_handle == NULL ||
      (devices != NULL && devices[0].device_type != kDLCPU)) {
    TVMAPISetLastError("TVMGraphExecutor_Create: bad argument");
    return -1;
  }
  TVMGraphExecutor* g = (TVMGraphExecutor*)allocate(sizeof(TVMGraphExecutor));
  *executor = NULL;
  if (g == NULL) {
    TVMAPISetLastError("TVMGraphExecutor_Create: out of memory");
    return -1;
  }
  memset(g, 0, sizeof(*g));
  if (build(g, sym_json, (const TVMModule*)module_handle, &err) != MLF_OK) {
    report(&err);
    release_memory(g);
    return -1;
  }
  *executor = g;
  return 0;
}

int TVMGraphExecutor_GetInputIndex(TVMGraphExecutor* executor, const char* name) {
  uint32_t index;
  if (executor == NULL || name == NULL ||
      mlf_executor_input_index(&executor->ex, name, name_length(name), &index) != MLF_OK) {
    return -1;
  }
  return (int)index;
}

int TVMGraphExecutor_GetNumInputs(TVMGraphExecutor* executor) {
  return executor != NULL ? (int)mlf_executor_num_inputs(&executor->ex) : -1;
}

int TVMGraphExecutor_GetNumOutputs(TVMGraphExecutor* executor) {
  return executor != NULL ? (int)mlf_executor_num_outputs(&executor->ex) : -1;
}

static size_t tensor_bytes(const DLTensor* t) {
  size_t bytes = mlf_dtype_bytes(t->dtype);
  for (int32_t d = 0; d < t->ndim; ++d) bytes *= (size_t)t->shape[d];
  return bytes;
}

static int status_to_int(mlf_status status, const char* what) {
  if (status == MLF_OK) return 0;
  TVMAPISetLastError(what);
  return -1;
}

int TVMGraphExecutor_SetInput(TVMGraphExecutor* executor, const char* name, DLTensor* data_in) {
  if (executor == NULL || name == NULL || data_in == NULL) return -1;
  return status_to_int(mlf_executor_set_input_by_name(&executor->ex, name, name_length(name),
                                                      data_in->data, tensor_bytes(data_in)),
                       "TVMGraphExecutor_SetInput: no such input, or wrong size");
}

int TVMGraphExecutor_GetOutput(TVMGraphExecutor* executor, const int32_t index, DLTensor* out) {
  if (executor == NULL || out == NULL || index < 0) return -1;
  return status_to_int(
      mlf_executor_get_output(&executor->ex, (uint32_t)index, out->data, tensor_bytes(out)),
      "TVMGraphExecutor_GetOutput: no such output, or wrong size");
}

int TVMGraphExecutor_LoadParams(TVMGraphExecutor* executor, const char* param_blob,
                                const uint32_t param_size) {
  if (executor == NULL) return -1;
  if (mlf_executor_load_params(&executor->ex, param_blob, param_size) != MLF_OK) {
    report(mlf_executor_error(&executor->ex));
    return -1;
  }
  return 0;
}

int TVMGraphExecutor_Run(TVMGraphExecutor* executor) {
  if (executor == NULL) return -1;
  if (mlf_executor_run(&executor->ex) != MLF_OK) {
    report(mlf_executor_error(&executor->ex));
    return -1;
  }
  return 0;
}

int TVMGraphExecutor_Release(TVMGraphExecutor** executor) {
  if (executor == NULL || *executor == NULL) return -1;
  release_memory(*executor);
  *executor = NULL;
  return 0;
}
