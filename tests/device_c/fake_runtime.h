/*
 * fake_runtime.h — a stand-in for the few mlf_executor_* functions the device loop calls,
 * with two hand-made "models", so the protocol can be tested without the real runtime.
 *
 *   adder: inputs  x  float32[2,3], y\u00e9 (a JSON-escaped name) int8[4]
 *          outputs output0 float32[2,3] = 2*x + 1, output1 int32[1] = sum(y)
 *   echo:  input   data uint8[n]; output0 uint8[n] = data ^ 0x5A
 *          data[0] == 0xFF: fails as operator node 3; 0xFE: hangs; 0xFD: crashes (abort)
 */
#ifndef FAKE_RUNTIME_H_
#define FAKE_RUNTIME_H_

#include <stddef.h>
#include <stdint.h>

#include "mlf_runtime.h"

typedef struct {
  const char* name;
  uint32_t name_len;
  int32_t ndim;
  int64_t shape[2];
  DLTensor tensor;
  size_t nbytes;
} fake_tensor;

typedef enum { FAKE_ADDER, FAKE_ECHO } fake_kind;

typedef struct {
  mlf_executor ex; /* first, so an mlf_executor* of a fake model points at the fake_model */
  fake_kind kind;
  uint32_t num_inputs;
  uint32_t num_outputs;
  fake_tensor inputs[2];
  fake_tensor outputs[2];
  float adder_x[6];
  int8_t adder_y[4];
  float adder_out[6];
  int32_t adder_sum;
  int traps; /* echo: honour the hang/crash bytes (on by default; fuzzers turn it off) */
} fake_model;

void fake_model_adder(fake_model* m);
/* in and out must hold n bytes each. */
void fake_model_echo(fake_model* m, uint8_t* in, uint8_t* out, size_t n);

#endif /* FAKE_RUNTIME_H_ */
