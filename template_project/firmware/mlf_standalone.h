/*
 * mlf_standalone.h — the `standalone` firmware: runs the sample inputs embedded in the image
 * once per model, prints what came out as text lines on the console link, compares with
 * embedded expected outputs when there are any, and ends with a status.
 *
 * What a generated main.c does:
 *
 *   static const void* const sample0_inputs[] = {input0_bytes};      one per model input
 *   static const void* const sample0_expected[] = {output0_bytes};   one per output, or NULL
 *   static const mlf_standalone_sample samples[] = {{sample0_inputs, sample0_expected}};
 *   const mlf_standalone_model models[] = {{"default", &executor, &workspace, init_status,
 *                                           samples, 1}};
 *   const mlf_standalone_config config = {models, 1, "host", 1e-5f, 1e-6f, 4096};
 *   mlf_platform_init(); ... mlf_executor_init() ...
 *   mlf_platform_exit(mlf_standalone_run(&config));
 *
 * Every data pointer must hold exactly the tensor's byte size (mlf_tensor_info.nbytes).
 *
 * The text (docs/protocol.md, "standalone output"; parsed by
 * project_api.transport.standalone): one record per line, `key=value` fields, e.g.
 *
 *   mlf-standalone 1 board=host models=1
 *   model index=0 samples=1 name=default                       (name, message: rest of line)
 *   run model=0 sample=0 status=0 ticks=81234 tick_hz=1000000000 workspace=4096
 *   output model=0 sample=0 index=0 dtype=float32 shape=1x10 nbytes=40 crc32=8d1f03aa
 *     argmax=7 check=pass                                     (one line on the wire)
 *   data model=0 sample=0 index=0 offset=0 hex=0000803f...     (outputs <= max_print_bytes)
 *   error model=0 sample=0 code=9 node=3 message=error 9: #7 at node 3
 *   result status=pass runs=1 mismatches=0 errors=0
 */
#ifndef MLF_STANDALONE_H_
#define MLF_STANDALONE_H_

#include <stddef.h>
#include <stdint.h>

#include "mlf_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Exit statuses of mlf_standalone_run(). */
#define MLF_STANDALONE_PASS 0     /* every run succeeded and matched (or had nothing to match) */
#define MLF_STANDALONE_MISMATCH 1 /* an output differed from its expected value */
#define MLF_STANDALONE_ERROR 2    /* a model failed to initialise or run */

#define MLF_STANDALONE_VERSION 1

typedef struct {
  const void* const* inputs;   /* one per model input, in input order; NULL entry: leave it */
  const void* const* expected; /* one per model output, or NULL; NULL entry: do not check */
} mlf_standalone_sample;

typedef struct {
  const char* name; /* NUL-terminated */
  mlf_executor* executor;
  mlf_workspace* workspace; /* bound around every run; NULL when the model needs none */
  mlf_status init_status;   /* what mlf_executor_init() returned */
  const mlf_standalone_sample* samples;
  uint32_t num_samples;
} mlf_standalone_model;

typedef struct {
  const mlf_standalone_model* models;
  uint32_t num_models;
  const char* board;
  float rtol; /* floats match when |got - want| <= atol + rtol * |want| (NaN matches NaN) */
  float atol;
  uint32_t max_print_bytes; /* outputs up to this size are printed in full as hex */
} mlf_standalone_config;

/* Runs every sample of every model; returns an MLF_STANDALONE_* status. */
int mlf_standalone_run(const mlf_standalone_config* config);

#ifdef __cplusplus
}
#endif

#endif /* MLF_STANDALONE_H_ */
