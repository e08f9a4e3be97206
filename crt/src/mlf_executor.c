/*
 * mlf_executor.c — the graph executor over mlf_graph tables.
 *
 * Everything that needs names or validation happens once in mlf_executor_init(): functions
 * are resolved, tables are checked so that no operator can be handed a tensor larger than
 * its pool and storage is laid out. mlf_executor_run() is then a loop of "fill a DLTensor per
 * argument from its view, make one indirect call": DLTensors exist only for the operator
 * being called, so the state does not grow with the graph's views (KWS: 2.3 KB less RAM).
 */
#include <stddef.h>
#include <string.h>

#include "mlf_internal.h"

enum { ARG_INPUT = 0, ARG_COPIED = 1, ARG_IN_PLACE = 2 };

/* Firmware whose graphs have no workspace windows (none of its operators allocates, or every
 * graph is parsed from JSON) is built with MLF_WINDOWS=0: the lending is not linked, and
 * mlf_graph_check refuses tables with windows. */
#ifndef MLF_WINDOWS
#define MLF_WINDOWS 1
#endif

/* Also the JSON parser's and the registry's: the one file every firmware links. */
int mlf_name_equal(mlf_name a, mlf_name b) {
  if (a.len != b.len) return 0;
  for (uint32_t i = 0; i < a.len; ++i) {
    if (a.str[i] != b.str[i]) return 0;
  }
  return 1;
}

size_t mlf_dtype_bytes(DLDataType dtype) { return ((size_t)dtype.bits * dtype.lanes + 7) / 8; }

/* Bytes of a view; UINT64_MAX when a dimension is negative or the size exceeds 4 GiB. */
static uint64_t view_bytes(const mlf_graph* g, const mlf_view* v) {
  uint64_t bytes = mlf_dtype_bytes(v->dtype);
  for (uint32_t d = 0; d < v->ndim; ++d) {
    uint64_t dim = (uint64_t)g->shapes[v->shape + d]; /* negative: huge, rejected below */
    if (dim > UINT32_MAX || (bytes *= dim) > UINT32_MAX) return UINT64_MAX;
  }
  return bytes;
}

/* The state holds per-func, per-view, per-storage, per-arg and per-argument-slot arrays:
 * these limits keep its size far from overflowing a 32-bit size_t. */
static int too_large(const mlf_graph* g) {
  return (g->num_funcs | g->num_views | g->num_storage | g->num_args | g->max_op_args) > 0xFFFF;
}

const uint8_t mlf_graph_tables[MLF_GRAPH_TABLES][3] = {
    {offsetof(mlf_graph, num_ops), offsetof(mlf_graph, ops), sizeof(mlf_op)},
    {offsetof(mlf_graph, num_op_args), offsetof(mlf_graph, op_args), sizeof(uint16_t)},
    {offsetof(mlf_graph, num_funcs), offsetof(mlf_graph, funcs), sizeof(mlf_name)},
    {offsetof(mlf_graph, num_views), offsetof(mlf_graph, views), sizeof(mlf_view)},
    {offsetof(mlf_graph, num_shape_dims), offsetof(mlf_graph, shapes), sizeof(int64_t)},
    {offsetof(mlf_graph, num_storage), offsetof(mlf_graph, storage_bytes), sizeof(uint32_t)},
    {offsetof(mlf_graph, num_args), offsetof(mlf_graph, args), sizeof(mlf_arg)},
    {offsetof(mlf_graph, num_outputs), offsetof(mlf_graph, outputs), sizeof(uint32_t)},
};

/* A table may only be NULL when its count is 0; the names too when functions are bound. */
static int tables_present(const mlf_graph* g) {
  for (int i = 0; i < MLF_GRAPH_TABLES; ++i) {
    uint32_t count;
    const void* table;
    memcpy(&count, (const uint8_t*)g + mlf_graph_tables[i][0], sizeof(count));
    memcpy(&table, (const uint8_t*)g + mlf_graph_tables[i][1], sizeof(table));
    int optional = mlf_graph_tables[i][1] == offsetof(mlf_graph, funcs) && g->func_ptrs != NULL;
    if (count != 0 && table == NULL && !optional) return 0;
  }
  return 1;
}

