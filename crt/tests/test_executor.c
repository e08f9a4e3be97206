/*
 * test_executor.c — mlf_executor_*: both graph paths, params binding (in place / copied /
 * ignored / mismatching), function resolution, operator failures, the workspace during a
 * run, every accessor, sizing rules, and hostile tables.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_graphs.h"
#include "test_util.h"

/* A graph and an executor over heap memory sized by the runtime's own rules. */
typedef struct {
  char* json;
  void* tables;
  const mlf_graph* graph;
  void* state;
  size_t state_size;
  uint8_t* arena;
  size_t arena_size;
  mlf_executor ex;
  mlf_error err;
} fixture;

static mlf_status fixture_graph(fixture* f, const char* json) {
  size_t bytes;
  memset(f, 0, sizeof(*f));
  f->json = (char*)json;
  mlf_status status = mlf_graph_measure_json(json, strlen(json), &bytes, &f->err);
  if (status != MLF_OK) return status;
  f->tables = malloc(bytes);
  return mlf_graph_parse_json(json, strlen(json), f->tables, bytes, &f->graph, &f->err);
}

static mlf_status fixture_init(fixture* f, const TVMModule* lib, const void* params,
                               size_t params_len) {
  f->state_size = mlf_executor_state_bytes(f->graph);
  f->state = malloc(f->state_size + 8);
  mlf_status status = mlf_executor_arena_bytes(f->graph, params, params_len, 0, &f->arena_size);
  if (status != MLF_OK) return status;
  f->arena = (uint8_t*)malloc(f->arena_size);
  return mlf_executor_init(&f->ex, f->graph, lib, params, params_len, f->state, f->state_size,
                           f->arena, f->arena_size);
}

/* Drops the executor's memory, keeping the graph. */
static void fixture_reset(fixture* f) {
  free(f->state);
  free(f->arena);
  f->state = NULL;
  f->arena = NULL;
}

static void fixture_free(fixture* f) {
  fixture_reset(f);
  free(f->json);
  free(f->tables);
}

static const float kX[4] = {1, 2, 3, 4};
static const float kP0[4] = {10, 20, 30, 40};
static const int64_t kShape14[2] = {1, 4};

static size_t basic_params(uint8_t* buf, size_t size) {
  static const float kExtra[3] = {7, 7, 7};
  static const int64_t kShape3[1] = {3};
  test_param params[] = {
      {"not_in_graph", {kDLFloat, 32, 1}, 1, kShape3, kExtra, 12},
      {"p0", {kDLFloat, 32, 1}, 2, kShape14, kP0, 16},
  };
  return test_params_write(params, 2, buf, size);
}

static void check_basic_outputs(const mlf_executor* ex) {
  float out[3][4];
  for (uint32_t o = 0; o < 3; ++o) {
    CHECK_STATUS(mlf_executor_get_output(ex, o, out[o], 16), MLF_OK, mlf_executor_error(ex));
  }
  for (int i = 0; i < 4; ++i) {
    float sum = kX[i] + kP0[i];
    CHECK(out[0][i] == sum + 1);
    CHECK(out[1][i] == 20 * sum);
    CHECK(out[2][i] == sum);
  }
}

static void run_basic(const mlf_graph* g, const void* params, size_t params_len) {
  fixture f;
  memset(&f, 0, sizeof(f));
  f.graph = g;
  CHECK_STATUS(fixture_init(&f, &g_test_lib, params, params_len), MLF_OK, &f.ex.error);
  CHECK_EQ_INT(mlf_executor_num_inputs(&f.ex), 1);
  CHECK_EQ_INT(mlf_executor_num_outputs(&f.ex), 3);
  CHECK_STATUS(mlf_executor_set_input_by_name(&f.ex, "x", 1, kX, sizeof(kX)), MLF_OK, &f.ex.error);
  g_op_calls = 0;
  CHECK_STATUS(mlf_executor_run(&f.ex), MLF_OK, &f.ex.error);
  CHECK_EQ_INT(g_op_calls, 3); /* add, split, scale2: __nop vanished, __copy is internal */
  check_basic_outputs(&f.ex);
  /* Running again gives the same results. */
  CHECK_STATUS(mlf_executor_run(&f.ex), MLF_OK, &f.ex.error);
  check_basic_outputs(&f.ex);
  fixture_reset(&f);
}

static void test_json_and_tables_agree(void) {
  uint8_t blob[512];
  size_t len = basic_params(blob, sizeof(blob));
  fixture f;
  CHECK_STATUS(fixture_graph(&f, json_from(kBasicJson)), MLF_OK, &f.err);
  run_basic(f.graph, blob, len);
  run_basic(&kBasicTables, blob, len);
  fixture_free(&f);
}

