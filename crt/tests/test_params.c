/*
 * test_params.c — the params blob parser against well-formed and hostile blobs: every
 * truncation, wrong magics, huge counts and lengths, inconsistent sizes. Hostile input must
 * give MLF_ERR_PARAMS, never a crash (run under ASan/UBSan).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/mlf_internal.h"
#include "test_graphs.h"
#include "test_util.h"

static const int64_t kShape23[2] = {2, 3};
static const int64_t kShape0[1] = {0};
static const int8_t kData6[6] = {1, -2, 3, -4, 5, -6};

static size_t sample_blob(uint8_t* buf, size_t size) {
  test_param params[] = {
      {"weights", {kDLInt, 8, 1}, 2, kShape23, kData6, 6},
      {"", {kDLFloat, 32, 1}, 1, kShape0, NULL, 0},   /* empty name, empty tensor */
      {"scalar", {kDLInt, 8, 1}, 0, NULL, kData6, 1}, /* ndim 0 */
  };
  return test_params_write(params, 3, buf, size);
}

static void test_iterates_in_order(void) {
  uint8_t blob[512];
  size_t len = sample_blob(blob, sizeof(blob));
  mlf_params_iter it;
  mlf_param p;
  mlf_error err;
  mlf_error_clear(&err);
  CHECK_STATUS(mlf_params_open(blob, len, &it, &err), MLF_OK, &err);
  CHECK(mlf_params_next(&it, &p));
  CHECK(p.name.len == 7 && memcmp(p.name.str, "weights", 7) == 0);
  CHECK(p.ndim == 2 && mlf_read_i64(p.shape) == 2 && mlf_read_i64(p.shape + 8) == 3);
  CHECK(p.dtype.code == kDLInt && p.dtype.bits == 8 && p.dtype.lanes == 1);
  CHECK(p.nbytes == 6 && memcmp(p.data, kData6, 6) == 0);
  CHECK(mlf_params_next(&it, &p));
  CHECK(p.name.len == 0 && p.nbytes == 0 && p.ndim == 1);
  CHECK(mlf_params_next(&it, &p));
  CHECK(p.ndim == 0 && p.nbytes == 1 && ((const int8_t*)p.data)[0] == 1);
  CHECK(!mlf_params_next(&it, &p));

  /* An empty dict is 32 bytes. */
  len = test_params_write(NULL, 0, blob, sizeof(blob));
  CHECK_EQ_INT(len, 32);
  CHECK_STATUS(mlf_params_open(blob, len, &it, &err), MLF_OK, &err);
  CHECK(!mlf_params_next(&it, &p));

  /* Unaligned anywhere: the reader never casts the blob. */
  uint8_t shifted[600];
  len = sample_blob(blob, sizeof(blob));
  for (int shift = 1; shift < 8; ++shift) {
    memcpy(shifted + shift, blob, len);
    CHECK_STATUS(mlf_params_open(shifted + shift, len, &it, &err), MLF_OK, &err);
    CHECK(mlf_params_next(&it, &p) && mlf_read_i64(p.shape + 8) == 3);
  }
  /* Trailing bytes after the last tensor are tolerated. */
  CHECK_STATUS(mlf_params_open(blob, len + 5, &it, &err), MLF_OK, &err);
}

static void test_truncated_everywhere(void) {
  uint8_t blob[512];
  size_t len = sample_blob(blob, sizeof(blob));
  for (size_t cut = 0; cut < len; ++cut) {
    uint8_t* prefix = (uint8_t*)malloc(cut + 1); /* exact size: ASan sees any overread */
    memcpy(prefix, blob, cut);
    mlf_params_iter it;
    mlf_error err;
    mlf_error_clear(&err);
    CHECK_STATUS(mlf_params_open(prefix, cut, &it, &err), MLF_ERR_PARAMS, &err);
    CHECK(err.offset <= cut);
    free(prefix);
  }
}

static void put_u64_at(uint8_t* blob, size_t at, uint64_t value) {
  for (int i = 0; i < 8; ++i) blob[at + i] = (uint8_t)(value >> (8 * i));
}