/* A function's name for error reports; none (NULL) when the tables bind functions without
 * names: the report then names the node alone, and the host may know its function. */
static mlf_name func_name(const mlf_graph* g, uint32_t func) {
  mlf_name none = {NULL, 0};
  return g->funcs != NULL && g->funcs[func].len != 0 ? g->funcs[func] : none;
}

static int view_ok(const mlf_graph* g, const mlf_view* v) {
  /* The guarantee operators rely on: every view lies inside its pool. */
  return v->storage < g->num_storage && v->shape <= g->num_shape_dims &&
         v->ndim <= g->num_shape_dims - v->shape && v->dtype.bits != 0 && v->dtype.lanes != 0 &&
         view_bytes(g, v) <= g->storage_bytes[v->storage];
}

static int op_ok(const mlf_graph* g, const mlf_op* op) {
  const uint16_t* args = g->op_args + op->first_arg;
  if ((op->func >= g->num_funcs && op->func != MLF_FUNC_COPY) || op->num_args > g->max_op_args ||
      op->first_arg > g->num_op_args || op->num_args > g->num_op_args - op->first_arg ||
      op->num_outputs > op->num_args) {
    return 0;
  }
  for (uint32_t k = 0; k < op->num_args; ++k) {
    if (args[k] >= g->num_views) return 0;
  }
  if (g->windows != NULL && op->window >= g->num_windows) return 0; /* read only with them */
  return op->func != MLF_FUNC_COPY ||
         (op->num_args == 2 && op->num_outputs == 1 &&
          view_bytes(g, &g->views[args[0]]) == view_bytes(g, &g->views[args[1]]));
}

static int storage_written(const mlf_graph* g, uint32_t sid);

/* A pool bound to constant data: viewed by at most one arg (then bound, never an input; the
 * generator leaves a bound param's arg out), written by no operator, aligned. */
static int constant_pool_ok(const mlf_graph* g, uint32_t sid) {
  uint32_t viewers = 0;
  for (uint32_t a = 0; a < g->num_args; ++a) {
    viewers += g->views[g->args[a].view].storage == sid;
  }
  return viewers <= 1 && !storage_written(g, sid) &&
         ((uintptr_t)g->storage_data[sid] & (MLF_STORAGE_ALIGN - 1)) == 0;
}

/* A placed pool or window: on the 64-byte grid and inside the plan's arena. */
static int in_plan(const mlf_graph* g, uint32_t offset, uint32_t bytes) {
  return (offset & (MLF_STORAGE_ALIGN - 1)) == 0 && (uint64_t)offset + bytes <= g->arena_bytes;
}

/* Tables may come from the generator, the JSON parser or a hand: trust none of them. */
mlf_status mlf_graph_check(const mlf_graph* g, mlf_error* err) {
  mlf_why why = MLF_WHY_TABLES;
  uint32_t node = UINT32_MAX, i;
  if (too_large(g) || !tables_present(g)) goto bad;
  why = MLF_WHY_VIEW;
  for (i = 0; i < g->num_views; ++i) {
    if (!view_ok(g, &g->views[i])) goto bad;
  }
  why = MLF_WHY_OPERATOR_TABLE;
  for (i = 0; i < g->num_ops; ++i) {
    node = g->ops[i].node;
    if (!op_ok(g, &g->ops[i])) goto bad;
  }
  why = MLF_WHY_ARG_VIEW;
  for (i = 0; i < g->num_args; ++i) {
    node = g->args[i].node;
    if (g->args[i].view >= g->num_views) goto bad;
  }
  node = UINT32_MAX;
  for (i = 0; i < g->num_outputs; ++i) {
    if (g->outputs[i] >= g->num_views) goto bad;
  }
  why = MLF_WHY_TABLES;
  for (i = 0; g->storage_data != NULL && i < g->num_storage; ++i) {
    if (g->storage_data[i] != NULL && !constant_pool_ok(g, i)) goto bad;
  }
  /* The plan: its pools and windows inside its arena, windows[0] the empty window. */
  why = MLF_WHY_PLAN;
  if (g->num_placed > g->num_storage || (g->num_placed != 0 && g->placed == NULL) ||
      (g->windows != NULL && (!MLF_WINDOWS || g->num_windows == 0 || g->windows[0].bytes != 0))) {
    goto bad;
  }
  for (i = 0; i < g->num_placed; ++i) {
    if (!in_plan(g, g->placed[i], g->storage_bytes[i])) goto bad;
  }
  for (i = 0; g->windows != NULL && i < g->num_windows; ++i) {
    if (!in_plan(g, g->windows[i].offset, g->windows[i].bytes)) goto bad;
  }
  return MLF_OK;
bad:
  mlf_fail(err, MLF_ERR_GRAPH, why);
  err->node = node;
  return MLF_ERR_GRAPH;
}