static void test_load_params_later(void) {
  uint8_t blob[512];
  size_t len = basic_params(blob, sizeof(blob));
  fixture f;
  CHECK_STATUS(fixture_graph(&f, json_from(kBasicJson)), MLF_OK, &f.err);
  CHECK_STATUS(fixture_init(&f, &g_test_lib, NULL, 0), MLF_OK, &f.ex.error);
  CHECK_EQ_INT(mlf_executor_num_inputs(&f.ex), 2); /* p0 is an input until params arrive */
  CHECK_STATUS(mlf_executor_load_params(&f.ex, blob, len), MLF_OK, &f.ex.error);
  CHECK_EQ_INT(mlf_executor_num_inputs(&f.ex), 1);
  /* The blob does not persist: scribbling over it must not matter. */
  memset(blob, 0xAB, sizeof(blob));
  CHECK_STATUS(mlf_executor_set_input(&f.ex, 0, kX, sizeof(kX)), MLF_OK, &f.ex.error);
  CHECK_STATUS(mlf_executor_run(&f.ex), MLF_OK, &f.ex.error);
  check_basic_outputs(&f.ex);
  CHECK_STATUS(mlf_executor_load_params(&f.ex, blob, len), MLF_ERR_PARAMS, &f.ex.error);
  fixture_free(&f);
}

/* Places the blob so that p0's data lands on a 64-byte boundary (or just off it). */
static uint8_t* place_blob(uint8_t* area, const uint8_t* blob, size_t len, int aligned) {
  static const int64_t kShape3[1] = {3};
  static const float kExtra[3] = {7, 7, 7};
  test_param params[] = {
      {"not_in_graph", {kDLFloat, 32, 1}, 1, kShape3, kExtra, 12},
      {"p0", {kDLFloat, 32, 1}, 2, kShape14, kP0, 16},
  };
  size_t data = test_params_data_offset(params, 2, 1);
  uint8_t* base = (uint8_t*)MLF_ALIGN_UP((uintptr_t)area + 64, 64) - data % 64 + (aligned ? 0 : 4);
  memcpy(base, blob, len);
  return base;
}

static void test_params_in_place_vs_copied(void) {
  uint8_t blob[512], area[1024];
  size_t len = basic_params(blob, sizeof(blob));
  size_t copied_arena, in_place_arena;
  fixture f;
  CHECK_STATUS(fixture_graph(&f, json_from(kBasicJson)), MLF_OK, &f.err);

  uint8_t* unaligned = place_blob(area, blob, len, 0);
  CHECK_STATUS(mlf_executor_arena_bytes(f.graph, unaligned, len, 1, &copied_arena), MLF_OK, NULL);
  CHECK_EQ_INT(copied_arena, 6 * 64); /* six 16-byte pools, each at a 64-byte boundary */
  CHECK_STATUS(fixture_init(&f, &g_test_lib, unaligned, len), MLF_OK, &f.ex.error);
  const uint8_t* p0_data = f.ex.storage[f.graph->views[1].storage];
  CHECK(p0_data < unaligned || p0_data >= unaligned + len);
  CHECK_EQ_INT(f.ex.arg_flags[1], 1);
  fixture_reset(&f);

  uint8_t* aligned = place_blob(area, blob, len, 1);
  CHECK_STATUS(mlf_executor_arena_bytes(f.graph, aligned, len, 1, &in_place_arena), MLF_OK, NULL);
  CHECK_EQ_INT(in_place_arena, 5 * 64); /* p0's pool is the blob itself */
  CHECK_STATUS(fixture_init(&f, &g_test_lib, aligned, len), MLF_OK, &f.ex.error);
  p0_data = f.ex.storage[f.graph->views[1].storage];
  CHECK(p0_data > aligned && p0_data < aligned + len);
  CHECK_EQ_INT(f.ex.arg_flags[1], 2);
  CHECK_STATUS(mlf_executor_set_input(&f.ex, 0, kX, sizeof(kX)), MLF_OK, &f.ex.error);
  CHECK_STATUS(mlf_executor_run(&f.ex), MLF_OK, &f.ex.error);
  check_basic_outputs(&f.ex);
  /* Read-only once bound in place. */
  CHECK_STATUS(mlf_executor_load_params(&f.ex, blob, len), MLF_ERR_UNSUPPORTED, &f.ex.error);
  fixture_free(&f);
}

