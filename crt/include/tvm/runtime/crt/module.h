/*
 * tvm/runtime/crt/module.h — the system-library function registry that TVM's C code
 * generator emits (in <model>_lib0.c) for runtime "crt" with system-lib.
 * Written for mlf-project-api from the ABI description (spec/tvm-c-abi.md §4).
 */
#ifndef TVM_RUNTIME_CRT_MODULE_H_
#define TVM_RUNTIME_CRT_MODULE_H_

#include <stddef.h>
#include <stdint.h>

#include "tvm/runtime/c_backend_api.h"
#include "tvm/runtime/c_runtime_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * `names` is a blob: a function count (2 bytes, uint16 little-endian; 1 byte in TVM <= 0.8),
 * then each name NUL-terminated, then an empty name. Name i belongs to funcs[i]. The layout
 * is fixed by the generated positional initialiser {names, funcs}.
 */
typedef struct TVMFuncRegistry {
  const char* names;
  const TVMBackendPackedCFunc* funcs;
} TVMFuncRegistry;

typedef struct TVMModule {
  const TVMFuncRegistry* registry;
} TVMModule;

/* Defined by the generated registry file of every system-lib model. */
const TVMModule* TVMSystemLibEntryPoint(void);

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_MODULE_H_ */