/* ---- state -------------------------------------------------------------------------------- */

static void* carve(uintptr_t* at, size_t bytes) {
  void* block = (void*)*at;
  *at += MLF_ALIGN_UP(bytes, 8);
  return block;
}

/* Lays the state out from `at` (the figures of MLF_EXECUTOR_STATE_BYTES); returns its end. */
static uintptr_t carve_state(mlf_executor* ex, uintptr_t at) {
  const mlf_graph* g = ex->graph;
  ex->funcs = (TVMBackendPackedCFunc*)carve(&at, g->num_funcs * sizeof(TVMBackendPackedCFunc));
  ex->call_tensors = (DLTensor*)carve(&at, g->max_op_args * sizeof(DLTensor));
  ex->storage = (uint8_t**)carve(&at, g->num_storage * sizeof(uint8_t*));
  ex->values = (TVMValue*)carve(&at, g->max_op_args * sizeof(TVMValue));
  ex->type_codes = (int*)carve(&at, g->max_op_args * sizeof(int));
  ex->arg_flags = (uint8_t*)carve(&at, g->num_args);
  ex->input_args = (const uint32_t*)carve(&at, g->num_args * sizeof(uint32_t));
  return at;
}

size_t mlf_executor_state_bytes(const mlf_graph* g) {
  mlf_executor sizing;
  if (g == NULL) return 0;
  if (too_large(g)) return SIZE_MAX; /* refused by mlf_graph_check() anyway */
  sizing.graph = g;
  return carve_state(&sizing, 0);
}

/* ---- params ------------------------------------------------------------------------------ */

static int param_fits(const mlf_graph* g, const mlf_view* v, const mlf_param* p) {
  if (p->ndim != v->ndim || !mlf_same_dtype(p->dtype, v->dtype)) return 0;
  for (uint32_t d = 0; d < v->ndim; ++d) {
    if (mlf_read_i64(p->shape + 8 * d) != g->shapes[v->shape + d]) return 0;
  }
  return 1;
}

/* 1 when some operator (__copy included) writes storage sid. */
static int storage_written(const mlf_graph* g, uint32_t sid) {
  for (uint32_t i = 0; i < g->num_ops; ++i) {
    const mlf_op* op = &g->ops[i];
    for (uint32_t k = op->num_args - op->num_outputs; k < op->num_args; ++k) {
      if (g->views[g->op_args[op->first_arg + k]].storage == sid) return 1;
    }
  }
  return 0;
}

/*
 * The params data that storage `sid` can use where it lies, or NULL. The rule (mirrored by
 * the generator, see mlf_executor_arena_bytes in the header): exactly one graph arg uses the
 * storage, no operator writes it, a param of that arg's name exists (the first one in the
 * blob), matches its shape and dtype, covers the whole pool and starts 64-byte aligned.
 * The blob was validated by the caller.
 */
static const uint8_t* in_place_data(const mlf_graph* g, uint32_t sid, const void* params,
                                    size_t len) {
  const mlf_arg* owner = NULL;
  mlf_params_iter it;
  mlf_param p;
  if (params == NULL) return NULL;
  for (uint32_t a = 0; a < g->num_args; ++a) {
    if (g->views[g->args[a].view].storage != sid) continue;
    if (owner != NULL) return NULL;
    owner = &g->args[a];
  }
  if (owner == NULL || storage_written(g, sid)) return NULL;
  mlf_params_open(params, len, &it, NULL);
  while (mlf_params_next(&it, &p)) {
    if (!mlf_name_equal(p.name, owner->name)) continue;
    if (!param_fits(g, &g->views[owner->view], &p) || p.nbytes < g->storage_bytes[sid] ||
        ((uintptr_t)p.data & (MLF_STORAGE_ALIGN - 1)) != 0) {
      return NULL;
    }
    return p.data;
  }
  return NULL;
}