/* Params bound by the tables themselves (storage_data), as the generator emits them. */
static void test_params_in_tables(void) {
  static const float kP0Aligned[16] __attribute__((aligned(64))) = {10, 20, 30, 40};
  const uint8_t* data[6] = {NULL, (const uint8_t*)kP0Aligned, NULL, NULL, NULL, NULL};
  mlf_graph g = kBasicTables;
  g.storage_data = data;
  fixture f;
  memset(&f, 0, sizeof(f));
  f.graph = &g;
  size_t arena;
  CHECK_STATUS(mlf_executor_arena_bytes(&g, NULL, 0, 1, &arena), MLF_OK, NULL);
  CHECK_EQ_INT(arena, 5 * 64); /* p0's pool takes no arena */
  CHECK_STATUS(fixture_init(&f, &g_test_lib, NULL, 0), MLF_OK, &f.ex.error);
  CHECK_EQ_INT(mlf_executor_num_inputs(&f.ex), 1); /* only x: p0 is bound */
  CHECK(f.ex.storage[g.views[1].storage] == (const uint8_t*)kP0Aligned);
  CHECK_STATUS(mlf_executor_set_input(&f.ex, 0, kX, sizeof(kX)), MLF_OK, &f.ex.error);
  CHECK_STATUS(mlf_executor_run(&f.ex), MLF_OK, &f.ex.error);
  check_basic_outputs(&f.ex);
  uint8_t blob[512];
  size_t len = basic_params(blob, sizeof(blob));
  CHECK_STATUS(mlf_executor_load_params(&f.ex, blob, len), MLF_ERR_UNSUPPORTED, &f.ex.error);
  fixture_reset(&f);

  /* The same without a blob argument: what generated firmware calls. */
  f.state_size = mlf_executor_state_bytes(&g);
  f.state = malloc(f.state_size);
  arena += 63; /* malloc's memory need not be 64-byte aligned */
  f.arena = (uint8_t*)malloc(arena);
  CHECK_STATUS(
      mlf_executor_init_bound(&f.ex, &g, &g_test_lib, f.state, f.state_size, f.arena, arena),
      MLF_OK, &f.ex.error);
  CHECK_EQ_INT(mlf_executor_num_inputs(&f.ex), 1);
  CHECK_STATUS(mlf_executor_set_input(&f.ex, 0, kX, sizeof(kX)), MLF_OK, &f.ex.error);
  CHECK_STATUS(mlf_executor_run(&f.ex), MLF_OK, &f.ex.error);
  check_basic_outputs(&f.ex);
  fixture_reset(&f);
  g.storage_data = NULL; /* nothing bound: p0 is an input like x */
  f.state = malloc(f.state_size);
  f.arena = (uint8_t*)malloc(6 * 64 + 63);
  CHECK_STATUS(
      mlf_executor_init_bound(&f.ex, &g, &g_test_lib, f.state, f.state_size, f.arena, 6 * 64 + 63),
      MLF_OK, &f.ex.error);
  CHECK_EQ_INT(mlf_executor_num_inputs(&f.ex), 2);
  fixture_reset(&f);
  g.storage_data = data;

  /* The generator leaves a bound param's arg out: x is then the only arg, and the input. */
  g.num_args = 1;
  CHECK_STATUS(fixture_init(&f, &g_test_lib, NULL, 0), MLF_OK, &f.ex.error);
  CHECK_EQ_INT(mlf_executor_num_inputs(&f.ex), 1);
  CHECK_STATUS(mlf_executor_set_input(&f.ex, 0, kX, sizeof(kX)), MLF_OK, &f.ex.error);
  CHECK_STATUS(mlf_executor_run(&f.ex), MLF_OK, &f.ex.error);
  check_basic_outputs(&f.ex);
  fixture_reset(&f);
  g.num_args = kBasicTables.num_args;

  data[1] = (const uint8_t*)kP0Aligned + 4; /* not 64-byte aligned */
  CHECK_STATUS(fixture_init(&f, &g_test_lib, NULL, 0), MLF_ERR_GRAPH, &f.ex.error);
  fixture_reset(&f);
  data[1] = NULL;
  data[2] = (const uint8_t*)kP0Aligned; /* the add writes pool 2: constant data there is refused */
  CHECK_STATUS(fixture_init(&f, &g_test_lib, NULL, 0), MLF_ERR_GRAPH, &f.ex.error);
  fixture_reset(&f);
}

/* The basic tables with every function bound by address (func_ptrs), and memory to run them. */
typedef struct {
  TVMBackendPackedCFunc ptrs[3];
  mlf_graph g;
  mlf_executor ex;
  void* state;
  size_t state_size;
  uint8_t* arena;
  size_t arena_size;
} linked_graph;

static void linked_graph_init(linked_graph* l, const mlf_name* names) {
  l->ptrs[0] = (TVMBackendPackedCFunc)op_add;
  l->ptrs[1] = (TVMBackendPackedCFunc)op_split;
  l->ptrs[2] = (TVMBackendPackedCFunc)op_scale2;
  l->g = kBasicTables;
  l->g.funcs = names;
  l->g.func_ptrs = l->ptrs;
  l->state_size = mlf_executor_state_bytes(&l->g);
  l->state = malloc(l->state_size);
  l->arena_size = 6 * 64 + 63;
  l->arena = (uint8_t*)malloc(l->arena_size);
}

static void linked_graph_free(linked_graph* l) {
  free(l->state);
  free(l->arena);
}

/* Both inputs set, one run, the outputs checked. */
static void run_basic_checked(mlf_executor* ex) {
  static const float kP0[4] = {10, 20, 30, 40};
  CHECK_STATUS(mlf_executor_set_input(ex, 0, kX, sizeof(kX)), MLF_OK, &ex->error);
  CHECK_STATUS(mlf_executor_set_input(ex, 1, kP0, sizeof(kP0)), MLF_OK, &ex->error);
  CHECK_STATUS(mlf_executor_run(ex), MLF_OK, &ex->error);
  check_basic_outputs(ex);
}

#define INIT_BOUND(l, lib)                                                              \
  mlf_executor_init_bound(&(l).ex, &(l).g, (lib), (l).state, (l).state_size, (l).arena, \
                          (l).arena_size)
#define INIT_LINKED(l) \
  mlf_executor_init_linked(&(l).ex, &(l).g, (l).state, (l).state_size, (l).arena, (l).arena_size)

