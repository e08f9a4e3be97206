/*
 * ram_chain.c — the RAM benchmark: a chain of 400 `add` operators on [1,256] float32 (input
 * x, outputs alternating between two storage ids), parsed from graph.json on the device.
 * Prints the memory beyond tensors and workspace (graph tables incl. the parser's temporary,
 * and executor state), checks the result, and fails above the 16 KiB budget.
 * Built for the host by CTest and for Cortex-M3 by tests/test_crt.py (run under QEMU).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_graphs.h"
#include "test_util.h"

#define OPS 400
#define BUDGET (16 * 1024)

int main(void) {
  char* json = chain_json(OPS);
  size_t table_bytes, arena_bytes;
  mlf_error err;
  const mlf_graph* g;
  if (mlf_graph_measure_json(json, strlen(json), &table_bytes, &err) != MLF_OK) return 2;
  void* tables = malloc(table_bytes);
  if (mlf_graph_parse_json(json, strlen(json), tables, table_bytes, &g, &err) != MLF_OK) return 3;
  size_t state_bytes = mlf_executor_state_bytes(g);
  if (mlf_executor_arena_bytes(g, NULL, 0, 0, &arena_bytes) != MLF_OK) return 4;
  void* state = malloc(state_bytes);
  void* arena = malloc(arena_bytes);
  mlf_executor ex;
  if (mlf_executor_init(&ex, g, &g_test_lib, NULL, 0, state, state_bytes, arena, arena_bytes) !=
      MLF_OK) {
    return 5;
  }
  static float x[256], y[256];
  for (int i = 0; i < 256; ++i) x[i] = (float)i / 256;
  mlf_executor_set_input(&ex, 0, x, sizeof(x));
  g_op_calls = 0;
  if (mlf_executor_run(&ex) != MLF_OK || g_op_calls != OPS) return 6;
  mlf_executor_get_output(&ex, 0, y, sizeof(y));
  for (int i = 0; i < 256; ++i) {
    if (y[i] != (OPS + 1) * x[i]) return 7;
  }
  printf(
      "chain of %d adds: tables=%u (of which %u temporary) state=%u total=%u bytes; "
      "tensors=%u bytes; json=%u bytes; pointer=%u bytes\n",
      OPS, (unsigned)table_bytes, (unsigned)((OPS + 1) * sizeof(uint32_t)), (unsigned)state_bytes,
      (unsigned)(table_bytes + state_bytes), (unsigned)arena_bytes, (unsigned)strlen(json),
      (unsigned)sizeof(void*));
  free(tables);
  free(state);
  free(arena);
  free(json);
  return table_bytes + state_bytes <= BUDGET ? 0 : 1;
}
