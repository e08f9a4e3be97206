/*
 * mlf_utvm_globals.c — the functions TVM's host calls on the device (see mlf_utvm.h):
 * the global functions, the system library's functions by name, the time evaluator and the
 * AOT executor module over a model's executor.
 *
 * Handles carry their kind in bits 32..39 (MLF_UTVM_HANDLE), so a handle the host sends back
 * is checked against what it can be, never followed as a pointer. The system library is one
 * module over every model's registry (TVM's is one registry too); the host frees it while
 * still using it, which is harmless since freeing a module does nothing here.
 */
#include <string.h>

#include "mlf_platform.h"
#include "mlf_utvm.h"

enum {
  SYSTEM_LIB,
  MODULE_GET_FUNCTION,
  MAX_PACKET_SIZE,
  TIME_EVALUATOR,
  RANDOM_FILL,
  AOT_CREATE,
  GRAPH_CREATE,
  NUM_GLOBALS
};

static const char* const kGlobals[NUM_GLOBALS] = {"runtime.SystemLib",
                                                  "tvm.rpc.server.ModuleGetFunction",
                                                  "tvm.rpc.server.GetCRTMaxPacketSize",
                                                  "runtime.RPCTimeEvaluator",
                                                  "tvm.contrib.random.random_fill",
                                                  "tvm.aot_executor.create",
                                                  "tvm.graph_executor.create"};

/* The AOT executor module's own function, after the common ones (mlf_utvm.h). */
enum { GET_INPUT_NAME = MLF_UTVM_COMMON_METHODS, NUM_METHODS };
static const char* const kAotMethods[NUM_METHODS - MLF_UTVM_COMMON_METHODS] = {"get_input_name"};
static const char* const kCommonMethods[MLF_UTVM_COMMON_METHODS] = {
    "set_input",       "run",           "get_output", "get_input", "get_num_outputs",
    "get_input_index", "get_num_inputs"};

static const char kNotFound[] = "function not found";

static uint32_t find_name(const char* const* names, uint32_t count, const char* name, size_t len) {
  for (uint32_t i = 0; i < count; ++i) {
    if (strlen(names[i]) == len && memcmp(names[i], name, len) == 0) return i;
  }
  return count;
}

uint32_t mlf_utvm_method(const char* name, size_t len, const char* const* own, uint32_t num_own) {
  uint32_t i = find_name(kCommonMethods, MLF_UTVM_COMMON_METHODS, name, len);
  return i < MLF_UTVM_COMMON_METHODS ? i : i + find_name(own, num_own, name, len);
}

uint64_t mlf_utvm_global_lookup(const char* name, size_t len) {
  uint32_t i = find_name(kGlobals, NUM_GLOBALS, name, len);
  return i < NUM_GLOBALS ? MLF_UTVM_HANDLE(MLF_UTVM_GLOBAL, i) : 0;
}

/* ---- function handles --------------------------------------------------------------- */

const mlf_utvm_signature* mlf_utvm_signature_of(const mlf_utvm_model* model,
                                                TVMBackendPackedCFunc fn) {
  for (uint32_t i = 0; i < model->num_signatures; ++i) {
    if (model->sig_funcs[i] == fn) return &model->signatures[i];
  }
  return NULL;
}

/* Gives a slot the signature its model's graph knows for fn, if any. */
static void find_signature(const mlf_utvm_model* model, mlf_utvm_func* f) {
  const mlf_utvm_signature* sig = mlf_utvm_signature_of(model, f->fn);
  f->num_args = sig != NULL ? sig->num_args : UINT16_MAX;
  f->arg_bytes = sig != NULL ? model->sig_bytes + sig->first : NULL;
}