/* Functions bound by the linker, names left empty: no library; a missing one is still refused
 * at init. */
static void test_functions_in_tables(void) {
  static const mlf_name kNoNames[3] = {{"", 0}, {"", 0}, {"", 0}};
  linked_graph l;
  linked_graph_init(&l, kNoNames);
  CHECK_STATUS(INIT_BOUND(l, NULL), MLF_OK, &l.ex.error);
  run_basic_checked(&l.ex);
  l.ptrs[1] = NULL;
  CHECK_STATUS(INIT_BOUND(l, NULL), MLF_ERR_MISSING_FUNCTION, &l.ex.error);
  l.g.func_ptrs = NULL; /* names to look up, and no library to look them up in */
  CHECK_STATUS(INIT_BOUND(l, NULL), MLF_ERR_ARGUMENT, &l.ex.error);
  linked_graph_free(&l);
}

/* init_linked: every function bound, no names at all, no library, no registry. */
static void test_functions_linked_without_names(void) {
  linked_graph l;
  linked_graph_init(&l, NULL);
  CHECK_STATUS(INIT_LINKED(l), MLF_OK, &l.ex.error);
  run_basic_checked(&l.ex);
  CHECK_STATUS(INIT_BOUND(l, &g_test_lib), MLF_OK, &l.ex.error); /* addresses win over names */

  l.ptrs[0] = (TVMBackendPackedCFunc)op_fail; /* a failing operator is named by its node alone */
  CHECK_STATUS(INIT_LINKED(l), MLF_OK, &l.ex.error);
  CHECK_STATUS(mlf_executor_run(&l.ex), MLF_ERR_OPERATOR, &l.ex.error);
  CHECK(l.ex.error.subject_len == 0 && l.ex.error.node != UINT32_MAX);

  l.ptrs[1] = NULL;
  CHECK_STATUS(INIT_LINKED(l), MLF_ERR_MISSING_FUNCTION, &l.ex.error);
  CHECK(l.ex.error.subject_len == 0);
  l.g.func_ptrs = NULL; /* neither addresses nor names: refused before anything else */
  CHECK_STATUS(INIT_LINKED(l), MLF_ERR_ARGUMENT, &l.ex.error);
  linked_graph_free(&l);
}

static void test_params_mismatch(void) {
  static const int64_t kShape4[1] = {4};
  static const int64_t kShape15[2] = {1, 5};
  static const float kData[5] = {0};
  const test_param cases[][1] = {
      {{"p0", {kDLFloat, 32, 1}, 1, kShape4, kData, 16}},  /* wrong rank */
      {{"p0", {kDLFloat, 32, 1}, 2, kShape15, kData, 20}}, /* wrong shape */
      {{"p0", {kDLInt, 32, 1}, 2, kShape14, kData, 16}},   /* wrong dtype */
  };
  fixture f;
  CHECK_STATUS(fixture_graph(&f, json_from(kBasicJson)), MLF_OK, &f.err);
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    uint8_t blob[256];
    size_t len = test_params_write(cases[i], 1, blob, sizeof(blob));
    CHECK_STATUS(fixture_init(&f, &g_test_lib, blob, len), MLF_ERR_MISMATCH, &f.ex.error);
    CHECK(f.ex.error.subject_len == 2 && memcmp(f.ex.error.subject, "p0", 2) == 0);
    fixture_reset(&f);
  }
  fixture_free(&f);
}

static void test_missing_function(void) {
  fixture f;
  char* json = json_from(kBasicJson);
  memcpy(strstr(json, "\"split\""), "\"splat\"", 7);
  CHECK_STATUS(fixture_graph(&f, json), MLF_OK, &f.err);
  CHECK_STATUS(fixture_init(&f, &g_test_lib, NULL, 0), MLF_ERR_MISSING_FUNCTION, &f.ex.error);
  CHECK(f.ex.error.subject_len == 5 && memcmp(f.ex.error.subject, "splat", 5) == 0);
  char message[128];
  mlf_error_format(&f.ex.error, message, sizeof(message));
  CHECK(strstr(message, "missing function") != NULL && strstr(message, "'splat'") != NULL);
  CHECK_STATUS(mlf_executor_run(&f.ex), MLF_ERR_STATE, NULL);
  CHECK_EQ_INT(mlf_executor_num_inputs(&f.ex), 0);
  fixture_free(&f);
}

static void test_failing_operator(void) {
  uint8_t ws_mem[4096];
  mlf_workspace ws;
  fixture f;
  float x[4] = {1, 1, 1, 1};
  CHECK_STATUS(fixture_graph(&f, json_from(kFailJson)), MLF_OK, &f.err);
  CHECK_STATUS(fixture_init(&f, &g_test_lib, NULL, 0), MLF_OK, &f.ex.error);
  CHECK_STATUS(mlf_workspace_init(&ws, ws_mem, sizeof(ws_mem)), MLF_OK, NULL);
  mlf_workspace_bind(&ws);
  CHECK_STATUS(mlf_executor_set_input(&f.ex, 0, x, sizeof(x)), MLF_OK, NULL);
  CHECK_STATUS(mlf_executor_run(&f.ex), MLF_ERR_OPERATOR, &f.ex.error);
  CHECK_EQ_INT(f.ex.error.node, 2);
  CHECK(f.ex.error.subject_len == 4 && memcmp(f.ex.error.subject, "fail", 4) == 0);
  CHECK_EQ_INT(ws.top, 0); /* the block the operator leaked was reclaimed */
  CHECK(ws.high_water >= 100);
  mlf_workspace_bind(NULL);
  fixture_free(&f);
}

