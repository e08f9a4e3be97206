/*
 * mlf_utvm_graph.c — `tvm.graph_executor.create` on the device (see mlf_utvm.h): the host
 * sends a graph JSON (tvm.contrib.graph_executor.create over a session), the device parses it
 * with the runtime's parser, resolves its functions in the models' system libraries, lays the
 * executor out in device memory and serves the functions TVM's GraphModule looks up.
 *
 * The JSON comes from the host and generated code checks nothing, so a graph that calls a
 * function whose model knows its signature (mlf_utvm_model.signatures) must pass it at least
 * the tensors the model's own graph does. The executor lives in two blocks of the device
 * arena that the host can neither reach nor free (only the inputs and outputs it is handed);
 * freeing the module or a new session releases them, and a freed executor's handles are
 * refused (its generation is in every handle).
 */
#include <string.h>

#include "mlf_utvm.h"

/* Its own functions, after the common ones (mlf_utvm.h), in the order GraphModule looks them
 * up. set_input_zero_copy and set_output_zero_copy are absent, which GraphModule accepts. */
enum { LOAD_PARAMS = MLF_UTVM_COMMON_METHODS, GET_INPUT_INFO, SHARE_PARAMS, NUM_METHODS };
static const char* const kGraphMethods[NUM_METHODS - MLF_UTVM_COMMON_METHODS] = {
    "load_params", "get_input_info", "share_params"};

#define ALIGN8(n) (((uint64_t)(n) + 7u) & ~(uint64_t)7u)
#define MESSAGE_BYTES 192u

static const char kCreate[] = "tvm.graph_executor.create: ";

/* ---- handles ------------------------------------------------------------------------ */

static uint64_t handle_of(uint32_t kind, uint32_t slot, const mlf_utvm_graph* g, uint32_t method) {
  return MLF_UTVM_HANDLE(kind, (uint32_t)g->generation << 16 | slot << 8 | method);
}

/* The live executor a handle of this kind names, or NULL (never was, or freed since). */
static mlf_utvm_graph* live(mlf_utvm* ut, uint64_t handle, uint32_t kind) {
  uint32_t low = MLF_UTVM_LOW(handle), slot = (low >> 8) & 0xFFu;
  if (MLF_UTVM_KIND(handle) != kind || slot >= MLF_UTVM_MAX_GRAPHS) return NULL;
  mlf_utvm_graph* g = &ut->graphs[slot];
  return g->generation != 0 && g->generation == (low >> 16) ? g : NULL;
}

static mlf_executor* executor(const mlf_utvm_graph* g) { return (mlf_executor*)(void*)g->state; }

int mlf_utvm_graph_owns(const mlf_utvm* ut, const uint8_t* block) {
  for (uint32_t i = 0; i < MLF_UTVM_MAX_GRAPHS; ++i) {
    const mlf_utvm_graph* g = &ut->graphs[i];
    if (g->generation != 0 && (block == g->tables || block == g->state)) return 1;
  }
  return 0;
}

int mlf_utvm_graph_io_ok(const mlf_utvm* ut, uint64_t address, uint64_t nbytes) {
  for (uint32_t i = 0; i < MLF_UTVM_MAX_GRAPHS; ++i) {
    const mlf_utvm_graph* g = &ut->graphs[i];
    if (g->generation != 0 && mlf_utvm_executor_io_ok(executor(g), address, nbytes)) return 1;
  }
  return 0;
}

static void release(mlf_utvm* ut, mlf_utvm_graph* g) {
  uint8_t* blocks[2] = {g->tables, g->state};
  memset(g, 0, sizeof(*g)); /* first: the blocks of a live executor cannot be freed */
  for (int i = 0; i < 2; ++i) {
    if (blocks[i] != NULL) (void)mlf_utvm_free(ut, (uint64_t)(uintptr_t)blocks[i]);
  }
}

int mlf_utvm_graph_free(mlf_utvm* ut, uint64_t module) {
  mlf_utvm_graph* g = live(ut, module, MLF_UTVM_GRAPH);
  if (g == NULL) return -1;
  release(ut, g);
  return 0;
}

/* ---- creating ----------------------------------------------------------------------- */

