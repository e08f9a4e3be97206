/*
 * tvm/runtime/crt/graph_executor.h — TVM CRT's TVMGraphExecutor_* calls over our executor
 * (crt/src/mlf_tvm_compat.c), so firmware written for TVM's CRT ports with few changes.
 *
 * Memory comes from the firmware's TVMPlatformMemoryAllocate(), as in TVM: a copy of the
 * graph JSON, the graph tables, the executor state and the tensor arena. Operators that
 * need scratch memory draw it from the workspace bound with mlf_workspace_bind(): bind one
 * before TVMGraphExecutor_Run (TVM's CRT used its page allocator instead).
 *
 * Differences from TVM's declarations: GetNumInputs/GetNumOutputs take the executor;
 * SetInput and Run return a status (0 or -1) instead of void — callers that ignore it are
 * unaffected. On failure the message is in TVMGetLastError().
 */
#ifndef TVM_RUNTIME_CRT_GRAPH_EXECUTOR_H_
#define TVM_RUNTIME_CRT_GRAPH_EXECUTOR_H_

#include <stdint.h>

#include "dlpack/dlpack.h"
#include "tvm/runtime/c_runtime_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TVMGraphExecutor TVMGraphExecutor;

/* module_handle is the system library: (TVMModuleHandle)TVMSystemLibEntryPoint().
 * devices may be NULL or must name kDLCPU. Returns 0 on success. */
int TVMGraphExecutor_Create(const char* sym_json, TVMModuleHandle module_handle,
                            const DLDevice* devices, TVMGraphExecutor** executor);

/* Index of the input (null node not bound from params) of that name, or -1. */
int TVMGraphExecutor_GetInputIndex(TVMGraphExecutor* executor, const char* name);

int TVMGraphExecutor_GetNumInputs(TVMGraphExecutor* executor);
int TVMGraphExecutor_GetNumOutputs(TVMGraphExecutor* executor);

/* Copies data_in (same byte size as the input) into the input of that name. */
int TVMGraphExecutor_SetInput(TVMGraphExecutor* executor, const char* name, DLTensor* data_in);

/* Copies output `index` into out->data (out must hold the output's bytes). */
int TVMGraphExecutor_GetOutput(TVMGraphExecutor* executor, const int32_t index, DLTensor* out);

/* Copies params from a TVM params blob; args so bound stop being inputs. */
int TVMGraphExecutor_LoadParams(TVMGraphExecutor* executor, const char* param_blob,
                                const uint32_t param_size);

int TVMGraphExecutor_Run(TVMGraphExecutor* executor);

/* Frees everything Create allocated and sets *executor to NULL. */
int TVMGraphExecutor_Release(TVMGraphExecutor** executor);

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_GRAPH_EXECUTOR_H_ */