static void test_workspace_operator(void) {
  uint8_t ws_mem[3 * 1024 + 64 + 63];
  mlf_workspace ws;
  fixture f;
  float x[16], y[16];
  for (int i = 0; i < 16; ++i) x[i] = (float)i;
  CHECK_STATUS(fixture_graph(&f, json_from(kWorkspaceJson)), MLF_OK, &f.err);
  CHECK_STATUS(fixture_init(&f, &g_test_lib, NULL, 0), MLF_OK, &f.ex.error);
  CHECK_STATUS(mlf_executor_set_input(&f.ex, 0, x, sizeof(x)), MLF_OK, NULL);
  /* No workspace bound: the operator gets NULL and fails, the run reports it. */
  mlf_workspace_bind(NULL);
  CHECK_STATUS(mlf_executor_run(&f.ex), MLF_ERR_OPERATOR, &f.ex.error);
  CHECK_STATUS(mlf_workspace_init(&ws, ws_mem, sizeof(ws_mem)), MLF_OK, NULL);
  mlf_workspace_bind(&ws);
  for (int round = 0; round < 3; ++round) {
    CHECK_STATUS(mlf_executor_run(&f.ex), MLF_OK, &f.ex.error);
    CHECK_EQ_INT(ws.top, 0);
  }
  /* 1 KiB and 2 KiB nested, and the first block's link. */
  CHECK_EQ_INT(mlf_workspace_high_water(&ws), 3 * 1024 + MLF_WORKSPACE_LINK_BYTES);
  CHECK_STATUS(mlf_executor_get_output(&f.ex, 0, y, sizeof(y)), MLF_OK, NULL);
  for (int i = 0; i < 16; ++i) CHECK(y[i] == x[i] + 100);
  mlf_workspace_bind(NULL);
  fixture_free(&f);
}

static void test_wide_operator(void) {
  fixture f;
  CHECK_STATUS(fixture_graph(&f, json_from(kWideJson)), MLF_OK, &f.err);
  CHECK_STATUS(fixture_init(&f, &g_test_lib, NULL, 0), MLF_OK, &f.ex.error);
  CHECK_EQ_INT(f.graph->max_op_args, 12);
  CHECK_EQ_INT(mlf_executor_num_inputs(&f.ex), 11);
  for (uint32_t i = 0; i < 11; ++i) {
    float v[2] = {(float)i, (float)(100 * i)};
    char name[8];
    snprintf(name, sizeof(name), "i%u", (unsigned)i);
    CHECK_STATUS(mlf_executor_set_input_by_name(&f.ex, name, strlen(name), v, sizeof(v)), MLF_OK,
                 NULL);
  }
  CHECK_STATUS(mlf_executor_run(&f.ex), MLF_OK, &f.ex.error);
  float out[2];
  CHECK_STATUS(mlf_executor_get_output(&f.ex, 0, out, sizeof(out)), MLF_OK, NULL);
  CHECK(out[0] == 55 && out[1] == 5500);
  fixture_free(&f);
}

static void test_scalar_operator(void) {
  fixture f;
  float in = 2.5f, out = 0;
  mlf_tensor_info info;
  CHECK_STATUS(fixture_graph(&f, json_from(kScalarJson)), MLF_OK, &f.err);
  CHECK_STATUS(fixture_init(&f, &g_test_lib, NULL, 0), MLF_OK, &f.ex.error);
  CHECK_STATUS(mlf_executor_input_info(&f.ex, 0, &info), MLF_OK, NULL);
  CHECK_EQ_INT(info.ndim, 0);
  CHECK_EQ_INT(info.nbytes, 4);
  CHECK_STATUS(mlf_executor_set_input(&f.ex, 0, &in, 4), MLF_OK, NULL);
  CHECK_STATUS(mlf_executor_run(&f.ex), MLF_OK, &f.ex.error);
  CHECK_STATUS(mlf_executor_get_output(&f.ex, 0, &out, 4), MLF_OK, NULL);
  CHECK(out == 7.5f);
  fixture_free(&f);
}

