/*
 * make_seeds.c — writes the fuzzers' seed corpora from the hand-written test graphs and
 * params blobs: DIR/graph/<n>.json and DIR/params/<n>.params. tests/test_crt_fuzz.py adds
 * the real archives' graphs and params next to them at test time. Also DIR/utvm/ (created):
 * the microTVM RPC server's seeds (utvm_seeds.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_utvm.h"
#include "test_graphs.h"
#include "test_util.h"

static int write_seed(const char* dir, const char* kind, int n, const void* data, size_t len) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s/seed%02d", dir, kind, n);
  FILE* f = fopen(path, "wb");
  if (f == NULL || fwrite(data, 1, len, f) != len) {
    fprintf(stderr, "make_seeds: cannot write %s\n", path);
    return 1;
  }
  fclose(f);
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: make_seeds DIR (with DIR/graph and DIR/params existing)\n");
    return 2;
  }
  const char* quoted[] = {kBasicJson,     kBasicShuffledJson, kWideJson,   kScalarJson,
                          kWorkspaceJson, kFailJson,          kFlattenJson};
  int rc = 0, n = 0;
  for (size_t i = 0; i < sizeof(quoted) / sizeof(quoted[0]); ++i, ++n) {
    char* json = json_from(quoted[i]);
    rc |= write_seed(argv[1], "graph", n, json, strlen(json));
    free(json);
  }
  const char* param_name;
  char* json = long_names_json(&param_name);
  rc |= write_seed(argv[1], "graph", n++, json, strlen(json));
  free(json);
  json = chain_json(12);
  rc |= write_seed(argv[1], "graph", n++, json, strlen(json));
  free(json);

  static const float kP0[4] = {10, 20, 30, 40};
  static const int8_t kBytes[6] = {1, 2, 3, 4, 5, 6};
  static const int64_t kShape14[2] = {1, 4}, kShape23[2] = {2, 3};
  const test_param sets[][2] = {
      {{"p0", {kDLFloat, 32, 1}, 2, kShape14, kP0, 16},
       {"w", {kDLInt, 8, 1}, 2, kShape23, kBytes, 6}},
      {{"x", {kDLFloat, 32, 1}, 2, kShape14, kP0, 16}, {"", {kDLInt, 8, 1}, 0, NULL, kBytes, 1}},
  };
  uint8_t blob[512];
  for (size_t i = 0; i < 2; ++i) {
    size_t len = test_params_write(sets[i], 2, blob, sizeof(blob));
    rc |= write_seed(argv[1], "params", (int)i, blob, len);
  }
  size_t len = test_params_write(NULL, 0, blob, sizeof(blob));
  rc |= write_seed(argv[1], "params", 2, blob, len);
  rc |= utvm_write_seeds(argv[1]);
  return rc;
}