/* A slot for fn (shared with an earlier lookup of it), counted; UINT32_MAX when full. */
static uint32_t take_slot(mlf_utvm* ut, const mlf_utvm_model* model, TVMBackendPackedCFunc fn) {
  uint32_t free_slot = UINT32_MAX;
  for (uint32_t i = 0; i < MLF_UTVM_MAX_FUNCS; ++i) {
    if (ut->funcs[i].refs > 0 && ut->funcs[i].fn == fn && ut->funcs[i].refs < UINT16_MAX) {
      ++ut->funcs[i].refs;
      return i;
    }
    if (ut->funcs[i].refs == 0 && free_slot == UINT32_MAX) free_slot = i;
  }
  if (free_slot != UINT32_MAX) {
    ut->funcs[free_slot].fn = fn;
    ut->funcs[free_slot].refs = 1;
    find_signature(model, &ut->funcs[free_slot]);
  }
  return free_slot;
}

static mlf_utvm_func* slot_of(mlf_utvm* ut, uint64_t handle) {
  uint32_t slot = MLF_UTVM_LOW(handle);
  if (MLF_UTVM_KIND(handle) != MLF_UTVM_LIBFUNC || slot >= MLF_UTVM_MAX_FUNCS) return NULL;
  return ut->funcs[slot].refs > 0 ? &ut->funcs[slot] : NULL;
}

int mlf_utvm_free_handle(mlf_utvm* ut, uint64_t handle, int64_t kind) {
  mlf_utvm_func* f = slot_of(ut, handle);
  if (MLF_UTVM_KIND(handle) == MLF_UTVM_GRAPH && kind == kTVMModuleHandle) {
    return mlf_utvm_graph_free(ut, handle);
  }
  /* Other modules (the system library, AOT executors) and arrays stay: the host frees the
   * system library while still using it, and an executor's arrays are its own inputs and
   * outputs. */
  if (f != NULL && kind == kTVMPackedFuncHandle) --f->refs;
  return 0;
}

const mlf_utvm_model* mlf_utvm_find_function(const mlf_utvm* ut, const char* name, size_t len,
                                             TVMBackendPackedCFunc* fn) {
  for (uint32_t k = 0; k < 2 * ut->config.num_models; ++k) {
    const mlf_utvm_model* model = &ut->config.models[k / 2];
    const TVMModule* lib = k % 2 == 0 ? model->library : model->extra;
    if (lib != NULL && mlf_module_lookup(lib, name, len, fn) == MLF_OK) return model;
  }
  return NULL;
}

/* Function `name` of module handle `module` as a new handle; 0 when there is none; -1 cast
 * when the slot table is full. */
static uint64_t module_function(mlf_utvm* ut, uint64_t module, const char* name, size_t len) {
  if (MLF_UTVM_KIND(module) == MLF_UTVM_GRAPH)
    return mlf_utvm_graph_function(ut, module, name, len);
  if (MLF_UTVM_KIND(module) != MLF_UTVM_MODULE) return 0;
  uint32_t which = MLF_UTVM_LOW(module);
  if (which == 0) {
    TVMBackendPackedCFunc fn;
    const mlf_utvm_model* model = mlf_utvm_find_function(ut, name, len, &fn);
    if (model == NULL) return 0;
    uint32_t slot = take_slot(ut, model, fn);
    return slot == UINT32_MAX ? UINT64_MAX : MLF_UTVM_HANDLE(MLF_UTVM_LIBFUNC, slot);
  }
  if (which > ut->config.num_models || ut->config.models[which - 1].executor == NULL) return 0;
  uint32_t method = mlf_utvm_method(name, len, kAotMethods, NUM_METHODS - MLF_UTVM_COMMON_METHODS);
  return method < NUM_METHODS ? MLF_UTVM_HANDLE(MLF_UTVM_METHOD, (which - 1) << 8 | method) : 0;
}

/* ---- calling ------------------------------------------------------------------------ */

static void no_result(mlf_utvm* ut) { mlf_utvm_return(ut, kTVMNullptr, kTVMNullptr, 0); }

void mlf_utvm_int_result(mlf_utvm* ut, int64_t v) {
  mlf_utvm_return(ut, kDLInt, kDLInt, (uint64_t)v);
}

static void handle_result(mlf_utvm* ut, int type_code, uint64_t handle) {
  mlf_utvm_return(ut, type_code, kTVMOpaqueHandle, handle);
}