/* In 64 bits: the sum of hostile pool sizes may exceed a 32-bit size_t (MLF_ALIGN_UP's mask). */
static uint64_t align64(uint64_t offset) { return (offset + 63) & ~(uint64_t)63; }

/* Where a pool's params lie in a blob (in_place_data), or NULL: none is looked at. A pointer,
 * so that firmware whose params the tables bind never links the blob reader. */
typedef const uint8_t* (*in_place_fn)(const mlf_graph* g, uint32_t sid, const void* params,
                                      size_t len);

/* 1 when the tables carry the generator's liveness plan (mlf_graph.placed, windows). */
static int planned(const mlf_graph* g) { return g->placed != NULL || g->windows != NULL; }

/* Returned by plan_storage for a pool that is neither bound nor placed by the plan. */
#define UNPLACED UINT64_MAX

/* Lays storage out from the arena address `start` (a 64-byte boundary) into bases (NULL:
 * only measures); returns the arena bytes used from start (the plan's, windows included), or
 * UNPLACED. `trusted`: tables the generator checked (linked, not checked again), whose plan
 * places every pool they do not bind. Addresses are computed as integers: the caller checks
 * that they fit the arena before any is used. */
static uint64_t plan_storage(const mlf_graph* g, in_place_fn lookup, const void* params, size_t len,
                             uintptr_t start, uint8_t** bases, int trusted) {
  uint64_t offset = 0;
  int plan = planned(g);
  for (uint32_t sid = 0; sid < g->num_storage; ++sid) {
    /* Operators never write params storage (see in_place_data): dropping const is safe. */
    uintptr_t data = 0;
    if (g->storage_data != NULL && g->storage_data[sid] != NULL) {
      data = (uintptr_t)g->storage_data[sid];
    } else if (lookup != NULL) {
      data = (uintptr_t)lookup(g, sid, params, len);
    }
    if (data == 0 && plan) {
      if (!trusted && sid >= g->num_placed) return UNPLACED;
      data = start + g->placed[sid];
    } else if (data == 0) {
      offset = align64(offset);
      data = start + (uintptr_t)offset;
      offset += g->storage_bytes[sid];
    }
    if (bases != NULL) bases[sid] = (uint8_t*)data;
  }
  return plan ? g->arena_bytes : align64(offset);
}

/* What mlf_executor_init() and mlf_executor_arena_bytes() both refuse: bad tables, bad params. */
static mlf_status check_inputs(const mlf_graph* g, const void* params, size_t len, mlf_error* err) {
  mlf_params_iter it;
  if (mlf_graph_check(g, err) == MLF_OK && params != NULL) mlf_params_open(params, len, &it, err);
  return err->status;
}

mlf_status mlf_executor_arena_bytes(const mlf_graph* g, const void* params, size_t params_len,
                                    int arena_aligned, size_t* bytes) {
  mlf_error err;
  mlf_error_clear(&err);
  if (g == NULL || bytes == NULL) return MLF_ERR_ARGUMENT;
  if (check_inputs(g, params, params_len, &err) != MLF_OK) return err.status;
  uint64_t total = plan_storage(g, in_place_data, params, params_len, 0, NULL, 0);
  if (total == UNPLACED) return MLF_ERR_GRAPH;
  total += arena_aligned ? 0 : 63;
  if (total > SIZE_MAX) return MLF_ERR_NO_MEMORY;
  *bytes = (size_t)total;
  return MLF_OK;
}

/* The args not bound to params: the inputs, in arg order. */
static void list_inputs(mlf_executor* ex) {
  uint32_t* inputs = (uint32_t*)(uintptr_t)ex->input_args;
  ex->num_inputs = 0;
  for (uint32_t a = 0; a < ex->graph->num_args; ++a) {
    if (ex->arg_flags[a] == ARG_INPUT) inputs[ex->num_inputs++] = a;
  }
}