static void test_long_names_and_old_registry(void) {
  const char* param_name;
  const TVMModule* libs[] = {&g_test_lib, &g_test_lib_v08};
  for (int l = 0; l < 2; ++l) {
    fixture f;
    float x[4] = {1, 2, 3, 4}, p[4] = {5, 6, 7, 8}, out[4];
    CHECK_STATUS(fixture_graph(&f, long_names_json(&param_name)), MLF_OK, &f.err);
    int64_t shape[1] = {4};
    test_param params[] = {{param_name, {kDLFloat, 32, 1}, 1, shape, p, 16}};
    uint8_t blob[512];
    size_t len = test_params_write(params, 1, blob, sizeof(blob));
    CHECK_STATUS(fixture_init(&f, libs[l], blob, len), MLF_OK, &f.ex.error);
    CHECK_EQ_INT(mlf_executor_num_inputs(&f.ex), 1);
    CHECK_STATUS(mlf_executor_set_input(&f.ex, 0, x, sizeof(x)), MLF_OK, NULL);
    CHECK_STATUS(mlf_executor_run(&f.ex), MLF_OK, &f.ex.error);
    CHECK_STATUS(mlf_executor_get_output(&f.ex, 0, out, sizeof(out)), MLF_OK, NULL);
    for (int i = 0; i < 4; ++i) CHECK(out[i] == x[i] + 2 * p[i]);
    fixture_free(&f);
  }
}

static void test_accessors(void) {
  uint8_t blob[512];
  size_t len = basic_params(blob, sizeof(blob));
  fixture f;
  mlf_tensor_info info;
  uint32_t index = 99;
  float buf[5];
  CHECK_STATUS(fixture_graph(&f, json_from(kBasicJson)), MLF_OK, &f.err);
  CHECK_STATUS(fixture_init(&f, &g_test_lib, blob, len), MLF_OK, &f.ex.error);

  CHECK_STATUS(mlf_executor_input_info(&f.ex, 0, &info), MLF_OK, NULL);
  CHECK(info.name_len == 1 && info.name[0] == 'x');
  CHECK(info.ndim == 2 && info.shape[0] == 1 && info.shape[1] == 4 && info.nbytes == 16);
  CHECK(info.dtype.code == kDLFloat && info.dtype.bits == 32 && info.dtype.lanes == 1);
  CHECK_STATUS(mlf_executor_input_info(&f.ex, 1, &info), MLF_ERR_ARGUMENT, NULL);
  CHECK_STATUS(mlf_executor_input_info(&f.ex, 0, NULL), MLF_ERR_ARGUMENT, NULL);
  CHECK_STATUS(mlf_executor_output_info(&f.ex, 1, &info), MLF_OK, NULL);
  CHECK(info.name == NULL && info.ndim == 2 && info.nbytes == 16);
  CHECK_STATUS(mlf_executor_output_info(&f.ex, 3, &info), MLF_ERR_ARGUMENT, NULL);

  CHECK_STATUS(mlf_executor_input_index(&f.ex, "x", 1, &index), MLF_OK, NULL);
  CHECK_EQ_INT(index, 0);
  CHECK_STATUS(mlf_executor_input_index(&f.ex, "p0", 2, &index), MLF_ERR_NOT_FOUND, NULL);
  CHECK_STATUS(mlf_executor_input_index(&f.ex, "xx", 2, &index), MLF_ERR_NOT_FOUND, NULL);
  CHECK_STATUS(mlf_executor_input_index(&f.ex, "x", 1, NULL), MLF_ERR_ARGUMENT, NULL);
  CHECK_STATUS(mlf_executor_set_input_by_name(&f.ex, "y", 1, kX, 16), MLF_ERR_NOT_FOUND, NULL);

  void* in = mlf_executor_input_data(&f.ex, 0);
  CHECK(in != NULL && ((uintptr_t)in & 63) == 0);
  CHECK(mlf_executor_input_data(&f.ex, 1) == NULL);
  if (in != NULL) memcpy(in, kX, sizeof(kX)); /* zero-copy input */
  CHECK_STATUS(mlf_executor_run(&f.ex), MLF_OK, &f.ex.error);
  const float* out = (const float*)mlf_executor_output_data(&f.ex, 2);
  CHECK(out != NULL && out[3] == kX[3] + kP0[3]);
  CHECK(mlf_executor_output_data(&f.ex, 3) == NULL);

  CHECK_STATUS(mlf_executor_set_input(&f.ex, 0, kX, 12), MLF_ERR_ARGUMENT, NULL);
  CHECK_STATUS(mlf_executor_set_input(&f.ex, 0, NULL, 16), MLF_ERR_ARGUMENT, NULL);
  CHECK_STATUS(mlf_executor_set_input(&f.ex, 1, kX, 16), MLF_ERR_ARGUMENT, NULL);
  CHECK_STATUS(mlf_executor_get_output(&f.ex, 0, buf, 20), MLF_ERR_ARGUMENT, NULL);
  CHECK_STATUS(mlf_executor_get_output(&f.ex, 3, buf, 16), MLF_ERR_ARGUMENT, NULL);
  CHECK(mlf_executor_error(&f.ex) == &f.ex.error && mlf_executor_error(NULL) == NULL);

  /* Before (or without) a successful init everything answers "out of order". */
  mlf_executor idle;
  memset(&idle, 0, sizeof(idle));
  CHECK_STATUS(mlf_executor_set_input(&idle, 0, kX, 16), MLF_ERR_STATE, NULL);
  CHECK_STATUS(mlf_executor_get_output(&idle, 0, buf, 16), MLF_ERR_STATE, NULL);
  CHECK_STATUS(mlf_executor_run(&idle), MLF_ERR_STATE, NULL);
  CHECK_STATUS(mlf_executor_run(NULL), MLF_ERR_STATE, NULL);
  CHECK_STATUS(mlf_executor_load_params(&idle, blob, len), MLF_ERR_STATE, NULL);
  CHECK_EQ_INT(mlf_executor_num_outputs(&idle), 0);
  CHECK(mlf_executor_input_data(&idle, 0) == NULL);
  fixture_free(&f);
}

