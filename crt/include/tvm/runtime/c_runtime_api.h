/*
 * tvm/runtime/c_runtime_api.h — the part of TVM's C runtime API that TVM-generated operator
 * code (target "c") and firmware written for TVM's CRT use. Written for mlf-project-api from
 * the ABI description in docs (spec/tvm-c-abi.md); values and layouts are TVM's.
 */
#ifndef TVM_RUNTIME_C_RUNTIME_API_H_
#define TVM_RUNTIME_C_RUNTIME_API_H_

#include <stddef.h>
#include <stdint.h>

#include "dlpack/dlpack.h"

#ifndef TVM_DLL
#if defined(_WIN32)
#ifdef TVM_EXPORTS
#define TVM_DLL __declspec(dllexport)
#else
#define TVM_DLL __declspec(dllimport)
#endif
#elif defined(__GNUC__)
#define TVM_DLL __attribute__((visibility("default")))
#else
#define TVM_DLL
#endif
#endif

#ifndef TVM_WEAK
#if defined(__GNUC__)
#define TVM_WEAK __attribute__((weak))
#else
#define TVM_WEAK
#endif
#endif

#define TVM_VERSION "0.14.0"

#ifdef __cplusplus
extern "C" {
#endif

typedef int64_t tvm_index_t;

/* Type code of a packed-call argument (TVMValue). The first four share DLPack's codes. */
typedef enum {
  kTVMArgInt = kDLInt,
  kTVMArgFloat = kDLFloat,
  kTVMOpaqueHandle = 3U,
  kTVMNullptr = 4U,
  kTVMDataType = 5U,
  kDLDevice = 6U,
  kTVMDLTensorHandle = 7U,
  kTVMObjectHandle = 8U,
  kTVMModuleHandle = 9U,
  kTVMPackedFuncHandle = 10U,
  kTVMStr = 11U,
  kTVMBytes = 12U,
  kTVMNDArrayHandle = 13U,
  kTVMObjectRValueRefArg = 14U,
  kTVMExtBegin = 15U,
  kTVMNNVMFirst = 16U,
  kTVMNNVMLast = 20U,
  kTVMExtReserveEnd = 64U,
  kTVMExtEnd = 128U
} TVMArgTypeCode;

typedef DLTensor* TVMArrayHandle;

/* One packed-call argument or return value: 8 bytes. */
typedef union {
  int64_t v_int64;
  double v_float64;
  void* v_handle;
  const char* v_str;
  DLDataType v_type;
  DLDevice v_device;
} TVMValue;

typedef struct {
  const char* data;
  size_t size;
} TVMByteArray;

typedef void* TVMModuleHandle;
typedef void* TVMFunctionHandle;
typedef void* TVMRetValueHandle;
typedef void* TVMStreamHandle;
typedef void* TVMObjectHandle;

/* Stores msg as the last error (copied; long messages are truncated). */
TVM_DLL void TVMAPISetLastError(const char* msg);

/* The last error set by TVMAPISetLastError() or the runtime; "" when none. */
TVM_DLL const char* TVMGetLastError(void);

/* Calls a packed function handle (a TVMBackendPackedCFunc). Returns its status. */
TVM_DLL int TVMFuncCall(TVMFunctionHandle func, TVMValue* arg_values, int* type_codes, int num_args,
                        TVMValue* ret_val, int* ret_type_code);

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_C_RUNTIME_API_H_ */
