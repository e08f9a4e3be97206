/*
 * tvm/runtime/c_backend_api.h — runtime services TVM-generated operator code calls:
 * workspace memory, the packed-function type, function lookup for extern calls.
 * Written for mlf-project-api from the ABI description (spec/tvm-c-abi.md).
 */
#ifndef TVM_RUNTIME_C_BACKEND_API_H_
#define TVM_RUNTIME_C_BACKEND_API_H_

#include <stddef.h>
#include <stdint.h>

#include "tvm/runtime/c_runtime_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Every operator has this signature. Generated operator files define them as
 * (void*, int32_t*, int32_t, void*, int32_t*, void*) and the registry file declares them as
 * below; both assume a 32-bit int. Returns 0 on success, non-zero on failure.
 */
typedef int (*TVMBackendPackedCFunc)(TVMValue* args, int* type_codes, int num_args,
                                     TVMValue* out_ret_value, int* out_ret_tcode,
                                     void* resource_handle);

/* Finds a packed function for a generated extern call. Our runtime keeps no global module,
 * so this always fails (returns -1 and sets the last error); graph builds never call it. */
TVM_DLL int TVMBackendGetFuncFromEnv(void* mod_node, const char* func_name, TVMFunctionHandle* out);

/* Scratch memory for an operator: 64-byte aligned, NULL when the workspace is exhausted
 * (the operator then returns -1). Blocks are freed in strict LIFO order. */
TVM_DLL void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes,
                                       int dtype_code_hint, int dtype_bits_hint);

/* Frees the most recent block; non-zero when ptr is not a live workspace block. */
TVM_DLL int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr);

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_C_BACKEND_API_H_ */
