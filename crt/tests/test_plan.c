/*
 * test_plan.c — tables that carry the generator's liveness plan (mlf_graph.placed, windows):
 * pools at planned offsets sharing bytes over time, each operator's workspace window lent to
 * the bound workspace for its call, a request beyond the window refused (under ASan: the
 * window ends where the malloc'd arena ends, so a write past it would be caught), and the
 * plan's own refusals (an unplaced pool, a misaligned offset, an arena too small).
 */
#include <stdlib.h>
#include <string.h>

#include "../src/mlf_internal.h"
#include "test_util.h"

/*
 * x [16] f32 -> op_fill_workspace (3 KiB of nested workspace) -> y [16] -> op_scale2 -> z [16]
 * Plan: x at 0, y at 64; operator 0's window (windows[1]) at 128 (3136 B: 1024 + 2048 + the
 * first block's link, rounded up to 64 as the generator plans it); z at 128 too (it is written
 * by operator 1, after operator 0's window is dead); operator 1 has the empty window
 * (windows[0]). Arena 3264 B.
 */
static const int64_t kShape[] = {16};
static const mlf_view kViews[] = {
    {0, 0, 1, 0, {kDLFloat, 32, 1}},
    {0, 1, 1, 0, {kDLFloat, 32, 1}},
    {0, 2, 1, 0, {kDLFloat, 32, 1}},
};
static const mlf_op kOps[] = {{0, 2, 1, 1, 0, 1}, {1, 2, 1, 0, 2, 2}};
static const uint16_t kOpArgs[] = {0, 1, 1, 2};
static const uint32_t kStorage[] = {64, 64, 64};
static const mlf_arg kArgs[] = {{{"x", 1}, 0, 0}};
static const uint32_t kOutputs[] = {2};
/* out = in + 100 over 1 KiB and then 2 KiB of workspace, every byte of both written (so
 * that a block handed out beyond the window would be written beyond the arena). */
static int32_t op_fill_workspace(TVMValue* args, int* codes, int num_args, TVMValue* ret,
                                 int* ret_code, void* resource) {
  (void)codes, (void)ret, (void)ret_code, (void)resource;
  if (num_args != 2) return -1;
  const DLTensor* in = (const DLTensor*)args[0].v_handle;
  const DLTensor* out = (const DLTensor*)args[1].v_handle;
  float* first = (float*)TVMBackendAllocWorkspace(kDLCPU, 0, 1024, kDLFloat, 32);
  if (first == NULL) return -1;
  float* second = (float*)TVMBackendAllocWorkspace(kDLCPU, 0, 2048, kDLFloat, 32);
  if (second == NULL) return -1;
  memset(first, 0, 1024);
  memset(second, 0, 2048);
  for (int i = 0; i < 16; ++i) {
    first[i] = ((const float*)in->data)[i] + 60;
    second[i] = first[i] + 40;
    ((float*)out->data)[i] = second[i];
  }
  if (TVMBackendFreeWorkspace(kDLCPU, 0, second) != 0) return -1;
  return TVMBackendFreeWorkspace(kDLCPU, 0, first);
}

static const TVMBackendPackedCFunc kFuncs[] = {(TVMBackendPackedCFunc)op_fill_workspace,
                                               (TVMBackendPackedCFunc)op_scale2};
#define WINDOW_AT 128u
#define NEED_BYTES (1024u + 2048u + MLF_WORKSPACE_LINK_BYTES)
#define WINDOW_BYTES 3136u
#define ARENA_BYTES (WINDOW_AT + WINDOW_BYTES)

typedef struct {
  mlf_graph g;
  uint32_t placed[3];
  mlf_window windows[2];
  mlf_executor ex;
  void* state;
  size_t state_size;
  uint8_t* arena; /* malloc'd at exactly the plan's size, 64-byte aligned */
  size_t arena_size;
} planned_graph;