/* Copies (or, at init, recognises as bound in place) every param that names a graph arg;
 * then lists the args still left as inputs. */
static mlf_status bind_params(mlf_executor* ex, const void* params, size_t len, int loading) {
  const mlf_graph* g = ex->graph;
  mlf_params_iter it;
  mlf_param p;
  mlf_status status = MLF_OK;
  it.remaining = 0;
  if (params != NULL || loading) status = mlf_params_open(params, len, &it, &ex->error);
  while (status == MLF_OK && mlf_params_next(&it, &p)) {
    for (uint32_t a = 0; a < g->num_args && status == MLF_OK; ++a) {
      const mlf_view* v = &g->views[g->args[a].view];
      uint8_t* data = ex->storage[v->storage];
      if (!mlf_name_equal(g->args[a].name, p.name)) continue;
      if (!param_fits(g, v, &p)) {
        status = MLF_ERR_MISMATCH;
      } else if (data == p.data || ex->arg_flags[a] == ARG_IN_PLACE) {
        ex->arg_flags[a] = ARG_IN_PLACE; /* bound where it lies; later duplicates ignored */
        if (loading) status = MLF_ERR_UNSUPPORTED;
      } else {
        memcpy(data, p.data, (size_t)p.nbytes);
        ex->arg_flags[a] = ARG_COPIED;
      }
    }
    if (status != MLF_OK) {
      mlf_fail_about(&ex->error, status,
                     status == MLF_ERR_MISMATCH ? MLF_WHY_PARAM_MISMATCH : MLF_WHY_PARAM_IN_PLACE,
                     p.name.str, p.name.len);
    }
  }
  list_inputs(ex);
  return status;
}

/* ---- init ---------------------------------------------------------------------------------- */

/* How functions are found by name (mlf_module_lookup), or NULL: only the tables' addresses.
 * A pointer, so that firmware whose tables bind every function never links the registry. */
typedef mlf_status (*lookup_fn)(const TVMModule* lib, const char* name, size_t name_len,
                                TVMBackendPackedCFunc* fn);

/* Everything init does but reading a params blob (`lookup` NULL: no blob). */
static mlf_status init_core(mlf_executor* ex, const mlf_graph* g, const TVMModule* lib,
                            lookup_fn find, in_place_fn lookup, const void* params,
                            size_t params_len, void* state, size_t state_size, void* arena,
                            size_t arena_size, int trusted) {
  mlf_error* err = &ex->error;
  /* Carved before it is checked: nothing is written through the pointers until then. */
  if (carve_state(ex, (uintptr_t)state) - (uintptr_t)state > state_size) {
    return mlf_fail(err, MLF_ERR_NO_MEMORY, MLF_WHY_STATE_SMALL);
  }
  uintptr_t start = MLF_ALIGN_UP((uintptr_t)arena, MLF_STORAGE_ALIGN);
  size_t skip = (size_t)(start - (uintptr_t)arena);
  uint64_t need = plan_storage(g, lookup, params, params_len, start, ex->storage, trusted);
  if (need == UNPLACED) return mlf_fail(err, MLF_ERR_GRAPH, MLF_WHY_UNPLACED_POOL);
  if (arena_size < skip || need > arena_size - skip) {
    return mlf_fail(err, MLF_ERR_NO_MEMORY, MLF_WHY_ARENA_SMALL);
  }
  for (uint32_t i = 0; i < g->num_funcs; ++i) {
    mlf_name name = func_name(g, i);
    if (g->func_ptrs != NULL) {
      ex->funcs[i] = g->func_ptrs[i];
    } else if (find == NULL || find(lib, name.str, name.len, &ex->funcs[i]) != MLF_OK) {
      ex->funcs[i] = NULL;
    }
    if (ex->funcs[i] == NULL) {
      return mlf_fail_about(err, MLF_ERR_MISSING_FUNCTION, MLF_WHY_MISSING_FUNCTION, name.str,
                            name.len);
    }
  }
  ex->arena = (uint8_t*)start;
  ex->arena_size = arena_size - skip;
  /* Device, strides and byte_offset never change; run() fills the rest per call. */
  memset(ex->call_tensors, 0, g->max_op_args * sizeof(DLTensor));
  for (uint32_t k = 0; k < g->max_op_args; ++k) {
    ex->call_tensors[k].device.device_type = kDLCPU;
    /* TVM's graph executor passes NDArray handles, whose pointee starts with a DLTensor. */
    ex->type_codes[k] = kTVMNDArrayHandle;
  }
  memset(ex->arg_flags, ARG_INPUT, g->num_args);
  for (uint32_t a = 0; g->storage_data != NULL && a < g->num_args; ++a) {
    if (g->storage_data[g->views[g->args[a].view].storage] != NULL) {
      ex->arg_flags[a] = ARG_IN_PLACE;
    }
  }
  return MLF_OK;
}