/* "<prefix><what><subject>" in buf, cut to fit. */
static const char* say(char* buf, const char* prefix, const char* what, const char* subject,
                       size_t subject_len) {
  const char* parts[3] = {prefix, what, subject};
  size_t lens[3] = {strlen(prefix), strlen(what), subject_len};
  size_t n = 0;
  for (int i = 0; i < 3; ++i) {
    size_t take = lens[i] < MESSAGE_BYTES - 1 - n ? lens[i] : MESSAGE_BYTES - 1 - n;
    if (take > 0) memcpy(buf + n, parts[i], take);
    n += take;
  }
  buf[n] = '\0';
  return buf;
}

static const char* describe(char* buf, const char* prefix, const mlf_error* err) {
  char line[MESSAGE_BYTES];
  mlf_error_format(err, line, sizeof(line));
  return say(buf, prefix, line, "", 0);
}

/* Whether every call of function `func` (fn, of model) passes what the model's own graph
 * passes it: NULL, or what is wrong. Only for a model with signatures. */
static const char* check_calls(const mlf_graph* graph, uint32_t func, TVMBackendPackedCFunc fn,
                               const mlf_utvm_model* model) {
  if (model->num_signatures == 0) return NULL;
  const mlf_utvm_signature* sig = mlf_utvm_signature_of(model, fn);
  if (sig == NULL) return "the graph calls a function its model's graph never calls: ";
  for (uint32_t o = 0; o < graph->num_ops; ++o) {
    const mlf_op* op = &graph->ops[o];
    if (op->func != func) continue;
    if (op->num_args != sig->num_args) return "wrong number of tensors for ";
    for (uint32_t k = 0; k < op->num_args; ++k) {
      const mlf_view* v = &graph->views[graph->op_args[op->first_arg + k]];
      DLTensor t;
      memset(&t, 0, sizeof(t));
      t.ndim = v->ndim;
      t.dtype = v->dtype;
      t.shape = (int64_t*)(uintptr_t)(graph->shapes + v->shape);
      if (mlf_utvm_tensor_bytes(&t) < model->sig_bytes[sig->first + k]) {
        return "a tensor smaller than its model's graph passes to ";
      }
    }
  }
  return NULL;
}

/* The executor for json in g's blocks: NULL, or why not (in buf or static). */
static const char* build(mlf_utvm* ut, mlf_utvm_graph* g, const char* json, uint32_t len,
                         char* buf) {
  static const char kNoMemory[] =
      "tvm.graph_executor.create: device memory exhausted (project option device_memory_bytes)";
  mlf_error err;
  memset(&err, 0, sizeof(err));
  size_t tables_bytes, arena_bytes;
  if (mlf_graph_measure_json(json, len, &tables_bytes, &err) != MLF_OK) {
    return describe(buf, kCreate, &err);
  }
  uint64_t text_bytes = ALIGN8((uint64_t)len + 1u);
  if ((g->tables = (uint8_t*)mlf_utvm_alloc(ut, text_bytes + tables_bytes, 8)) == NULL) {
    return kNoMemory;
  }
  char* text = (char*)g->tables; /* names stay slices of it; the receive buffer is reused */
  memcpy(text, json, len);
  text[len] = '\0';
  const mlf_graph* parsed;
  if (mlf_graph_parse_json(text, len, g->tables + text_bytes, tables_bytes, &parsed, &err) !=
      MLF_OK) {
    return describe(buf, kCreate, &err);
  }
  mlf_graph* graph = (mlf_graph*)(uintptr_t)parsed; /* in our own block */
  size_t state_bytes = mlf_executor_state_bytes(graph);
  if (mlf_executor_arena_bytes(graph, NULL, 0, 0, &arena_bytes) != MLF_OK) {
    return "tvm.graph_executor.create: graph too large";
  }
  uint64_t head = ALIGN8(sizeof(mlf_executor)) +
                  ALIGN8((uint64_t)graph->num_funcs * sizeof(TVMBackendPackedCFunc));
  uint64_t state_at = head, arena_at = head + ALIGN8(state_bytes);
  if ((g->state = (uint8_t*)mlf_utvm_alloc(ut, arena_at + arena_bytes, 8)) == NULL) {
    return kNoMemory;
  }
  TVMBackendPackedCFunc* funcs =
      (TVMBackendPackedCFunc*)(void*)(g->state + ALIGN8(sizeof(mlf_executor)));
  for (uint32_t i = 0; i < graph->num_funcs; ++i) {
    mlf_name name = graph->funcs[i];
    if (mlf_utvm_find_function(ut, name.str, name.len, &funcs[i]) == NULL) {
      return say(buf, kCreate, "no function in the system library: ", name.str, name.len);
    }
  }
  graph->func_ptrs = funcs;
  mlf_executor* ex = executor(g);
  if (mlf_executor_init_bound(ex, graph, NULL, g->state + state_at, state_bytes,
                              g->state + arena_at, arena_bytes) != MLF_OK) {
    return describe(buf, kCreate, &ex->error);
  }
  /* After init, which checked every index of the tables. */
  for (uint32_t i = 0; i < graph->num_funcs; ++i) {
    mlf_name name = graph->funcs[i];
    const mlf_utvm_model* model = mlf_utvm_find_function(ut, name.str, name.len, &funcs[i]);
    const char* why = check_calls(graph, i, funcs[i], model);
    if (why != NULL) return say(buf, kCreate, why, name.str, name.len);
  }
  return NULL;
}