/* The input's own memory may be handed to set_input (nothing to copy), and outputs read
 * into their own memory likewise. */
static void test_zero_copy_io(void) {
  fixture f;
  CHECK_STATUS(fixture_graph(&f, json_from(kWorkspaceJson)), MLF_OK, &f.err);
  CHECK_STATUS(fixture_init(&f, &g_test_lib, NULL, 0), MLF_OK, &f.ex.error);
  float* in = (float*)mlf_executor_input_data(&f.ex, 0);
  void* out = (void*)(uintptr_t)mlf_executor_output_data(&f.ex, 0);
  if (in == NULL || out == NULL) {
    CHECK(in != NULL && out != NULL);
    fixture_free(&f);
    return;
  }
  for (int i = 0; i < 16; ++i) in[i] = (float)i;
  CHECK_STATUS(mlf_executor_set_input(&f.ex, 0, in, 64), MLF_OK, NULL);
  CHECK(in[5] == 5);
  CHECK_STATUS(mlf_executor_get_output(&f.ex, 0, out, 64), MLF_OK, NULL);
  fixture_free(&f);
}

static void test_sizing_rules(void) {
  fixture f;
  CHECK_STATUS(fixture_graph(&f, json_from(kBasicJson)), MLF_OK, &f.err);
  const mlf_graph* g = f.graph;
  CHECK_EQ_INT(mlf_executor_state_bytes(g),
               MLF_EXECUTOR_STATE_BYTES(g->num_funcs, g->num_storage, g->max_op_args, g->num_args));
  CHECK_EQ_INT(mlf_executor_state_bytes(NULL), 0);
  size_t aligned, unaligned;
  CHECK_STATUS(mlf_executor_arena_bytes(g, NULL, 0, 1, &aligned), MLF_OK, NULL);
  CHECK_STATUS(mlf_executor_arena_bytes(g, NULL, 0, 0, &unaligned), MLF_OK, NULL);
  CHECK_EQ_INT(aligned, 6 * 64);
  CHECK_EQ_INT(unaligned, 6 * 64 + 63);
  CHECK_STATUS(mlf_executor_arena_bytes(NULL, NULL, 0, 0, &unaligned), MLF_ERR_ARGUMENT, NULL);
  uint8_t junk[8] = {0};
  CHECK_STATUS(mlf_executor_arena_bytes(g, junk, sizeof(junk), 0, &unaligned), MLF_ERR_PARAMS,
               NULL);

  /* Exact sizes work at any arena alignment; one byte less does not. */
  uint64_t* state = (uint64_t*)malloc(mlf_executor_state_bytes(g) + 8);
  uint8_t* arena = (uint8_t*)malloc(unaligned + 64);
  mlf_executor ex;
  for (int shift = 0; shift < 64; shift += 7) {
    CHECK_STATUS(mlf_executor_init(&ex, g, &g_test_lib, NULL, 0, state, mlf_executor_state_bytes(g),
                                   arena + shift, 6 * 64 + 63),
                 MLF_OK, &ex.error);
  }
  CHECK_STATUS(mlf_executor_init(&ex, g, &g_test_lib, NULL, 0, state, mlf_executor_state_bytes(g),
                                 (uint8_t*)MLF_ALIGN_UP((uintptr_t)arena, 64), aligned - 1),
               MLF_ERR_NO_MEMORY, &ex.error);
  CHECK_STATUS(mlf_executor_init(&ex, g, &g_test_lib, NULL, 0, state,
                                 mlf_executor_state_bytes(g) - 1, arena, unaligned),
               MLF_ERR_NO_MEMORY, &ex.error);
  CHECK_STATUS(mlf_executor_init(&ex, g, &g_test_lib, NULL, 0, (uint8_t*)state + 4,
                                 mlf_executor_state_bytes(g), arena, unaligned),
               MLF_ERR_ARGUMENT, &ex.error);
  CHECK_STATUS(mlf_executor_init(&ex, g, NULL, NULL, 0, state, mlf_executor_state_bytes(g), arena,
                                 unaligned),
               MLF_ERR_ARGUMENT, &ex.error);
  CHECK_STATUS(mlf_executor_init(&ex, NULL, &g_test_lib, NULL, 0, state, 1000, arena, unaligned),
               MLF_ERR_ARGUMENT, &ex.error);
  CHECK_STATUS(mlf_executor_init(NULL, g, &g_test_lib, NULL, 0, state, 1000, arena, unaligned),
               MLF_ERR_ARGUMENT, NULL);
  free(state);
  free(arena);
  fixture_free(&f);
}

/* A copy of kBasicTables whose arrays can be corrupted one field at a time. */
typedef struct {
  mlf_graph g;
  mlf_op ops[4];
  uint16_t op_args[10];
  mlf_view views[7];
  int64_t shapes[3];
  uint32_t storage[6];
  mlf_arg args[2];
  uint32_t outputs[3];
} tables_copy;

