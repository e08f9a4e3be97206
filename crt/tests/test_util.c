/*
 * test_util.c — see test_util.h.
 */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int g_test_failures;
int g_op_calls;

void test_report_failure(const char* file, int line, const char* what) {
  fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what);
  ++g_test_failures;
}

void test_report_mismatch(const char* file, int line, const char* what, long long actual,
                          long long expected) {
  fprintf(stderr, "%s:%d: %s is %lld, expected %lld\n", file, line, what, actual, expected);
  ++g_test_failures;
}

void test_check_status(const char* file, int line, const char* what, mlf_status actual,
                       mlf_status expected, const mlf_error* err) {
  if (actual == expected) return;
  char message[256] = "";
  if (err != NULL) mlf_error_format(err, message, sizeof(message));
  fprintf(stderr, "%s:%d: %s returned %s, expected %s (%s)\n", file, line, what,
          mlf_status_name(actual), mlf_status_name(expected), message);
  ++g_test_failures;
}

void test_run(const char* name, void (*test)(void)) {
  int before = g_test_failures;
  test();
  fprintf(stderr, "%s %s\n", g_test_failures == before ? "ok  " : "FAIL", name);
}

int test_finish(void) {
  fprintf(stderr, "%d failure(s)\n", g_test_failures);
  return g_test_failures == 0 ? 0 : 1;
}

/* ---- operators -------------------------------------------------------------------------- */

static int64_t numel(const DLTensor* t) {
  int64_t n = 1;
  for (int32_t d = 0; d < t->ndim; ++d) n *= t->shape[d];
  return n;
}

/* What every operator verifies first: the runtime's side of the calling convention. */
static int args_ok(const TVMValue* args, const int* codes, int num_args, int expected) {
  if (num_args != expected) return 0;
  for (int i = 0; i < num_args; ++i) {
    const DLTensor* t = (const DLTensor*)args[i].v_handle;
    if (codes[i] != kTVMNDArrayHandle || t->strides != NULL || t->byte_offset != 0 ||
        t->device.device_type != kDLCPU || t->data == NULL ||
        ((uintptr_t)t->data & (MLF_STORAGE_ALIGN - 1)) != 0) {
      return 0;
    }
  }
  return 1;
}

#define TENSOR(i) ((DLTensor*)args[(i)].v_handle)
#define F32(i) ((float*)TENSOR(i)->data)

int32_t op_add(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code,
               void* resource) {
  (void)ret, (void)ret_code, (void)resource;
  ++g_op_calls;
  if (!args_ok(args, codes, num_args, 3)) return -1;
  int64_t n = numel(TENSOR(2)), na = numel(TENSOR(0)), nb = numel(TENSOR(1));
  for (int64_t i = 0; i < n; ++i) F32(2)[i] = F32(0)[na == 1 ? 0 : i] + F32(1)[nb == 1 ? 0 : i];
  return 0;
}

int32_t op_scale2(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code,
                  void* resource) {
  (void)ret, (void)ret_code, (void)resource;
  ++g_op_calls;
  if (!args_ok(args, codes, num_args, 2) || numel(TENSOR(0)) != numel(TENSOR(1))) return -1;
  for (int64_t i = 0; i < numel(TENSOR(1)); ++i) F32(1)[i] = 2 * F32(0)[i];
  return 0;
}

int32_t op_split(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code,
                 void* resource) {
  (void)ret, (void)ret_code, (void)resource;
  ++g_op_calls;
  if (!args_ok(args, codes, num_args, 3)) return -1;
  for (int64_t i = 0; i < numel(TENSOR(0)); ++i) {
    F32(1)[i] = F32(0)[i] + 1;
    F32(2)[i] = F32(0)[i] * 10;
  }
  return 0;
}

int32_t op_sum11(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code,
                 void* resource) {
  (void)ret, (void)ret_code, (void)resource;
  ++g_op_calls;
  if (!args_ok(args, codes, num_args, 12)) return -1;
  for (int64_t i = 0; i < numel(TENSOR(11)); ++i) {
    float sum = 0;
    for (int k = 0; k < 11; ++k) sum += F32(k)[i];
    F32(11)[i] = sum;
  }
  return 0;
}

int32_t op_scalar3(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code,
                   void* resource) {
  (void)ret, (void)ret_code, (void)resource;
  ++g_op_calls;
  if (!args_ok(args, codes, num_args, 2) || TENSOR(0)->ndim != 0 || TENSOR(1)->ndim != 0) {
    return -1;
  }
  F32(1)[0] = F32(0)[0] * 3;
  return 0;
}