/* Arguments for a function of the model's code (`f`, NULL for an AOT run): numbers and
 * tensors in device memory only, and with a signature exactly the tensors it takes (generated
 * code checks nothing; an address from the host is never trusted). */
static const char* check_operator_args(mlf_utvm* ut, const mlf_utvm_func* f) {
  mlf_utvm_args* a = &ut->args;
  int checked = f != NULL && f->num_args != UINT16_MAX;
  if (checked && a->num != f->num_args) return "wrong number of arguments";
  for (uint32_t i = 0; i < a->num; ++i) {
    int c = a->codes[i];
    if (c == kTVMDLTensorHandle) {
      if (mlf_utvm_tensor_ok(ut, &a->tensors[i]) != 0) return "tensor outside device memory";
      if (checked && mlf_utvm_tensor_bytes(&a->tensors[i]) < f->arg_bytes[i]) {
        return "tensor smaller than the function's";
      }
      a->codes[i] = kTVMNDArrayHandle; /* as TVM's graph executor (and ours) pass tensors */
    } else if (checked || (c != kDLInt && c != kDLUInt && c != kDLFloat)) {
      return "only numbers and tensors can be passed to a library function";
    }
  }
  return NULL;
}

void mlf_utvm_bind_workspace(mlf_utvm* ut, mlf_workspace* ws) {
  if (ws == NULL) ws = ut->config.workspace;
  /* A failed operator may leave blocks behind: every call starts with all of it. */
  mlf_workspace_reset(ws);
  mlf_workspace_bind(ws);
}

static int call_library(mlf_utvm* ut, TVMBackendPackedCFunc fn) {
  TVMValue ret;
  int ret_code = kTVMNullptr;
  mlf_utvm_bind_workspace(ut, NULL);
  return fn(ut->args.values, ut->args.codes, (int)ut->args.num, &ret, &ret_code, NULL);
}

static int run_model(mlf_utvm* ut, uint32_t m) {
  const mlf_utvm_model* model = &ut->config.models[m];
  mlf_utvm_bind_workspace(ut, model->workspace);
  mlf_status status = mlf_executor_run(model->executor);
  mlf_utvm_bind_workspace(ut, NULL);
  return status == MLF_OK ? 0 : -1;
}

static void failed(mlf_utvm* ut) {
  const char* why = TVMGetLastError();
  mlf_utvm_exception(ut, why != NULL && why[0] != '\0' ? why : "function failed");
}

/* An index argument (int) or an input name (string) → input index, or UINT32_MAX. */
uint32_t mlf_utvm_input_of(mlf_utvm* ut, mlf_executor* ex) {
  mlf_utvm_args* a = &ut->args;
  uint32_t index = UINT32_MAX;
  if (a->num != 1) return index;
  if (a->codes[0] == kTVMStr) {
    if (mlf_executor_input_index(ex, a->values[0].v_str, a->lens[0], &index) != MLF_OK) {
      return UINT32_MAX;
    }
  } else if (a->codes[0] == kDLInt && a->values[0].v_int64 >= 0 &&
             a->values[0].v_int64 < (int64_t)mlf_executor_num_inputs(ex)) {
    index = (uint32_t)a->values[0].v_int64;
  }
  return index;
}

void mlf_utvm_array_result(mlf_utvm* ut, uint32_t low, const mlf_tensor_info* info, void* data) {
  DLTensor t;
  memset(&t, 0, sizeof(t));
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = info->ndim;
  t.dtype = info->dtype;
  t.shape = (int64_t*)(uintptr_t)info->shape;
  mlf_utvm_return_array(ut, &t, MLF_UTVM_HANDLE(MLF_UTVM_ARRAY, low));
}

