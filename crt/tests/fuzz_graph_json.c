/*
 * fuzz_graph_json.c — libFuzzer target: graph.json text → measure, parse, and when that
 * succeeds, a full executor init and run over operators that touch every byte of every
 * argument (so ASan catches any view the runtime let out of its pool).
 */
#include <stdlib.h>
#include <string.h>

#include "mlf_runtime.h"

static int32_t touch_all(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code,
                         void* resource) {
  (void)codes, (void)ret, (void)ret_code, (void)resource;
  for (int i = 0; i < num_args; ++i) {
    DLTensor* t = (DLTensor*)args[i].v_handle;
    size_t bytes = mlf_dtype_bytes(t->dtype);
    for (int32_t d = 0; d < t->ndim; ++d) bytes *= (size_t)t->shape[d];
    if (bytes != 0) memset(t->data, 0xA5, bytes);
  }
  return 0;
}

/* A registry naming exactly the graph's functions, laid out like TVM's lib0.c. */
static int make_registry(const mlf_graph* g, char** names, TVMBackendPackedCFunc** funcs) {
  size_t len = 3;
  for (uint32_t i = 0; i < g->num_funcs; ++i) len += g->funcs[i].len + 1;
  *names = (char*)malloc(len);
  *funcs = (TVMBackendPackedCFunc*)malloc((g->num_funcs + 1) * sizeof(TVMBackendPackedCFunc));
  (*names)[0] = (char)(g->num_funcs & 0xFF);
  (*names)[1] = (char)(g->num_funcs >> 8);
  size_t at = 2;
  for (uint32_t i = 0; i < g->num_funcs; ++i) {
    memcpy(*names + at, g->funcs[i].str, g->funcs[i].len);
    at += g->funcs[i].len;
    (*names)[at++] = '\0';
    (*funcs)[i] = touch_all;
  }
  (*names)[at] = '\0';
  return 1;
}

static void run_graph(const mlf_graph* g) {
  char* names;
  TVMBackendPackedCFunc* funcs;
  make_registry(g, &names, &funcs);
  TVMFuncRegistry registry = {names, funcs};
  TVMModule lib = {&registry};
  size_t state_bytes = mlf_executor_state_bytes(g), arena_bytes;
  if (mlf_executor_arena_bytes(g, NULL, 0, 0, &arena_bytes) == MLF_OK &&
      arena_bytes < (64u << 20) && state_bytes < (64u << 20)) {
    void* state = malloc(state_bytes + 8);
    void* arena = malloc(arena_bytes + 1);
    mlf_executor ex;
    if (mlf_executor_init(&ex, g, &lib, NULL, 0, state, state_bytes, arena, arena_bytes) ==
        MLF_OK) {
      for (uint32_t i = 0; i < mlf_executor_num_inputs(&ex); ++i) {
        mlf_tensor_info info;
        mlf_executor_input_info(&ex, i, &info);
        void* data = calloc(1, info.nbytes + 1);
        mlf_executor_set_input(&ex, i, data, info.nbytes);
        free(data);
      }
      mlf_executor_run(&ex);
      for (uint32_t o = 0; o < mlf_executor_num_outputs(&ex); ++o) {
        mlf_tensor_info info;
        mlf_executor_output_info(&ex, o, &info);
        void* data = malloc(info.nbytes + 1);
        mlf_executor_get_output(&ex, o, data, info.nbytes);
        free(data);
      }
    }
    free(state);
    free(arena);
  }
  free(names);
  free(funcs);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size_t bytes;
  mlf_error err;
  char message[160];
  const char* json = (const char*)data;
  mlf_status status = mlf_graph_measure_json(json, size, &bytes, &err);
  mlf_error_format(&err, message, sizeof(message));
  if (status != MLF_OK || bytes > (64u << 20)) return 0;
  void* mem = malloc(bytes);
  const mlf_graph* g;
  if (mlf_graph_parse_json(json, size, mem, bytes, &g, &err) == MLF_OK) run_graph(g);
  free(mem);
  return 0;
}
