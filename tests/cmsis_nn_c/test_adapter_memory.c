/*
 * The adapter's memory (crt/cmsis_nn/mlf_cmsis_nn_memory.c) on the host, under ASan/UBSan:
 * the context it hands a kernel (the caller's, else a block of the workspace, given back), the
 * kernel sums it keeps per filter and recomputes when it has no slot left, and the stops (the
 * workspace too small, a kernel's failure) with their words, over the runtime's own workspace
 * (crt/src/mlf_workspace.c, linked in), whose LIFO frees refuse a block that is not live.
 * Built with MLF_CMSIS_NN_FC_SUMS=1 or 2, two slots of 16 words.
 */
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include "mlf_cmsis_nn.h"
#include "mlf_runtime.h"

/* The runtime's workspace (crt/src/mlf_workspace.c) over 256 bytes. */
static uint8_t pool[256] __attribute__((aligned(64)));
static mlf_workspace ws;

static jmp_buf stopped;

static char last_log[160];
static int last_code;
static int failures;

void mlf_platform_log(const char* msg) { snprintf(last_log, sizeof last_log, "%s", msg); }
void mlf_platform_abort(int code) {
  last_code = code;
  longjmp(stopped, 1);
}

#define CHECK(cond)                                                      \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                        \
    }                                                                    \
  } while (0)

static int32_t expected(const int8_t* filter, const int32_t* bias, int32_t offset, int32_t row,
                        int32_t cols) {
  int32_t sum = 0;
  for (int32_t c = 0; c < cols; ++c) sum += filter[row * cols + c];
#if MLF_CMSIS_NN_FC_SUMS == 2
  return (int32_t)((uint32_t)(bias ? bias[row] : 0) + (uint32_t)sum * (uint32_t)offset);
#else
  (void)bias;
  (void)offset;
  return sum;
#endif
}

static void check_sums(const int32_t* got, const int8_t* filter, const int32_t* bias,
                       int32_t offset, int32_t rows, int32_t cols) {
  for (int32_t r = 0; r < rows; ++r) CHECK(got[r] == expected(filter, bias, offset, r, cols));
}

int main(void) {
  if (mlf_workspace_init(&ws, pool, sizeof pool) != MLF_OK) return 1;
  mlf_workspace_bind(&ws);
  int8_t filter[12 * 5];
  int32_t bias[12];
  for (int i = 0; i < 60; ++i) filter[i] = (int8_t)(i * 37 - 128);
  for (int i = 0; i < 12; ++i) bias[i] = 1000 * i - 7000;

  /* The caller's context when it is big enough, else a block of the workspace, given back. */
  int32_t own[8];
  void* held = own;
  cmsis_nn_context given = {own, (int32_t)sizeof own};
  cmsis_nn_context ctx = mlf_cmsis_nn_context(&given, 32, &held);
  CHECK(ctx.buf == own && ctx.size == 32 && held == NULL && ws.top == 0);
  ctx = mlf_cmsis_nn_context(&given, 48, &held);
  CHECK(ctx.buf == pool && ctx.size == 48 && held == pool && ws.top == 48);
  mlf_cmsis_nn_release(held);
  CHECK(ws.top == 0);
  mlf_cmsis_nn_release(NULL);
  cmsis_nn_context empty = {NULL, 0};
  CHECK(mlf_cmsis_nn_context(&empty, 0, &held).buf == NULL && held == NULL);
  /* Nested on a block the operator holds (TVM's own), then given back to it. */
  void* operators = TVMBackendAllocWorkspace(1, 0, 10, 0, 8);
  ctx = mlf_cmsis_nn_context(&empty, 100, &held);
  CHECK(operators == pool && ctx.buf == pool + 64 && ws.top == 164);
  mlf_cmsis_nn_release(held);
  CHECK(ws.top == 64); /* as the runtime: back to where the block began */
  if (setjmp(stopped) == 0) {
    mlf_cmsis_nn_context(&empty, 193, &held); /* 64 + 193 > 256: refused */
    CHECK(0);
  } else {
    CHECK(last_code == 193 && ws.top == 64);
    CHECK(strstr(last_log,
                 "needs 0x000000c1 bytes of scratch, more than the operator's "
                 "workspace window holds") != NULL);
  }
  CHECK(TVMBackendFreeWorkspace(1, 0, operators) == 0);
  CHECK(ws.top == 0);

  /* Kernel sums: kept per (filter, bias, offset, shape), then recomputed once the slots
   * (two, 16 words) are gone, into the caller's context or the workspace. */
  const int32_t* a = mlf_cmsis_nn_kernel_sums(&empty, filter, bias, 128, 12, 5, &held);
  CHECK(held == NULL);
  check_sums(a, filter, bias, 128, 12, 5);
  CHECK(mlf_cmsis_nn_kernel_sums(&empty, filter, bias, 128, 12, 5, &held) == a && !held);
  const int32_t* b = mlf_cmsis_nn_kernel_sums(&empty, filter, NULL, -83, 3, 20, &held);
  CHECK(b != a && held == NULL);
  check_sums(b, filter, NULL, -83, 3, 20);
  const int32_t* c = mlf_cmsis_nn_kernel_sums(&given, filter, bias, 0, 6, 10, &held);
  CHECK(c == own && held == NULL); /* no slot left: into the caller's context */
  check_sums(c, filter, bias, 0, 6, 10);
  const int32_t* d = mlf_cmsis_nn_kernel_sums(&empty, filter, bias, 7, 12, 5, &held);
  CHECK(d == (const int32_t*)(void*)pool && held == pool); /* another offset: the workspace */
  check_sums(d, filter, bias, 7, 12, 5);
  CHECK(mlf_cmsis_nn_finish(ARM_CMSIS_NN_SUCCESS, held, "arm_x") == ARM_CMSIS_NN_SUCCESS);
  CHECK(ws.top == 0);
  CHECK(mlf_cmsis_nn_kernel_sums(&empty, filter, bias, 128, 12, 5, &held) == a);

  /* A kernel's failure stops the firmware, naming it. */
  CHECK(mlf_cmsis_nn_check(ARM_CMSIS_NN_SUCCESS, "arm_x") == ARM_CMSIS_NN_SUCCESS);
  if (setjmp(stopped) == 0) {
    mlf_cmsis_nn_check(ARM_CMSIS_NN_ARG_ERROR, "arm_fully_connected_s8");
    CHECK(0);
  } else {
    CHECK(last_code == (int)ARM_CMSIS_NN_ARG_ERROR);
    CHECK(strcmp(last_log, "mlf: cmsis-nn: arm_fully_connected_s8 failed, status -01") == 0);
  }
  /* A failing kernel gives its block back before the stop. */
  ctx = mlf_cmsis_nn_context(&empty, 40, &held);
  if (setjmp(stopped) == 0) {
    mlf_cmsis_nn_finish(ARM_CMSIS_NN_NO_IMPL_ERROR, held, "arm_y");
    CHECK(0);
  } else {
    CHECK(ws.top == 0 && last_code == (int)ARM_CMSIS_NN_NO_IMPL_ERROR);
  }
  CHECK(ws.refused == 1); /* the one refusal above, nothing else */
  printf("%s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}