static void call_method(mlf_utvm* ut, uint32_t m, uint32_t method) {
  mlf_executor* ex = ut->config.models[m].executor;
  mlf_utvm_args* a = &ut->args;
  mlf_tensor_info info;
  uint32_t index = UINT32_MAX;
  switch (method) {
    case MLF_UTVM_RUN:
      if (run_model(ut, m) != 0) {
        mlf_utvm_exception(ut, "run failed");
      } else {
        no_result(ut);
      }
      return;
    case MLF_UTVM_GET_INPUT:
      index = mlf_utvm_input_of(ut, ex);
      if (mlf_executor_input_info(ex, index, &info) != MLF_OK) break;
      mlf_utvm_array_result(ut, m, &info, mlf_executor_input_data(ex, index));
      return;
    case MLF_UTVM_GET_OUTPUT:
      if (a->num == 1 && a->codes[0] == kDLInt && a->values[0].v_int64 >= 0 &&
          a->values[0].v_int64 <= UINT32_MAX) {
        index = (uint32_t)a->values[0].v_int64;
      }
      if (mlf_executor_output_info(ex, index, &info) != MLF_OK) break;
      mlf_utvm_array_result(ut, m, &info, (void*)(uintptr_t)mlf_executor_output_data(ex, index));
      return;
    case MLF_UTVM_GET_NUM_INPUTS:
      mlf_utvm_int_result(ut, mlf_executor_num_inputs(ex));
      return;
    case MLF_UTVM_GET_NUM_OUTPUTS:
      mlf_utvm_int_result(ut, mlf_executor_num_outputs(ex));
      return;
    case MLF_UTVM_GET_INPUT_INDEX:
      if (a->num != 1 || a->codes[0] != kTVMStr) break;
      index = mlf_utvm_input_of(ut, ex);
      mlf_utvm_int_result(ut, index == UINT32_MAX ? -1 : (int64_t)index);
      return;
    case GET_INPUT_NAME:
      if (a->num != 1 || a->codes[0] != kDLInt) break;
      index = mlf_utvm_input_of(ut, ex);
      if (mlf_executor_input_info(ex, index, &info) != MLF_OK) break;
      if (mlf_utvm_return_blob(ut, kTVMStr, info.name, info.name_len) != 0) {
        mlf_utvm_exception(ut, "name too long");
      }
      return;
    default: /* set_input: AotModule copies into get_input's array instead */
      mlf_utvm_exception(ut, "set_input: not implemented, use get_input");
      return;
  }
  mlf_utvm_exception(ut, "bad argument or index");
}

/* ---- the time evaluator ------------------------------------------------------------ */

/* One call of what the evaluator times: 0 ok. */
static int timed_call(mlf_utvm* ut) {
  uint64_t target = ut->timer.target;
  if (MLF_UTVM_KIND(target) == MLF_UTVM_METHOD) return run_model(ut, MLF_UTVM_LOW(target) >> 8);
  if (MLF_UTVM_KIND(target) == MLF_UTVM_GRAPH_METHOD) return mlf_utvm_graph_run(ut, target);
  mlf_utvm_func* f = slot_of(ut, target);
  return f != NULL ? call_library(ut, f->fn) : -1;
}

static void create_timer(mlf_utvm* ut) {
  mlf_utvm_args* a = &ut->args;
  static const int kCodes[12] = {kTVMModuleHandle, kTVMStr, kDLInt, kDLInt, kDLInt, kDLInt,
                                 kDLInt,           kDLInt,  kDLInt, kDLInt, kDLInt, kTVMStr};
  if (a->num != 12) goto bad;
  for (uint32_t i = 0; i < 12; ++i) {
    if (a->codes[i] != kCodes[i] &&
        !(kCodes[i] == kTVMStr && i == 11 && a->codes[i] == kTVMNullptr)) {
      goto bad;
    }
  }
  int64_t number = a->values[4].v_int64, repeat = a->values[5].v_int64;
  int64_t min_ms = a->values[6].v_int64, zero = a->values[7].v_int64;
  if (number < 1 || number > MLF_UTVM_MAX_TIMED_CALLS || repeat < 1 ||
      repeat > MLF_UTVM_MAX_REPEAT || min_ms < 0 || min_ms > 3600000 || zero < 0) {
    mlf_utvm_exception(ut, "time evaluator: number, repeat or min_repeat_ms out of range");
    return;
  }
  uint64_t target =
      module_function(ut, (uint64_t)a->values[0].v_int64, a->values[1].v_str, a->lens[1]);
  uint32_t kind = MLF_UTVM_KIND(target);
  if (target == 0 || target == UINT64_MAX ||
      ((kind == MLF_UTVM_METHOD || kind == MLF_UTVM_GRAPH_METHOD) &&
       (MLF_UTVM_LOW(target) & 0xFFu) != MLF_UTVM_RUN)) {
    mlf_utvm_exception(ut, target == UINT64_MAX ? "too many functions" : kNotFound);
    return;
  }
  (void)mlf_utvm_free_handle(ut, ut->timer.target, kTVMPackedFuncHandle); /* newest lives */
  ut->timer.target = target;
  ut->timer.number = (uint32_t)number;
  ut->timer.repeat = (uint32_t)repeat;
  ut->timer.min_repeat_ms = (uint32_t)min_ms;
  ut->timer.limit_zero = zero > 1000000 ? 1000000u : (uint32_t)zero;
  if (++ut->timer.generation == 0) ut->timer.generation = 1;
  handle_result(ut, kTVMPackedFuncHandle, MLF_UTVM_HANDLE(MLF_UTVM_TIMER, ut->timer.generation));
  return;
bad:
  mlf_utvm_exception(ut, "time evaluator: bad arguments");
}

