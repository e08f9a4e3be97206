/*
 * run_model.c — runs a real TVM-generated model (its codegen/host/src compiled into this
 * program) on the runtime, from graph.json + params + raw input files, and writes raw
 * output files. Driven by tests/test_crt.py for every archive of the corpus.
 *
 *   run_model MODE GRAPH PARAMS OUT_DIR NAME=INPUT.bin...
 *
 * MODE: "bind"   init() with the params blob (tensors copied, or used in place if aligned),
 *       "load"   init() without params, then mlf_executor_load_params(),
 *       "compat" TVM's TVMGraphExecutor_* API over the firmware allocator below.
 * Writes OUT_DIR/output<i>.bin and prints one summary line of sizes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlf_runtime.h"
#include "test_util.h"
#include "tvm/runtime/crt/graph_executor.h"
#include "tvm/runtime/crt/platform.h"

tvm_crt_error_t TVMPlatformMemoryAllocate(size_t num_bytes, DLDevice dev, void** out_ptr) {
  (void)dev;
  *out_ptr = aligned_alloc(64, MLF_ALIGN_UP(num_bytes, 64));
  return *out_ptr != NULL ? kTvmErrorNoError : kTvmErrorPlatformNoMemory;
}

tvm_crt_error_t TVMPlatformMemoryFree(void* ptr, DLDevice dev) {
  (void)dev;
  free(ptr);
  return kTvmErrorNoError;
}

static int fail(const char* what, const mlf_error* err) {
  char message[256] = "";
  if (err != NULL) mlf_error_format(err, message, sizeof(message));
  fprintf(stderr, "run_model: %s: %s\n", what, message);
  return 1;
}

static int write_file(const char* dir, uint32_t index, const void* data, size_t n) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/output%u.bin", dir, index);
  FILE* f = fopen(path, "wb");
  if (f == NULL || fwrite(data, 1, n, f) != n) return fail("cannot write output", NULL);
  fclose(f);
  return 0;
}

typedef struct {
  const mlf_graph* graph;
  mlf_executor ex;
  void* tables;
  size_t table_bytes;
  void* state;
  void* arena;
  size_t arena_bytes;
} model;

static int set_inputs_direct(mlf_executor* ex, int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    char* eq = strchr(argv[i], '=');
    size_t len;
    if (eq == NULL) return fail("inputs are NAME=FILE", NULL);
    char* data = test_read_file(eq + 1, &len);
    if (data == NULL) return fail("cannot read input", NULL);
    mlf_status status =
        mlf_executor_set_input_by_name(ex, argv[i], (size_t)(eq - argv[i]), data, len);
    free(data);
    if (status != MLF_OK) {
      fprintf(stderr, "run_model: input %.*s: %s\n", (int)(eq - argv[i]), argv[i],
              mlf_status_name(status));
      return 1;
    }
  }
  return 0;
}

static int run_compat(model* m, const char* json, const char* params, size_t params_len,
                      const char* out_dir, int argc, char** argv) {
  TVMGraphExecutor* ge = NULL;
  if (TVMGraphExecutor_Create(json, (TVMModuleHandle)TVMSystemLibEntryPoint(), NULL, &ge) != 0 ||
      TVMGraphExecutor_LoadParams(ge, params, (uint32_t)params_len) != 0) {
    fprintf(stderr, "run_model: compat: %s\n", TVMGetLastError());
    return 1;
  }
  for (int i = 0; i < argc; ++i) {
    char* eq = strchr(argv[i], '=');
    size_t len;
    char* data = test_read_file(eq + 1, &len);
    int64_t shape[1] = {(int64_t)len};
    DLTensor t = {data, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, shape, NULL, 0};
    *eq = '\0';
    int rc = TVMGraphExecutor_SetInput(ge, argv[i], &t);
    free(data);
    if (rc != 0) return fail("compat SetInput", NULL);
  }
  if (TVMGraphExecutor_Run(ge) != 0) {
    fprintf(stderr, "run_model: compat run: %s\n", TVMGetLastError());
    return 1;
  }
  for (uint32_t o = 0; o < (uint32_t)TVMGraphExecutor_GetNumOutputs(ge); ++o) {
    mlf_tensor_info info;
    mlf_executor_output_info(&m->ex, o, &info);
    void* data = malloc(info.nbytes + 1);
    int64_t shape[1] = {(int64_t)info.nbytes};
    DLTensor t = {data, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, shape, NULL, 0};
    if (TVMGraphExecutor_GetOutput(ge, (int32_t)o, &t) != 0 ||
        write_file(out_dir, o, data, info.nbytes) != 0) {
      return fail("compat GetOutput", NULL);
    }
    free(data);
  }
  return TVMGraphExecutor_Release(&ge);
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: run_model bind|load|compat GRAPH PARAMS OUT_DIR NAME=FILE...\n");
    return 2;
  }
  const char* mode = argv[1];
  size_t json_len, params_len;
  char* json = test_read_file(argv[2], &json_len);
  char* params = test_read_file(argv[3], &params_len);
  if (json == NULL || params == NULL) return fail("cannot read graph or params", NULL);
  int bind = strcmp(mode, "bind") == 0;

  model m;
  mlf_error err;
  memset(&m, 0, sizeof(m));
  if (mlf_graph_measure_json(json, json_len, &m.table_bytes, &err) != MLF_OK) {
    return fail("measure", &err);
  }
  m.tables = malloc(m.table_bytes);
  if (mlf_graph_parse_json(json, json_len, m.tables, m.table_bytes, &m.graph, &err) != MLF_OK) {
    return fail("parse", &err);
  }
  size_t state_bytes = mlf_executor_state_bytes(m.graph);
  m.state = malloc(state_bytes);
  mlf_status status =
      mlf_executor_arena_bytes(m.graph, bind ? params : NULL, params_len, 0, &m.arena_bytes);
  if (status != MLF_OK) return fail("arena_bytes", NULL);
  m.arena = malloc(m.arena_bytes);
  if (mlf_executor_init(&m.ex, m.graph, TVMSystemLibEntryPoint(), bind ? params : NULL, params_len,
                        m.state, state_bytes, m.arena, m.arena_bytes) != MLF_OK) {
    return fail("init", &m.ex.error);
  }
  if (!bind && mlf_executor_load_params(&m.ex, params, params_len) != MLF_OK) {
    return fail("load_params", &m.ex.error);
  }

  static uint8_t workspace_mem[4 << 20];
  mlf_workspace ws;
  mlf_workspace_init(&ws, workspace_mem, sizeof(workspace_mem));
  mlf_workspace_bind(&ws);
  int rc;
  if (strcmp(mode, "compat") == 0) {
    rc = run_compat(&m, json, params, params_len, argv[4], argc - 5, argv + 5);
  } else {
    rc = set_inputs_direct(&m.ex, argc - 5, argv + 5);
    if (rc == 0 && mlf_executor_run(&m.ex) != MLF_OK) rc = fail("run", &m.ex.error);
    for (uint32_t o = 0; rc == 0 && o < mlf_executor_num_outputs(&m.ex); ++o) {
      const DLTensor* t = mlf_executor_output_tensor(&m.ex, o);
      mlf_tensor_info info;
      mlf_executor_output_info(&m.ex, o, &info);
      rc = write_file(argv[4], o, t->data, info.nbytes);
    }
  }
  printf("ops=%u views=%u tables=%zu state=%zu arena=%zu workspace=%zu\n", m.graph->num_ops,
         m.graph->num_views, m.table_bytes, state_bytes, m.arena_bytes,
         mlf_workspace_high_water(&ws));
  mlf_workspace_bind(NULL);
  free(m.tables);
  free(m.state);
  free(m.arena);
  free(json);
  free(params);
  return rc;
}