void mlf_utvm_graph_create(mlf_utvm* ut) {
  mlf_utvm_args* a = &ut->args;
  if (a->num != 4 || a->codes[0] != kTVMStr || a->codes[1] != kTVMModuleHandle ||
      a->codes[2] != kDLInt || a->codes[3] != kDLInt ||
      (uint64_t)a->values[1].v_int64 != MLF_UTVM_HANDLE(MLF_UTVM_MODULE, 0)) {
    mlf_utvm_exception(ut,
                       "tvm.graph_executor.create: (graph JSON, the system library, "
                       "device type, device id) expected");
    return;
  }
  if (a->values[2].v_int64 != kDLCPU) {
    mlf_utvm_exception(ut, "tvm.graph_executor.create: only the CPU device (session.device)");
    return;
  }
  uint32_t slot = 0;
  while (slot < MLF_UTVM_MAX_GRAPHS && ut->graphs[slot].generation != 0) ++slot;
  if (slot == MLF_UTVM_MAX_GRAPHS) {
    mlf_utvm_exception(ut, "tvm.graph_executor.create: too many graph executors (free one)");
    return;
  }
  mlf_utvm_graph* g = &ut->graphs[slot];
  char buf[MESSAGE_BYTES];
  const char* why = build(ut, g, a->values[0].v_str, a->lens[0], buf);
  if (why != NULL) {
    release(ut, g);
    mlf_utvm_exception(ut, why);
    return;
  }
  if (++ut->graph_serial == 0) ut->graph_serial = 1;
  g->generation = ut->graph_serial;
  mlf_utvm_return(ut, kTVMModuleHandle, kTVMOpaqueHandle, handle_of(MLF_UTVM_GRAPH, slot, g, 0));
}

/* ---- its functions ------------------------------------------------------------------ */

uint64_t mlf_utvm_graph_function(mlf_utvm* ut, uint64_t module, const char* name, size_t len) {
  mlf_utvm_graph* g = live(ut, module, MLF_UTVM_GRAPH);
  if (g == NULL) return 0;
  uint32_t m = mlf_utvm_method(name, len, kGraphMethods, NUM_METHODS - MLF_UTVM_COMMON_METHODS);
  return m < NUM_METHODS ? handle_of(MLF_UTVM_GRAPH_METHOD, (uint32_t)(g - ut->graphs), g, m) : 0;
}

static int run(mlf_utvm* ut, mlf_utvm_graph* g) {
  mlf_utvm_bind_workspace(ut, NULL);
  mlf_status status = mlf_executor_run(executor(g));
  return status == MLF_OK ? 0 : -1;
}

int mlf_utvm_graph_run(mlf_utvm* ut, uint64_t fn) {
  mlf_utvm_graph* g = live(ut, fn, MLF_UTVM_GRAPH_METHOD);
  return g != NULL && (MLF_UTVM_LOW(fn) & 0xFFu) == MLF_UTVM_RUN ? run(ut, g) : -1;
}

/* A tensor argument the host sent for a copy of exactly nbytes into or out of `own` (an
 * input's or output's memory): its data, or NULL. The same memory is fine (nothing to copy),
 * a partial overlap is not. */
static const uint8_t* copy_peer(mlf_utvm* ut, uint32_t i, const void* own, size_t nbytes) {
  mlf_utvm_args* a = &ut->args;
  if (a->codes[i] != kTVMDLTensorHandle || mlf_utvm_tensor_ok(ut, &a->tensors[i]) != 0 ||
      mlf_utvm_tensor_bytes(&a->tensors[i]) != nbytes) {
    return NULL;
  }
  const uint8_t* p = (const uint8_t*)a->tensors[i].data;
  const uint8_t* q = (const uint8_t*)own;
  return p == q || p + nbytes <= q || q + nbytes <= p ? p : NULL;
}