static void copy_tables(tables_copy* t) {
  t->g = kBasicTables;
  memcpy(t->ops, kBasicTables.ops, sizeof(t->ops));
  memcpy(t->op_args, kBasicTables.op_args, sizeof(t->op_args));
  memcpy(t->views, kBasicTables.views, sizeof(t->views));
  memcpy(t->shapes, kBasicTables.shapes, sizeof(t->shapes));
  memcpy(t->storage, kBasicTables.storage_bytes, sizeof(t->storage));
  memcpy(t->args, kBasicTables.args, sizeof(t->args));
  memcpy(t->outputs, kBasicTables.outputs, sizeof(t->outputs));
  t->g.ops = t->ops;
  t->g.op_args = t->op_args;
  t->g.views = t->views;
  t->g.shapes = t->shapes;
  t->g.storage_bytes = t->storage;
  t->g.args = t->args;
  t->g.outputs = t->outputs;
}

static void test_hostile_tables(void) {
  enum { CASES = 17 };
  uint64_t state[256];
  uint8_t arena[2048];
  for (int c = 0; c < CASES; ++c) {
    tables_copy t;
    mlf_executor ex;
    copy_tables(&t);
    switch (c) {
      case 0:
        t.ops[1].first_arg = 9;
        break; /* args run past op_args */
      case 1:
        t.ops[0].func = 3;
        break; /* no such function */
      case 2:
        t.op_args[4] = 7;
        break; /* no such view */
      case 3:
        t.views[2].storage = 6;
        break; /* no such storage */
      case 4:
        t.views[3].shape = 3;
        break; /* shape past the dims */
      case 5:
        t.shapes[2] = 5;
        break; /* view bigger than its pool */
      case 6:
        t.shapes[0] = -1;
        break; /* negative dimension */
      case 7:
        t.storage[0] = 15;
        break; /* pool smaller than its view */
      case 8:
        t.args[1].view = 70;
        break; /* no such view */
      case 9:
        t.outputs[2] = 7;
        break; /* no such view */
      case 10:
        t.ops[2].num_args = 13;
        break; /* more than max_op_args */
      case 11:
        t.ops[2].num_outputs = 4;
        break; /* more outputs than args */
      case 12:
        t.g.views = NULL;
        break; /* missing table */
      case 13:
        t.views[0].dtype.bits = 0;
        break; /* empty dtype */
      case 14:
        t.g.num_views = 0x10000;
        break; /* beyond the state's limits */
      case 15:
        t.shapes[1] = (int64_t)1 << 40;
        break; /* size overflows */
      default:
        t.ops[1].num_args = 3;
        break; /* a copy with three arguments */
    }
    mlf_status status = mlf_executor_init(&ex, &t.g, &g_test_lib, NULL, 0, state, sizeof(state),
                                          arena, sizeof(arena));
    if (status != MLF_ERR_GRAPH) fprintf(stderr, "hostile tables case %d\n", c);
    CHECK_STATUS(status, MLF_ERR_GRAPH, &ex.error);
    size_t bytes;
    CHECK_STATUS(mlf_executor_arena_bytes(&t.g, NULL, 0, 0, &bytes), MLF_ERR_GRAPH, NULL);
  }
}

static void test_chain_of_400(void) {
  fixture f;
  float x[256], out[256];
  CHECK_STATUS(fixture_graph(&f, chain_json(400)), MLF_OK, &f.err);
  CHECK_STATUS(fixture_init(&f, &g_test_lib, NULL, 0), MLF_OK, &f.ex.error);
  for (int i = 0; i < 256; ++i) x[i] = (float)i / 256;
  CHECK_STATUS(mlf_executor_set_input(&f.ex, 0, x, sizeof(x)), MLF_OK, NULL);
  g_op_calls = 0;
  CHECK_STATUS(mlf_executor_run(&f.ex), MLF_OK, &f.ex.error);
  CHECK_EQ_INT(g_op_calls, 400);
  CHECK_STATUS(mlf_executor_get_output(&f.ex, 0, out, sizeof(out)), MLF_OK, NULL);
  for (int i = 0; i < 256; ++i) CHECK(fabsf(out[i] - 401 * x[i]) <= 1e-3f * (1 + x[i]));
  CHECK_EQ_INT(f.arena_size, 3 * 1024 + 63);
  fixture_free(&f);
}

int main(void) {
  RUN(test_json_and_tables_agree);
  RUN(test_load_params_later);
  RUN(test_params_in_place_vs_copied);
  RUN(test_params_in_tables);
  RUN(test_functions_in_tables);
  RUN(test_functions_linked_without_names);
  RUN(test_params_mismatch);
  RUN(test_missing_function);
  RUN(test_failing_operator);
  RUN(test_workspace_operator);
  RUN(test_wide_operator);
  RUN(test_scalar_operator);
  RUN(test_long_names_and_old_registry);
  RUN(test_accessors);
  RUN(test_zero_copy_io);
  RUN(test_sizing_rules);
  RUN(test_hostile_tables);
  RUN(test_chain_of_400);
  return test_finish();
}