int32_t op_workspace(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code,
                     void* resource) {
  (void)ret, (void)ret_code, (void)resource;
  ++g_op_calls;
  if (!args_ok(args, codes, num_args, 2)) return -1;
  float* outer = (float*)TVMBackendAllocWorkspace(kDLCPU, 0, 2048, kDLFloat, 32);
  if (outer == NULL) return -1;
  float* inner = (float*)TVMBackendAllocWorkspace(kDLCPU, 0, 1024, kDLFloat, 32);
  if (inner == NULL) return -1;
  if (((uintptr_t)outer | (uintptr_t)inner) & 63) return -1;
  for (int64_t i = 0; i < numel(TENSOR(0)); ++i) {
    inner[i] = F32(0)[i] + 60;
    outer[i] = inner[i] + 40;
    F32(1)[i] = outer[i];
  }
  if (TVMBackendFreeWorkspace(kDLCPU, 0, inner) != 0) return -1;
  if (TVMBackendFreeWorkspace(kDLCPU, 0, outer) != 0) return -1;
  return 0;
}

int32_t op_fail(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code,
                void* resource) {
  (void)args, (void)codes, (void)num_args, (void)ret, (void)ret_code, (void)resource;
  ++g_op_calls;
  if (TVMBackendAllocWorkspace(kDLCPU, 0, 100, kDLFloat, 32) == NULL) return -1;
  return -1;
}

/* Laid out exactly like TVM's generated <model>_lib0.c (count, names, empty terminator). */
static TVMBackendPackedCFunc g_funcs[] = {
    (TVMBackendPackedCFunc)op_add,       (TVMBackendPackedCFunc)op_fail,
    (TVMBackendPackedCFunc)op_scale2,    (TVMBackendPackedCFunc)op_scalar3,
    (TVMBackendPackedCFunc)op_split,     (TVMBackendPackedCFunc)op_sum11,
    (TVMBackendPackedCFunc)op_workspace, (TVMBackendPackedCFunc)op_scale2,
    (TVMBackendPackedCFunc)op_add,
};
static const TVMFuncRegistry g_registry = {
    "\x09\000add\000fail\000scale2\000scalar3\000split\000sum11\000workspace\000" LONG_FUNC_NAME
    "\000tvmgen_default_fused_add\000",
    g_funcs,
};
const TVMModule g_test_lib = {&g_registry};

static const TVMFuncRegistry g_registry_v08 = {
    "\x09"
    "add\000fail\000scale2\000scalar3\000split\000sum11\000workspace\000" LONG_FUNC_NAME
    "\000tvmgen_default_fused_add\000",
    g_funcs,
};
const TVMModule g_test_lib_v08 = {&g_registry_v08};

/* ---- params blobs ------------------------------------------------------------------------- */

static void put_u64(uint8_t* buf, size_t size, size_t* at, uint64_t value) {
  for (int i = 0; i < 8; ++i, ++*at) {
    if (*at < size) buf[*at] = (uint8_t)(value >> (8 * i));
  }
}

static void put_bytes(uint8_t* buf, size_t size, size_t* at, const void* data, size_t n) {
  for (size_t i = 0; i < n; ++i, ++*at) {
    if (*at < size) buf[*at] = ((const uint8_t*)data)[i];
  }
}

static size_t write_blob(const test_param* params, size_t count, uint8_t* buf, size_t size,
                         size_t data_of) {
  size_t at = 0;
  put_u64(buf, size, &at, 0xF7E58D4F05049CB7ull);
  put_u64(buf, size, &at, 0);
  put_u64(buf, size, &at, count);
  for (size_t i = 0; i < count; ++i) {
    put_u64(buf, size, &at, strlen(params[i].name));
    put_bytes(buf, size, &at, params[i].name, strlen(params[i].name));
  }
  put_u64(buf, size, &at, count);
  for (size_t i = 0; i < count; ++i) {
    const test_param* p = &params[i];
    uint8_t head[16] = {1,
                        0,
                        0,
                        0,
                        0,
                        0,
                        0,
                        0,
                        0,
                        0,
                        0,
                        0,
                        p->dtype.code,
                        p->dtype.bits,
                        (uint8_t)p->dtype.lanes,
                        (uint8_t)(p->dtype.lanes >> 8)};
    memcpy(head + 8, &p->ndim, 4); /* little-endian hosts only, like the tests' data */
    put_u64(buf, size, &at, 0xDD5E40F096B4A13Full);
    put_u64(buf, size, &at, 0);
    put_bytes(buf, size, &at, head, sizeof(head));
    for (int32_t d = 0; d < p->ndim; ++d) put_u64(buf, size, &at, (uint64_t)p->shape[d]);
    put_u64(buf, size, &at, p->nbytes);
    if (i == data_of) return at;
    put_bytes(buf, size, &at, p->data, (size_t)p->nbytes);
  }
  return at;
}

size_t test_params_write(const test_param* params, size_t count, uint8_t* buf, size_t size) {
  return write_blob(params, count, buf, size, SIZE_MAX);
}

size_t test_params_data_offset(const test_param* params, size_t count, size_t index) {
  return write_blob(params, count, NULL, 0, index);
}

char* test_read_file(const char* path, size_t* len) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* data = (char*)malloc((size_t)size + 1);
  if (data != NULL && fread(data, 1, (size_t)size, f) != (size_t)size) {
    free(data);
    data = NULL;
  }
  fclose(f);
  if (data != NULL) {
    data[size] = '\0';
    *len = (size_t)size;
  }
  return data;
}
