/* fake_runtime.c — see fake_runtime.h. Test code: the workspace binding is a static, as in
 * the real runtime (TVM's workspace ABI takes no context). */
#define _POSIX_C_SOURCE 200809L
#include "fake_runtime.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static mlf_workspace* bound_workspace;

static void tensor_init(fake_tensor* t, const char* name, DLDataType dtype, int32_t ndim,
                        int64_t d0, int64_t d1, void* data) {
  memset(t, 0, sizeof(*t));
  t->name = name;
  t->name_len = name != NULL ? (uint32_t)strlen(name) : 0;
  t->ndim = ndim;
  t->shape[0] = d0;
  t->shape[1] = d1;
  size_t count = 1;
  for (int32_t i = 0; i < ndim; ++i) count *= (size_t)t->shape[i];
  t->nbytes = count * ((dtype.bits * dtype.lanes + 7u) / 8u);
  t->tensor.data = data;
  t->tensor.device.device_type = kDLCPU;
  t->tensor.ndim = ndim;
  t->tensor.dtype = dtype;
  t->tensor.shape = t->shape;
}

static DLDataType dt(uint8_t code, uint8_t bits) {
  DLDataType d;
  d.code = code;
  d.bits = bits;
  d.lanes = 1;
  return d;
}

static void model_init(fake_model* m, fake_kind kind) {
  memset(m, 0, sizeof(*m));
  m->kind = kind;
  m->ex.ready = 1;
  m->ex.error.status = MLF_OK;
  m->ex.error.node = UINT32_MAX;
  m->ex.error.offset = UINT32_MAX;
}

void fake_model_adder(fake_model* m) {
  model_init(m, FAKE_ADDER);
  m->num_inputs = 2;
  m->num_outputs = 2;
  tensor_init(&m->inputs[0], "x", dt(kDLFloat, 32), 2, 2, 3, m->adder_x);
  tensor_init(&m->inputs[1], "y\\u00e9", dt(kDLInt, 8), 1, 4, 0, m->adder_y);
  tensor_init(&m->outputs[0], NULL, dt(kDLFloat, 32), 2, 2, 3, m->adder_out);
  tensor_init(&m->outputs[1], NULL, dt(kDLInt, 32), 1, 1, 0, &m->adder_sum);
}

void fake_model_echo(fake_model* m, uint8_t* in, uint8_t* out, size_t n) {
  model_init(m, FAKE_ECHO);
  m->num_inputs = 1;
  m->num_outputs = 1;
  tensor_init(&m->inputs[0], "data", dt(kDLUInt, 8), 1, (int64_t)n, 0, in);
  tensor_init(&m->outputs[0], NULL, dt(kDLUInt, 8), 1, (int64_t)n, 0, out);
  m->traps = 1;
}

static fake_model* fake(const mlf_executor* ex) { return (fake_model*)(uintptr_t)ex; }

const char* mlf_status_name(mlf_status status) {
  switch (status) {
    case MLF_OK:
      return "ok";
    case MLF_ERR_OPERATOR:
      return "operator failed";
    case MLF_ERR_MISSING_FUNCTION:
      return "missing function";
    case MLF_ERR_STATE:
      return "bad state";
    default:
      return "error";
  }
}

size_t mlf_error_format(const mlf_error* err, char* buf, size_t size) {
  const char* text = err->what != NULL ? err->what : mlf_status_name(err->status);
  size_t n = strlen(text);
  if (size == 0) return 0;
  if (n >= size) n = size - 1;
  memcpy(buf, text, n);
  buf[n] = '\0';
  return n;
}

uint32_t mlf_executor_num_inputs(const mlf_executor* ex) { return fake(ex)->num_inputs; }
uint32_t mlf_executor_num_outputs(const mlf_executor* ex) { return fake(ex)->num_outputs; }

static mlf_status info_of(const fake_tensor* t, mlf_tensor_info* info) {
  info->name = t->name;
  info->name_len = t->name_len;
  info->ndim = t->ndim;
  info->shape = t->shape;
  info->dtype = t->tensor.dtype;
  info->nbytes = t->nbytes;
  return MLF_OK;
}

mlf_status mlf_executor_input_info(const mlf_executor* ex, uint32_t index, mlf_tensor_info* info) {
  if (index >= fake(ex)->num_inputs) return MLF_ERR_ARGUMENT;
  return info_of(&fake(ex)->inputs[index], info);
}

mlf_status mlf_executor_output_info(const mlf_executor* ex, uint32_t index, mlf_tensor_info* info) {
  if (index >= fake(ex)->num_outputs) return MLF_ERR_ARGUMENT;
  return info_of(&fake(ex)->outputs[index], info);
}

void* mlf_executor_input_data(mlf_executor* ex, uint32_t index) {
  return index < fake(ex)->num_inputs ? fake(ex)->inputs[index].tensor.data : NULL;
}

const void* mlf_executor_output_data(const mlf_executor* ex, uint32_t index) {
  return index < fake(ex)->num_outputs ? fake(ex)->outputs[index].tensor.data : NULL;
}

mlf_status mlf_executor_set_input(mlf_executor* ex, uint32_t index, const void* data,
                                  size_t nbytes) {
  if (index >= fake(ex)->num_inputs || nbytes != fake(ex)->inputs[index].nbytes) {
    return MLF_ERR_ARGUMENT;
  }
  memcpy(fake(ex)->inputs[index].tensor.data, data, nbytes);
  return MLF_OK;
}

const mlf_error* mlf_executor_error(const mlf_executor* ex) { return &ex->error; }

void mlf_workspace_bind(mlf_workspace* ws) { bound_workspace = ws; }

size_t mlf_workspace_high_water(const mlf_workspace* ws) { return ws->high_water; }

void mlf_workspace_reset(mlf_workspace* ws) {
  if (ws != NULL) ws->top = 0, ws->depth = 0;
}

mlf_status mlf_executor_run(mlf_executor* ex) {
  fake_model* m = fake(ex);
  ex->error.status = MLF_OK;
  ex->error.node = UINT32_MAX;
  ex->error.what = NULL;
  ex->error.why = 0;
  ex->error.subject = NULL;
  ex->error.subject_len = 0;
  if (bound_workspace != NULL && bound_workspace->high_water < 4096) {
    bound_workspace->high_water = 4096;
  }
  if (m->kind == FAKE_ADDER) {
    for (int i = 0; i < 6; ++i) m->adder_out[i] = 2.0f * m->adder_x[i] + 1.0f;
    m->adder_sum = 0;
    for (int i = 0; i < 4; ++i) m->adder_sum += m->adder_y[i];
    return MLF_OK;
  }
  uint8_t* in = (uint8_t*)m->inputs[0].tensor.data;
  uint8_t* out = (uint8_t*)m->outputs[0].tensor.data;
  size_t n = m->inputs[0].nbytes;
  if (n > 0 && in[0] == 0xFF) {
    ex->error.status = MLF_ERR_OPERATOR;
    ex->error.node = 3;
    ex->error.what = "operator returned an error";
    ex->error.why = 11; /* MLF_WHY_OPERATOR_FAILED */
    ex->error.subject = "tvmgen_default_fused_add";
    ex->error.subject_len = 24;
    return MLF_ERR_OPERATOR;
  }
  if (n > 0 && in[0] == 0xFE && m->traps) {
    for (;;) sleep(3600);
  }
  if (n > 0 && in[0] == 0xFD && m->traps) abort();
  for (size_t i = 0; i < n; ++i) out[i] = in[i] ^ 0x5Au;
  return MLF_OK;
}