static void planned_init(planned_graph* p, uint32_t window_bytes) {
  static const mlf_graph kTables = {
      .num_nodes = 3,
      .num_ops = 2,
      .ops = kOps,
      .num_op_args = 4,
      .op_args = kOpArgs,
      .max_op_args = 2,
      .num_funcs = 2,
      .num_views = 3,
      .views = kViews,
      .num_shape_dims = 1,
      .shapes = kShape,
      .num_storage = 3,
      .storage_bytes = kStorage,
      .num_args = 1,
      .args = kArgs,
      .num_outputs = 1,
      .outputs = kOutputs,
      .func_ptrs = kFuncs,
      .arena_bytes = ARENA_BYTES,
  };
  memset(p, 0, sizeof(*p));
  p->g = kTables;
  p->placed[0] = 0;
  p->placed[1] = 64;
  p->placed[2] = WINDOW_AT;
  /* The window ends where the arena ends: a write beyond it leaves the allocation. */
  p->windows[1].offset = ARENA_BYTES - window_bytes;
  p->windows[1].bytes = window_bytes;
  p->g.num_placed = 3;
  p->g.placed = p->placed;
  p->g.num_windows = 2;
  p->g.windows = p->windows;
  p->state_size = mlf_executor_state_bytes(&p->g);
  p->state = malloc(p->state_size);
  p->arena_size = ARENA_BYTES;
  p->arena = (uint8_t*)aligned_alloc(64, p->arena_size);
}

static void planned_free(planned_graph* p) {
  free(p->state);
  free(p->arena);
}

static mlf_status planned_start(planned_graph* p) {
  return mlf_executor_init_linked(&p->ex, &p->g, p->state, p->state_size, p->arena, p->arena_size);
}

static void set_x(planned_graph* p) {
  float x[16];
  for (int i = 0; i < 16; ++i) x[i] = (float)i;
  CHECK_STATUS(mlf_executor_set_input(&p->ex, 0, x, sizeof(x)), MLF_OK, &p->ex.error);
}

/* Pools where the plan put them, each operator's window lent to the bound workspace for its
 * call, and the workspace left empty afterwards (its memory is the windows'). */
static void test_planned_run(void) {
  planned_graph p;
  mlf_workspace ws;
  float z[16];
  size_t bytes = 0;
  planned_init(&p, WINDOW_BYTES);
  CHECK_STATUS(mlf_executor_arena_bytes(&p.g, NULL, 0, 1, &bytes), MLF_OK, NULL);
  CHECK_EQ_INT(bytes, ARENA_BYTES);
  CHECK_STATUS(planned_start(&p), MLF_OK, &p.ex.error);
  CHECK(p.ex.storage[0] == p.arena && p.ex.storage[1] == p.arena + 64);
  CHECK(p.ex.storage[2] == p.arena + WINDOW_AT);
  CHECK_STATUS(mlf_workspace_init(&ws, NULL, 0), MLF_OK, NULL); /* empty: the windows serve */
  uint32_t marks[3] = {7, 7, 7};
  mlf_workspace_watch(&ws, marks, 2); /* the third stays untouched */
  mlf_workspace_bind(&ws);
  set_x(&p);
  for (int round = 0; round < 2; ++round) { /* the input survives a run: run again */
    CHECK_STATUS(mlf_executor_run(&p.ex), MLF_OK, &p.ex.error);
    /* Each call's own figure: the least window it runs in. */
    CHECK(marks[0] == NEED_BYTES && marks[1] == 0 && marks[2] == 7);
    CHECK_STATUS(mlf_executor_get_output(&p.ex, 0, z, sizeof(z)), MLF_OK, NULL);
    for (int i = 0; i < 16; ++i) CHECK(z[i] == 2 * ((float)i + 100));
  }
  CHECK(ws.base == p.arena && ws.size == 0 && ws.top == 0); /* left empty: windows[0] */
  CHECK_EQ_INT(mlf_workspace_high_water(&ws), NEED_BYTES);
  CHECK(mlf_workspace_bound() == &ws);
  /* An arena one block short is refused before anything is laid out. */
  CHECK_STATUS(
      mlf_executor_init_linked(&p.ex, &p.g, p.state, p.state_size, p.arena, ARENA_BYTES - 64),
      MLF_ERR_NO_MEMORY, &p.ex.error);
  mlf_workspace_bind(NULL);
  planned_free(&p);
}

/* A window one block short of what the operator asks (3072 B: its blocks without the link):
 * the request is refused, the operator fails with the reason, nothing is written outside the
 * window (ASan), the workspace is given back, the call's figure is what it asked for (more
 * than its window), and the next run with a window that fits works. */
