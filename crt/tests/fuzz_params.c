/*
 * fuzz_params.c — libFuzzer target: a params blob → the parser (touching every byte it
 * hands out), then the executor binding it to a fixed graph at init and at load.
 */
#include <stdlib.h>
#include <string.h>

#include "../src/mlf_internal.h"
#include "test_graphs.h"
#include "test_util.h"

static volatile uint8_t g_sink;

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mlf_params_iter it;
  mlf_param p;
  if (mlf_params_open(data, size, &it, NULL) == MLF_OK) {
    uint8_t sum = 0;
    while (mlf_params_next(&it, &p)) {
      for (uint32_t i = 0; i < p.name.len; ++i) sum += (uint8_t)p.name.str[i];
      for (int32_t d = 0; d < p.ndim; ++d) sum += (uint8_t)mlf_read_i64(p.shape + 8 * d);
      for (uint64_t i = 0; i < p.nbytes; ++i) sum += p.data[i];
    }
    g_sink = sum;
  }
  static uint64_t state[128];
  static uint8_t arena[1024];
  size_t arena_bytes;
  mlf_executor ex;
  if (mlf_executor_arena_bytes(&kBasicTables, data, size, 0, &arena_bytes) == MLF_OK &&
      arena_bytes <= sizeof(arena)) {
    mlf_executor_init(&ex, &kBasicTables, &g_test_lib, data, size, state, sizeof(state), arena,
                      sizeof(arena));
  }
  if (mlf_executor_init(&ex, &kBasicTables, &g_test_lib, NULL, 0, state, sizeof(state), arena,
                        sizeof(arena)) == MLF_OK) {
    mlf_executor_load_params(&ex, data, size);
  }
  return 0;
}