static void run_timer(mlf_utvm* ut) {
  mlf_utvm_timer* tm = &ut->timer;
  uint64_t hz = mlf_platform_tick_hz();
  uint64_t min_ticks = (uint64_t)tm->min_repeat_ms * hz / 1000u;
  uint64_t number = tm->number;
  uint32_t zero_left = tm->limit_zero;
  const char* why = check_operator_args(ut, slot_of(ut, tm->target));
  if (why != NULL) {
    mlf_utvm_exception(ut, why);
    return;
  }
  if (timed_call(ut) != 0) goto fail; /* warm-up */
  for (uint32_t r = 0; r < tm->repeat; ++r) {
    uint64_t elapsed;
    for (;;) {
      uint64_t start = mlf_platform_ticks();
      for (uint64_t k = 0; k < number; ++k) {
        if (timed_call(ut) != 0) goto fail;
      }
      elapsed = mlf_platform_ticks() - start;
      if (elapsed == 0 && zero_left > 0) {
        --zero_left;
        continue;
      }
      if (elapsed >= min_ticks || number >= MLF_UTVM_MAX_TIMED_CALLS) break;
      /* Too short: more calls per repeat, as TVM raises `number` (kept for later repeats). */
      uint64_t wanted = elapsed > 0 ? min_ticks * number / elapsed + 1 : number * 2;
      uint64_t golden = number * 1618u / 1000u;
      number = wanted > golden ? wanted : golden;
      if (number > MLF_UTVM_MAX_TIMED_CALLS) number = MLF_UTVM_MAX_TIMED_CALLS;
    }
    ut->results[r] = (double)elapsed / (double)hz / (double)number;
  }
  (void)mlf_utvm_return_blob(ut, kTVMBytes, ut->results, tm->repeat * sizeof(double));
  return;
fail:
  failed(ut);
}

/* ---- globals ------------------------------------------------------------------------ */

/* The AOT model called `name`; else, for TVM's "default" (what create_aot_executor always
 * asks for), the firmware's only AOT model. UINT32_MAX when there is none. */
static uint32_t aot_model(const mlf_utvm* ut, const char* name, size_t len) {
  uint32_t found = UINT32_MAX, count = 0;
  for (uint32_t m = 0; m < ut->config.num_models; ++m) {
    const mlf_utvm_model* model = &ut->config.models[m];
    if (model->executor == NULL) continue;
    if (strlen(model->name) == len && memcmp(model->name, name, len) == 0) return m;
    found = m;
    ++count;
  }
  return count == 1 && len == 7 && memcmp(name, "default", 7) == 0 ? found : UINT32_MAX;
}