static void test_hostile_fields(void) {
  /* Layout of sample_blob: header 24; names 8+7, 8+0, 8+6 -> tensors count at 61, first
   * tensor at 69: magic, reserved, device(4) id(4) ndim(4) dtype(4), shape 2x8, nbytes. */
  enum { kNamesCount = 16, kFirstNameLen = 24, kTensorCount = 61, kTensor = 69 };
  enum { kDevice = kTensor + 16, kNdim = kTensor + 24, kBits = kTensor + 29 };
  enum { kDim0 = kTensor + 32, kNbytes = kTensor + 48 };
  static const struct {
    size_t at;
    uint64_t value;
    int width; /* bytes written */
  } cases[] = {
      {0, 0x1234, 8},                      /* list magic */
      {kNamesCount, UINT64_MAX, 8},        /* huge name count */
      {kNamesCount, 4, 8},                 /* one more name than present */
      {kFirstNameLen, UINT64_MAX, 8},      /* huge name length */
      {kFirstNameLen, 1u << 20, 8},        /* name past the end */
      {kTensorCount, 2, 8},                /* tensor count != name count */
      {kTensor, 0xDD5E40F096B4A13Eull, 8}, /* tensor magic */
      {kDevice, 2, 4},                     /* not on the CPU */
      {kNdim, 0x7FFFFFFF, 4},              /* huge ndim */
      {kNdim, 0x80000000u, 4},             /* negative ndim */
      {kBits, 0, 1},                       /* zero bits */
      {kDim0, (uint64_t)-2, 8},            /* negative dimension */
      {kDim0, 1ull << 62, 8},              /* size overflows */
      {kNbytes, 7, 8},                     /* nbytes disagrees with the shape */
      {kNbytes, UINT64_MAX, 8},            /* huge nbytes */
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    uint8_t blob[512];
    size_t len = sample_blob(blob, sizeof(blob));
    uint8_t bytes[8];
    for (int b = 0; b < 8; ++b) bytes[b] = (uint8_t)(cases[i].value >> (8 * b));
    memcpy(blob + cases[i].at, bytes, (size_t)cases[i].width);
    uint8_t* exact = (uint8_t*)malloc(len);
    memcpy(exact, blob, len);
    mlf_params_iter it;
    mlf_error err;
    mlf_error_clear(&err);
    mlf_status status = mlf_params_open(exact, len, &it, &err);
    if (status != MLF_ERR_PARAMS) fprintf(stderr, "hostile params case %zu\n", i);
    CHECK_STATUS(status, MLF_ERR_PARAMS, &err);
    free(exact);
  }
  (void)put_u64_at;
  mlf_params_iter it;
  CHECK_STATUS(mlf_params_open(NULL, 0, &it, NULL), MLF_ERR_ARGUMENT, NULL);
}

/* Through the executor: a bad blob is refused at init and at load, not half-applied. */
static void test_hostile_blob_through_executor(void) {
  char* json = json_from(kBasicJson);
  size_t bytes, arena_bytes;
  mlf_error err;
  CHECK_STATUS(mlf_graph_measure_json(json, strlen(json), &bytes, &err), MLF_OK, &err);
  void* tables = malloc(bytes);
  const mlf_graph* g;
  CHECK_STATUS(mlf_graph_parse_json(json, strlen(json), tables, bytes, &g, &err), MLF_OK, &err);
  uint8_t blob[512];
  size_t len = sample_blob(blob, sizeof(blob));
  uint64_t state[64];
  static uint8_t arena[4096];
  mlf_executor ex;
  for (size_t cut = 0; cut < len; cut += 3) {
    CHECK_STATUS(mlf_executor_arena_bytes(g, blob, cut, 0, &arena_bytes), MLF_ERR_PARAMS, NULL);
    CHECK_STATUS(mlf_executor_init(&ex, g, &g_test_lib, blob, cut, state, sizeof(state), arena,
                                   sizeof(arena)),
                 MLF_ERR_PARAMS, &ex.error);
  }
  CHECK_STATUS(
      mlf_executor_init(&ex, g, &g_test_lib, NULL, 0, state, sizeof(state), arena, sizeof(arena)),
      MLF_OK, &ex.error);
  CHECK_STATUS(mlf_executor_load_params(&ex, blob, len - 1), MLF_ERR_PARAMS, &ex.error);
  CHECK_STATUS(mlf_executor_load_params(&ex, NULL, 0), MLF_ERR_ARGUMENT, &ex.error);
  /* Names in the blob that are not graph args are ignored. */
  CHECK_STATUS(mlf_executor_load_params(&ex, blob, len), MLF_OK, &ex.error);
  CHECK_EQ_INT(mlf_executor_num_inputs(&ex), 2);
  free(tables);
  free(json);
}

int main(void) {
  RUN(test_iterates_in_order);
  RUN(test_truncated_everywhere);
  RUN(test_hostile_fields);
  RUN(test_hostile_blob_through_executor);
  return test_finish();
}