static mlf_status init_arguments_ok(mlf_executor* ex, const mlf_graph* g, const TVMModule* lib,
                                    const void* state, const void* arena, size_t arena_size) {
  if (ex == NULL) return MLF_ERR_ARGUMENT;
  memset(ex, 0, sizeof(*ex));
  mlf_error_clear(&ex->error);
  if (g == NULL || (lib == NULL && g->func_ptrs == NULL) || state == NULL ||
      ((uintptr_t)state & 7u) != 0 || (arena == NULL && arena_size != 0)) {
    return mlf_fail(&ex->error, MLF_ERR_ARGUMENT, MLF_WHY_INIT_ARGUMENT);
  }
  ex->graph = g;
  return MLF_OK;
}

mlf_status mlf_executor_init(mlf_executor* ex, const mlf_graph* g, const TVMModule* lib,
                             const void* params, size_t params_len, void* state, size_t state_size,
                             void* arena, size_t arena_size) {
  mlf_status status = init_arguments_ok(ex, g, lib, state, arena, arena_size);
  if (status != MLF_OK) return status;
  if (check_inputs(g, params, params_len, &ex->error) != MLF_OK) return ex->error.status;
  status = init_core(ex, g, lib, mlf_module_lookup, in_place_data, params, params_len, state,
                     state_size, arena, arena_size, 0);
  if (status != MLF_OK || bind_params(ex, params, params_len, 0) != MLF_OK) {
    return ex->error.status;
  }
  ex->ready = 1;
  return MLF_OK;
}

/* mlf_graph_check, or NULL for tables checked when they were generated. A pointer, so that
 * firmware that never checks does not link the check. */
typedef mlf_status (*check_fn)(const mlf_graph* g, mlf_error* err);

/* The generator checks its tables by the same rules when it writes them
 * (project_api/generate/table_check.py); host builds check them again, microcontroller
 * builds need not (MLF_CHECK_TABLES in the generated CMakeLists.txt). */
#ifndef MLF_CHECK_LINKED_TABLES
#define MLF_CHECK_LINKED_TABLES 1
#endif
#if MLF_CHECK_LINKED_TABLES
#define LINKED_TABLES_CHECK mlf_graph_check
#else
#define LINKED_TABLES_CHECK NULL
#endif

static mlf_status init_without_blob(mlf_executor* ex, const mlf_graph* g, const TVMModule* lib,
                                    lookup_fn find, check_fn check, void* state, size_t state_size,
                                    void* arena, size_t arena_size) {
  mlf_status status = init_arguments_ok(ex, g, lib, state, arena, arena_size);
  if (status != MLF_OK) return status;
  if (check != NULL && check(g, &ex->error) != MLF_OK) return ex->error.status;
  status = init_core(ex, g, lib, find, NULL, NULL, 0, state, state_size, arena, arena_size,
                     check == NULL);
  if (status != MLF_OK) return status;
  list_inputs(ex);
  ex->ready = 1;
  return MLF_OK;
}

mlf_status mlf_executor_init_bound(mlf_executor* ex, const mlf_graph* g, const TVMModule* lib,
                                   void* state, size_t state_size, void* arena, size_t arena_size) {
  return init_without_blob(ex, g, lib, mlf_module_lookup, mlf_graph_check, state, state_size, arena,
                           arena_size);
}