static void call_global(mlf_utvm* ut, uint32_t which) {
  mlf_utvm_args* a = &ut->args;
  switch (which) {
    case SYSTEM_LIB:
      handle_result(ut, kTVMModuleHandle, MLF_UTVM_HANDLE(MLF_UTVM_MODULE, 0));
      return;
    case MODULE_GET_FUNCTION: {
      /* Null, not an exception, for an absent function or wrong argument types (what the
       * host expects, e.g. for _lookup_linked_param). */
      uint64_t fn = 0;
      if (a->num == 3 && a->codes[0] == kTVMModuleHandle && a->codes[1] == kTVMStr) {
        fn = module_function(ut, (uint64_t)a->values[0].v_int64, a->values[1].v_str, a->lens[1]);
      }
      if (fn == UINT64_MAX) {
        mlf_utvm_exception(ut, "too many functions");
      } else if (fn == 0) {
        no_result(ut);
      } else {
        handle_result(ut, kTVMPackedFuncHandle, fn);
      }
      return;
    }
    case MAX_PACKET_SIZE: {
      size_t size = ut->config.rx_size;
      if (size > MLF_UTVM_HOST_MAX_PAYLOAD) size = MLF_UTVM_HOST_MAX_PAYLOAD;
      mlf_utvm_int_result(ut, (int64_t)(size - MLF_UTVM_PACKET_OVERHEAD));
      return;
    }
    case TIME_EVALUATOR:
      create_timer(ut);
      return;
    case RANDOM_FILL:
      if (a->num != 1 || a->codes[0] != kTVMDLTensorHandle ||
          mlf_utvm_tensor_ok(ut, &a->tensors[0]) != 0) {
        mlf_utvm_exception(ut, "random_fill: a tensor in device memory, please");
        return;
      }
      {
        uint8_t* p = (uint8_t*)a->tensors[0].data;
        uint64_t n = mlf_utvm_tensor_bytes(&a->tensors[0]);
        for (uint64_t i = 0; i < n; ++i) p[i] = (uint8_t)(mlf_utvm_random(ut) >> 24);
      }
      no_result(ut);
      return;
    case GRAPH_CREATE:
      mlf_utvm_graph_create(ut);
      return;
    default: { /* AOT_CREATE: (system library, device, module name) */
      uint32_t m = UINT32_MAX;
      if (a->num == 3 && a->codes[0] == kTVMModuleHandle && a->codes[2] == kTVMStr &&
          (uint64_t)a->values[0].v_int64 == MLF_UTVM_HANDLE(MLF_UTVM_MODULE, 0)) {
        m = aot_model(ut, a->values[2].v_str, a->lens[2]);
      }
      if (m == UINT32_MAX) {
        mlf_utvm_exception(ut, "tvm.aot_executor.create: no AOT model of that name");
      } else {
        handle_result(ut, kTVMModuleHandle, MLF_UTVM_HANDLE(MLF_UTVM_MODULE, m + 1));
      }
      return;
    }
  }
}

void mlf_utvm_call(mlf_utvm* ut, uint64_t fn) {
  uint32_t low = MLF_UTVM_LOW(fn);
  switch (MLF_UTVM_KIND(fn)) {
    case MLF_UTVM_GLOBAL:
      if (low < NUM_GLOBALS) {
        call_global(ut, low);
        return;
      }
      break;
    case MLF_UTVM_LIBFUNC: {
      mlf_utvm_func* f = slot_of(ut, fn);
      if (f == NULL) break;
      const char* why = check_operator_args(ut, f);
      if (why != NULL) {
        mlf_utvm_exception(ut, why);
      } else if (call_library(ut, f->fn) != 0) {
        failed(ut);
      } else {
        no_result(ut);
      }
      return;
    }
    case MLF_UTVM_METHOD:
      if ((low >> 8) < ut->config.num_models && (low & 0xFFu) < NUM_METHODS &&
          ut->config.models[low >> 8].executor != NULL) {
        call_method(ut, low >> 8, low & 0xFFu);
        return;
      }
      break;
    case MLF_UTVM_GRAPH_METHOD:
      mlf_utvm_graph_call(ut, fn);
      return;
    case MLF_UTVM_TIMER:
      if (low == ut->timer.generation && low != 0) {
        run_timer(ut);
        return;
      }
      break;
    default:
      break;
  }
  mlf_utvm_exception(ut, "unknown function handle");
}