static void test_request_beyond_window(void) {
  planned_graph p;
  mlf_workspace ws;
  float y_before[16];
  planned_init(&p, WINDOW_BYTES - 64);
  CHECK_STATUS(planned_start(&p), MLF_OK, &p.ex.error);
  CHECK_STATUS(mlf_workspace_init(&ws, NULL, 0), MLF_OK, NULL);
  uint32_t marks[2] = {0, 0};
  mlf_workspace_watch(&ws, marks, 2);
  mlf_workspace_bind(&ws);
  set_x(&p);
  memset(p.ex.storage[1], 0x5A, 64);
  memcpy(y_before, p.ex.storage[1], sizeof(y_before));
  CHECK_STATUS(mlf_executor_run(&p.ex), MLF_ERR_OPERATOR, &p.ex.error);
  CHECK_EQ_INT(p.ex.error.node, 1);
  CHECK_EQ_INT(p.ex.error.why, MLF_WHY_WORKSPACE_WINDOW);
  CHECK(memcmp(y_before, p.ex.storage[1], sizeof(y_before)) == 0); /* nothing written */
  CHECK(ws.size == 0 && ws.top == 0 && ws.depth == 0 && ws.refused == 0);
  CHECK(marks[0] == NEED_BYTES && NEED_BYTES > WINDOW_BYTES - 64);
  char message[200];
  mlf_error_format(&p.ex.error, message, sizeof(message));
  CHECK(strstr(message, "window") != NULL);
  /* No workspace bound at all: the operator's request is refused as before. */
  mlf_workspace_bind(NULL);
  CHECK_STATUS(mlf_executor_run(&p.ex), MLF_ERR_OPERATOR, &p.ex.error);
  CHECK_EQ_INT(p.ex.error.why, MLF_WHY_OPERATOR_FAILED);
  planned_free(&p);
  planned_init(&p, WINDOW_BYTES);
  CHECK_STATUS(planned_start(&p), MLF_OK, &p.ex.error);
  mlf_workspace_bind(&ws);
  set_x(&p);
  CHECK_STATUS(mlf_executor_run(&p.ex), MLF_OK, &p.ex.error);
  mlf_workspace_bind(NULL);
  planned_free(&p);
}

/* What the plan itself may get wrong: a pool it gives no place, a misaligned offset. */
static void test_plan_refusals(void) {
  planned_graph p;
  size_t bytes;
  planned_init(&p, WINDOW_BYTES);
  p.g.num_placed = 2; /* z's pool is neither placed nor bound */
  CHECK_STATUS(planned_start(&p), MLF_ERR_GRAPH, &p.ex.error);
  CHECK_EQ_INT(p.ex.error.why, MLF_WHY_UNPLACED_POOL);
  CHECK_STATUS(mlf_executor_arena_bytes(&p.g, NULL, 0, 1, &bytes), MLF_ERR_GRAPH, NULL);
  p.g.num_placed = 4; /* more than the pools */
  CHECK_STATUS(planned_start(&p), MLF_ERR_GRAPH, &p.ex.error);
  p.g.num_placed = 3;
  p.placed[1] = 32;
  CHECK_STATUS(planned_start(&p), MLF_ERR_GRAPH, &p.ex.error);
  CHECK_EQ_INT(p.ex.error.why, MLF_WHY_PLAN);
  p.placed[1] = 64;
  p.windows[1].offset += 8;
  CHECK_STATUS(planned_start(&p), MLF_ERR_GRAPH, &p.ex.error);
  CHECK_EQ_INT(p.ex.error.why, MLF_WHY_PLAN);
  p.windows[1].offset -= 8;
  p.g.num_windows = 1; /* operator 0's window index beyond the table */
  CHECK_STATUS(planned_start(&p), MLF_ERR_GRAPH, &p.ex.error);
  CHECK_EQ_INT(p.ex.error.node, 1);
  p.g.num_windows = 2;
  p.windows[0].bytes = 64; /* windows[0] must be the empty window */
  CHECK_STATUS(planned_start(&p), MLF_ERR_GRAPH, &p.ex.error);
  p.windows[0].bytes = 0;
  p.g.arena_bytes -= 64; /* the window would end beyond the plan's arena */
  CHECK_STATUS(planned_start(&p), MLF_ERR_GRAPH, &p.ex.error);
  CHECK_EQ_INT(p.ex.error.why, MLF_WHY_PLAN);
  planned_free(&p);
}

int main(void) {
  RUN(test_planned_run);
  RUN(test_request_beyond_window);
  RUN(test_plan_refusals);
  return test_finish();
}
