/*
 * The adapter's memory (crt/cmsis_nn/mlf_cmsis_nn_memory.c) on the host, under ASan/UBSan:
 * the context it hands a kernel, the kernel sums it keeps per filter and recomputes when it
 * has no slot left, and the stops (scratch too small, a kernel's failure) with their words.
 * Built with MLF_CMSIS_NN_FC_SUMS=1 or 2, MLF_CMSIS_NN_SCRATCH_BYTES=64, two slots of 16 words.
 */
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include "mlf_cmsis_nn.h"

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
  int8_t filter[12 * 5];
  int32_t bias[12];
  for (int i = 0; i < 60; ++i) filter[i] = (int8_t)(i * 37 - 128);
  for (int i = 0; i < 12; ++i) bias[i] = 1000 * i - 7000;

  /* The caller's context when it is big enough, else the static scratch. */
  int32_t own[8];
  cmsis_nn_context given = {own, (int32_t)sizeof own};
  cmsis_nn_context ctx = mlf_cmsis_nn_context(&given, 32);
  CHECK(ctx.buf == own && ctx.size == 32);
  ctx = mlf_cmsis_nn_context(&given, 48);
  CHECK(ctx.buf != own && ctx.buf != NULL && ctx.size == 48);
  cmsis_nn_context empty = {NULL, 0};
  CHECK(mlf_cmsis_nn_context(&empty, 0).buf == NULL);
  if (setjmp(stopped) == 0) {
    mlf_cmsis_nn_context(&empty, 65);
    CHECK(0);
  } else {
    CHECK(last_code == 65);
    CHECK(strstr(last_log, "needs 0x00000041 bytes of scratch") != NULL);
  }

  /* Kernel sums: kept per (filter, bias, offset, shape), then recomputed once the slots
   * (two, 16 words) are gone, into the caller's context or the scratch. */
  const int32_t* a = mlf_cmsis_nn_kernel_sums(&empty, filter, bias, 128, 12, 5);
  check_sums(a, filter, bias, 128, 12, 5);
  CHECK(mlf_cmsis_nn_kernel_sums(&empty, filter, bias, 128, 12, 5) == a);
  const int32_t* b = mlf_cmsis_nn_kernel_sums(&empty, filter, NULL, -83, 3, 20);
  CHECK(b != a);
  check_sums(b, filter, NULL, -83, 3, 20);
  const int32_t* c = mlf_cmsis_nn_kernel_sums(&given, filter, bias, 0, 6, 10);
  CHECK(c == own); /* no slot left: into the caller's context */
  check_sums(c, filter, bias, 0, 6, 10);
  const int32_t* d = mlf_cmsis_nn_kernel_sums(&empty, filter, bias, 7, 12, 5);
  CHECK(d != a && d != own); /* another offset: the scratch */
  check_sums(d, filter, bias, 7, 12, 5);
  CHECK(mlf_cmsis_nn_kernel_sums(&empty, filter, bias, 128, 12, 5) == a);

  /* A kernel's failure stops the firmware, naming it. */
  CHECK(mlf_cmsis_nn_check(ARM_CMSIS_NN_SUCCESS, "arm_x") == ARM_CMSIS_NN_SUCCESS);
  if (setjmp(stopped) == 0) {
    mlf_cmsis_nn_check(ARM_CMSIS_NN_ARG_ERROR, "arm_fully_connected_s8");
    CHECK(0);
  } else {
    CHECK(last_code == (int)ARM_CMSIS_NN_ARG_ERROR);
    CHECK(strcmp(last_log, "mlf: cmsis-nn: arm_fully_connected_s8 failed, status -01") == 0);
  }
  printf("%s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}