mlf_status mlf_executor_init_linked(mlf_executor* ex, const mlf_graph* g, void* state,
                                    size_t state_size, void* arena, size_t arena_size) {
  return init_without_blob(ex, g, NULL, NULL, LINKED_TABLES_CHECK, state, state_size, arena,
                           arena_size);
}

mlf_status mlf_executor_load_params(mlf_executor* ex, const void* params, size_t params_len) {
  if (ex == NULL || !ex->ready) return MLF_ERR_STATE;
  mlf_error_clear(&ex->error);
  return bind_params(ex, params, params_len, 1);
}

/* ---- run ------------------------------------------------------------------------------------ */

/* With windows (mlf_graph.windows) the bound workspace serves the operator about to run from
 * window `index` (after the run: windows[0], the empty one, its memory having been the
 * windows'). Returns the requests refused in the window it had. */
static uint32_t lend_window(const mlf_executor* ex, uint32_t index) {
#if MLF_WINDOWS
  const mlf_window* windows = ex->graph->windows;
  mlf_workspace* ws = mlf_workspace_bound();
  if (windows == NULL || ws == NULL) return 0;
  return mlf_workspace_lend(ws, ex->arena + windows[index].offset, windows[index].bytes);
#else
  (void)ex;
  (void)index;
  return 0;
#endif
}

mlf_status mlf_executor_run(mlf_executor* ex) {
  if (ex == NULL || !ex->ready) return MLF_ERR_STATE;
  const mlf_graph* g = ex->graph;
  const mlf_op* op = g->ops;
  const mlf_op* end = op + g->num_ops;
  uint8_t* const* storage = ex->storage;
  TVMValue ret;
  int ret_code;
  size_t mark = mlf_workspace_mark();
  mlf_error_clear(&ex->error);
  for (; op != end; ++op) {
    const uint16_t* args = g->op_args + op->first_arg;
    int failed = 0;
    lend_window(ex, op->window);
#if MLF_WORKSPACE_MARKS
    size_t from = mlf_workspace_watch_begin();
#endif
    if (op->func == MLF_FUNC_COPY) {
      /* Views of one pool share its base; views of different pools never overlap. */
      const mlf_view* src = &g->views[args[0]];
      uint8_t* to = storage[g->views[args[1]].storage];
      if (to != storage[src->storage]) {
        memcpy(to, storage[src->storage], (size_t)view_bytes(g, src));
      }
    } else {
      for (uint32_t k = 0; k < op->num_args; ++k) {
        const mlf_view* v = &g->views[args[k]];
        DLTensor* t = &ex->call_tensors[k];
        t->data = storage[v->storage];
        t->ndim = v->ndim;
        t->dtype = v->dtype;
        /* Operators take int64_t* shapes but never write them: the tables may live in flash. */
        t->shape = (int64_t*)(uintptr_t)(g->shapes + v->shape);
        ex->values[k].v_handle = t; /* an operator may have reused its argument array */
      }
      failed =
          ex->funcs[op->func](ex->values, ex->type_codes, op->num_args, &ret, &ret_code, NULL) != 0;
    }
#if MLF_WORKSPACE_MARKS
    mlf_workspace_watch_end((uint32_t)(op - g->ops), from);
#endif
    if (failed) break;
  }
  uint32_t refused = lend_window(ex, 0);
  if (op == end) return MLF_OK;
  /* The operator may have returned between workspace allocations and frees. */
  mlf_workspace_release_to(mark);
  mlf_name name = func_name(g, op->func);
  mlf_fail_about(&ex->error, MLF_ERR_OPERATOR,
                 refused ? MLF_WHY_WORKSPACE_WINDOW : MLF_WHY_OPERATOR_FAILED, name.str, name.len);
  ex->error.node = op->node;
  return MLF_ERR_OPERATOR;
}

/* ---- inputs and outputs ---------------------------------------------------------------------- */

uint32_t mlf_executor_num_inputs(const mlf_executor* ex) {
  return ex != NULL && ex->ready ? ex->num_inputs : 0;
}

uint32_t mlf_executor_num_outputs(const mlf_executor* ex) {
  return ex != NULL && ex->ready ? ex->graph->num_outputs : 0;
}

