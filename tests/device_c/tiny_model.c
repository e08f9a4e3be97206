/*
 * tiny_model.c — a hand-written model in the shape TVM's C backend gives one: two
 * TVM-ABI operators and a system-library registry, plus its graph.json.
 *
 *   out = relu(x + y), x, y, out: float32[2, 4]
 *
 * The add operator takes 256 bytes of workspace (as generated code does for temporaries);
 * relu fails (returns -1, as generated asserts do) when an input is NaN.
 */
#include <stdint.h>

#include "tvm/runtime/c_backend_api.h"
#include "tvm/runtime/c_runtime_api.h"
#include "tvm/runtime/crt/module.h"

const char tiny_model_graph_json[] =
    "{\"nodes\": ["
    "{\"op\": \"null\", \"name\": \"x\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"y\\u00e9\", \"inputs\": []},"
    "{\"op\": \"tvm_op\", \"name\": \"add\", \"attrs\": {\"func_name\": "
    "\"tvmgen_default_fused_add\", \"num_inputs\": \"2\", \"num_outputs\": \"1\", "
    "\"flatten_data\": \"0\"}, \"inputs\": [[0, 0, 0], [1, 0, 0]]},"
    "{\"op\": \"tvm_op\", \"name\": \"relu\", \"attrs\": {\"func_name\": "
    "\"tvmgen_default_fused_nn_relu\", \"num_inputs\": \"1\", \"num_outputs\": \"1\", "
    "\"flatten_data\": \"0\"}, \"inputs\": [[2, 0, 0]]}],"
    "\"arg_nodes\": [0, 1], \"heads\": [[3, 0, 0]], \"node_row_ptr\": [0, 1, 2, 3, 4],"
    "\"attrs\": {\"dltype\": [\"list_str\", [\"float32\", \"float32\", \"float32\", "
    "\"float32\"]], \"storage_id\": [\"list_int\", [0, 1, 2, 3]], \"shape\": [\"list_shape\", "
    "[[2, 4], [2, 4], [2, 4], [2, 4]]]}}";

static int32_t fused_add(TVMValue* args, int* type_codes, int num_args, TVMValue* ret,
                         int* ret_code, void* resource) {
  (void)type_codes, (void)num_args, (void)ret, (void)ret_code, (void)resource;
  const float* a = (const float*)((DLTensor*)args[0].v_handle)->data;
  const float* b = (const float*)((DLTensor*)args[1].v_handle)->data;
  float* out = (float*)((DLTensor*)args[2].v_handle)->data;
  float* scratch = (float*)TVMBackendAllocWorkspace(1, 0, 256, 2, 32);
  if (scratch == NULL) return -1;
  for (int i = 0; i < 8; ++i) scratch[i] = a[i] + b[i];
  for (int i = 0; i < 8; ++i) out[i] = scratch[i];
  return TVMBackendFreeWorkspace(1, 0, scratch);
}

static int32_t fused_nn_relu(TVMValue* args, int* type_codes, int num_args, TVMValue* ret,
                             int* ret_code, void* resource) {
  (void)type_codes, (void)num_args, (void)ret, (void)ret_code, (void)resource;
  const float* a = (const float*)((DLTensor*)args[0].v_handle)->data;
  float* out = (float*)((DLTensor*)args[1].v_handle)->data;
  for (int i = 0; i < 8; ++i) {
    if (a[i] != a[i]) return -1;
    out[i] = a[i] > 0.0f ? a[i] : 0.0f;
  }
  return 0;
}

static TVMBackendPackedCFunc tiny_funcs[] = {(TVMBackendPackedCFunc)fused_add,
                                             (TVMBackendPackedCFunc)fused_nn_relu};
static const TVMFuncRegistry tiny_registry = {
    "\002\000tvmgen_default_fused_add\000tvmgen_default_fused_nn_relu\000", tiny_funcs};
static const TVMModule tiny_system_lib = {&tiny_registry};

const TVMModule* TVMSystemLibEntryPoint(void) { return &tiny_system_lib; }