static const char* call(mlf_utvm* ut, mlf_utvm_graph* g, uint32_t method, char* buf) {
  mlf_utvm_args* a = &ut->args;
  mlf_executor* ex = executor(g);
  mlf_tensor_info info;
  uint32_t index = UINT32_MAX;
  const uint8_t* peer;
  switch (method) {
    case MLF_UTVM_SET_INPUT:
      if (a->num != 2) return "set_input: (name or index, array), please";
      a->num = 1; /* the key alone names the input */
      index = mlf_utvm_input_of(ut, ex);
      if (mlf_executor_input_info(ex, index, &info) != MLF_OK) return "set_input: no such input";
      peer = copy_peer(ut, 1, mlf_executor_input_data(ex, index), info.nbytes);
      if (peer == NULL) return "set_input: a device array of the input's size, please";
      (void)mlf_executor_set_input(ex, index, peer, info.nbytes);
      break;
    case MLF_UTVM_RUN:
      if (run(ut, g) != 0) return describe(buf, "run: ", mlf_executor_error(ex));
      break;
    case MLF_UTVM_GET_OUTPUT:
      if ((a->num != 1 && a->num != 2) || a->codes[0] != kDLInt || a->values[0].v_int64 < 0 ||
          a->values[0].v_int64 > UINT32_MAX ||
          mlf_executor_output_info(ex, (uint32_t)a->values[0].v_int64, &info) != MLF_OK) {
        return "get_output: no such output";
      }
      index = (uint32_t)a->values[0].v_int64;
      if (a->num == 1) {
        mlf_utvm_array_result(ut, 0, &info, (void*)(uintptr_t)mlf_executor_output_data(ex, index));
        return NULL;
      }
      peer = copy_peer(ut, 1, mlf_executor_output_data(ex, index), info.nbytes);
      if (peer == NULL) return "get_output: a device array of the output's size, please";
      if (peer != mlf_executor_output_data(ex, index)) {
        (void)mlf_executor_get_output(ex, index, (void*)(uintptr_t)peer, info.nbytes);
      }
      break;
    case MLF_UTVM_GET_INPUT:
      index = mlf_utvm_input_of(ut, ex);
      if (mlf_executor_input_info(ex, index, &info) != MLF_OK) return "get_input: no such input";
      mlf_utvm_array_result(ut, 0, &info, mlf_executor_input_data(ex, index));
      return NULL;
    case MLF_UTVM_GET_NUM_OUTPUTS:
      mlf_utvm_int_result(ut, mlf_executor_num_outputs(ex));
      return NULL;
    case MLF_UTVM_GET_NUM_INPUTS:
      mlf_utvm_int_result(ut, mlf_executor_num_inputs(ex));
      return NULL;
    case MLF_UTVM_GET_INPUT_INDEX:
      if (a->num != 1 || a->codes[0] != kTVMStr) return "get_input_index: a name, please";
      index = mlf_utvm_input_of(ut, ex);
      mlf_utvm_int_result(ut, index == UINT32_MAX ? -1 : (int64_t)index);
      return NULL;
    case LOAD_PARAMS:
      if (a->num != 1 || a->codes[0] != kTVMBytes) return "load_params: the params bytes, please";
      if (mlf_executor_load_params(ex, a->values[0].v_str, a->lens[0]) != MLF_OK) {
        return describe(buf, "load_params: ", mlf_executor_error(ex));
      }
      break;
    default: /* get_input_info (a Map: no MinRPC type carries it), share_params */
      return "not supported by the device's graph executor";
  }
  mlf_utvm_return(ut, kTVMNullptr, kTVMNullptr, 0);
  return NULL;
}

void mlf_utvm_graph_call(mlf_utvm* ut, uint64_t fn) {
  mlf_utvm_graph* g = live(ut, fn, MLF_UTVM_GRAPH_METHOD);
  uint32_t method = MLF_UTVM_LOW(fn) & 0xFFu;
  char buf[MESSAGE_BYTES];
  const char* why = "graph executor freed";
  if (g != NULL) why = method < NUM_METHODS ? call(ut, g, method, buf) : "unknown function handle";
  if (why != NULL) mlf_utvm_exception(ut, why);
}
