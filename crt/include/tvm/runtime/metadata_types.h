/*
 * tvm/runtime/metadata_types.h — the model description tables TVM's AOT code generator emits
 * for interface-api=packed (`tvmgen_<mod>_get_c_metadata` in <mod>_lib1.c). The layouts are
 * fixed by the generated positional initialisers:
 *
 *   {"x", kTvmgenMetadata_inputs_0_shape, 2L, {2, 32, 1}}      a TVMTensorInfo
 *   {1L, inputs, 1L, outputs, 1L, pools, 0L, consts, 0L, "tvmgen_default"}   a TVMMetadata
 *
 * Written for mlf-project-api; the firmware does not read these tables (the generator takes
 * the same facts from the archive), the model's C only needs them to compile.
 */
#ifndef TVM_RUNTIME_METADATA_TYPES_H_
#define TVM_RUNTIME_METADATA_TYPES_H_

#include <stdint.h>

#include "dlpack/dlpack.h"

#ifdef __cplusplus
extern "C" {
#endif

struct TVMTensorInfo {
  const char* name;
  const int64_t* shape;
  int64_t num_shape;
  DLDataType dtype;
};

struct TVMConstantInfo {
  const char* name_hint;
  int64_t byte_offset;
  int64_t data_len;
  const void* data_bytes;
};

struct TVMMetadata {
  int64_t version;
  const struct TVMTensorInfo* inputs;
  int64_t num_inputs;
  const struct TVMTensorInfo* outputs;
  int64_t num_outputs;
  const struct TVMTensorInfo* workspace_pools;
  int64_t num_workspace_pools;
  const struct TVMConstantInfo* constant_pools;
  int64_t num_constant_pools;
  const char* mod_name;
};

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_METADATA_TYPES_H_ */
