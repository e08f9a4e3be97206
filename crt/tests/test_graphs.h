/*
 * test_graphs.h — graphs shared by the C tests, as graph.json text and as hand-written
 * const tables (the form the generator emits).
 */
#ifndef MLF_TEST_GRAPHS_H_
#define MLF_TEST_GRAPHS_H_

#include <stddef.h>

#include "mlf_runtime.h"

/* JSON written with ' for " (readable in C); returns a malloc'd copy with real quotes. */
char* json_from(const char* single_quoted);

/*
 * "basic": x[1,4], p0[1,4] -> add -> __nop reshape to [4] -> __copy -> split (2 outputs)
 * -> scale2 of split's second output, stored back in the add's pool (a deduplicated view).
 * Outputs: split.out0 = x+p0+1 [4], scale2 = 20*(x+p0) [1,4], the copy = x+p0 [4].
 */
extern const char* const kBasicJson;
/* The same graph with keys shuffled, unknown keys/attrs, device_index and storage_scope. */
extern const char* const kBasicShuffledJson;
/* The tables the parser must produce for it, written by hand. */
extern const mlf_graph kBasicTables;

/* 11 inputs i0..i10 [2] -> sum11 (12 arguments) */
extern const char* const kWideJson;
/* scalar s [] -> scalar3 -> [] */
extern const char* const kScalarJson;
/* x [16] -> workspace -> [16] */
extern const char* const kWorkspaceJson;
/* x [4] -> add(x, x) -> fail (node 2) -> [4] */
extern const char* const kFailJson;
/* x [2,2] -> scale2 with flatten_data "1" -> [2,2] */
extern const char* const kFlattenJson;

/* x [4], a 200-character param name [4] -> the 139-character function (scale2) on the param
 * -> add(x, that). Returns malloc'd JSON; *param_name gets the long name (static). */
char* long_names_json(const char** param_name);

/* A chain of n `add` ops on [1,256] float32, out_i = out_{i-1} + x (so the result is
 * (n+1)*x), outputs alternating between two storage ids. */
char* chain_json(int n);

#endif /* MLF_TEST_GRAPHS_H_ */