/* The view of input or output `index`, or NULL (also before a successful init). */
static const mlf_view* io_view(const mlf_executor* ex, uint32_t index, int output) {
  if (ex == NULL || !ex->ready) return NULL;
  const mlf_graph* g = ex->graph;
  if (index >= (output ? g->num_outputs : ex->num_inputs)) return NULL;
  return &g->views[output ? g->outputs[index] : g->args[ex->input_args[index]].view];
}

static uint8_t* io_data(const mlf_executor* ex, uint32_t index, int output) {
  const mlf_view* v = io_view(ex, index, output);
  return v != NULL ? ex->storage[v->storage] : NULL;
}

static mlf_status describe(const mlf_executor* ex, uint32_t index, int output,
                           mlf_tensor_info* info) {
  const mlf_view* v = io_view(ex, index, output);
  if (v == NULL || info == NULL) return MLF_ERR_ARGUMENT;
  const mlf_name* name = output ? NULL : &ex->graph->args[ex->input_args[index]].name;
  info->name = name != NULL ? name->str : NULL;
  info->name_len = name != NULL ? name->len : 0;
  info->ndim = (int32_t)v->ndim;
  info->shape = ex->graph->shapes + v->shape;
  info->dtype = v->dtype;
  info->nbytes = (size_t)view_bytes(ex->graph, v);
  return MLF_OK;
}

mlf_status mlf_executor_input_info(const mlf_executor* ex, uint32_t index, mlf_tensor_info* info) {
  return describe(ex, index, 0, info);
}

mlf_status mlf_executor_output_info(const mlf_executor* ex, uint32_t index, mlf_tensor_info* info) {
  return describe(ex, index, 1, info);
}

mlf_status mlf_executor_input_index(const mlf_executor* ex, const char* name, size_t name_len,
                                    uint32_t* index) {
  if (ex == NULL || !ex->ready || index == NULL || (name == NULL && name_len != 0)) {
    return MLF_ERR_ARGUMENT;
  }
  mlf_name wanted = {name, (uint32_t)name_len};
  for (uint32_t i = 0; i < ex->num_inputs; ++i) {
    if (name_len <= UINT32_MAX && mlf_name_equal(ex->graph->args[ex->input_args[i]].name, wanted)) {
      *index = i;
      return MLF_OK;
    }
  }
  return MLF_ERR_NOT_FOUND;
}

void* mlf_executor_input_data(mlf_executor* ex, uint32_t index) { return io_data(ex, index, 0); }

const void* mlf_executor_output_data(const mlf_executor* ex, uint32_t index) {
  return io_data(ex, index, 1);
}

/* Copies between the caller's buffer and an input (output == 0) or output tensor. */
static mlf_status copy_io(const mlf_executor* ex, uint32_t index, int output, void* data,
                          size_t nbytes) {
  const mlf_view* v = io_view(ex, index, output);
  if (v == NULL) return ex != NULL && ex->ready ? MLF_ERR_ARGUMENT : MLF_ERR_STATE;
  uint8_t* tensor = ex->storage[v->storage];
  if (data == NULL || nbytes != view_bytes(ex->graph, v)) return MLF_ERR_ARGUMENT;
  /* The caller's buffer may be the tensor itself (zero-copy), never a part-overlap of it. */
  if (tensor != data) memcpy(output ? data : tensor, output ? tensor : data, nbytes);
  return MLF_OK;
}

mlf_status mlf_executor_set_input(mlf_executor* ex, uint32_t index, const void* data,
                                  size_t nbytes) {
  return copy_io(ex, index, 0, (void*)(uintptr_t)data, nbytes);
}

mlf_status mlf_executor_set_input_by_name(mlf_executor* ex, const char* name, size_t name_len,
                                          const void* data, size_t nbytes) {
  uint32_t index;
  mlf_status status = mlf_executor_input_index(ex, name, name_len, &index);
  return status == MLF_OK ? mlf_executor_set_input(ex, index, data, nbytes) : status;
}

mlf_status mlf_executor_get_output(const mlf_executor* ex, uint32_t index, void* data,
                                   size_t nbytes) {
  return copy_io(ex, index, 1, data, nbytes);
}

const mlf_error* mlf_executor_error(const mlf_executor* ex) { return ex ? &ex->error : NULL; }
