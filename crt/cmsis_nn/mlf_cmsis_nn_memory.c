/*
 * mlf_cmsis_nn_memory.c — the memory TVM's CMSIS-NN calls did not bring: a kernel's scratch for
 * one call, taken from the runtime's workspace (TVMBackendAllocWorkspace: the calling operator's
 * window, sized by the generator for it) and given back before the call returns; the kept
 * kernel sums (static, sized by the generator, counted by its fit check and `footprint`); and
 * the stop on a failure.
 *
 * Globals by necessity: TVM's calls carry no state of ours. Kernel sums are kept per filter: a
 * model's weights stay where they were bound for the firmware's life (microTVM firmware, whose
 * host may rewrite device memory, is generated with MLF_CMSIS_NN_SUM_SLOTS=0 and recomputes
 * them into the workspace at every call).
 */
#include "mlf_cmsis_nn.h"

typedef struct {
  const int8_t* filter;
  const int32_t* bias;
  int32_t input_offset;
  int32_t rows;
  int32_t cols;
  int32_t* sums;
} sum_slot;

#if MLF_CMSIS_NN_SUM_SLOTS > 0 && MLF_CMSIS_NN_SUM_WORDS > 0
static sum_slot slots[MLF_CMSIS_NN_SUM_SLOTS];
static int32_t sum_words[MLF_CMSIS_NN_SUM_WORDS];
static int32_t slots_used;
static int32_t words_used;
#endif

/* `digits` hex digits of `value` into `at` (no printf in firmware). */
static void put_hex(char* at, uint32_t value, int digits) {
  static const char hex[] = "0123456789abcdef";
  for (int i = digits - 1; i >= 0; --i, value >>= 4) at[i] = hex[value & 15u];
}

void* mlf_cmsis_nn_scratch(int32_t needed) {
  /* kDLCPU, device 0; int8 as the dtype hint (the runtime ignores hints). The workspace's
   * blocks are 64-byte aligned, as MVE's whole-vector loads want. */
  void* block = TVMBackendAllocWorkspace(1, 0, (uint64_t)(needed > 0 ? needed : 0), 0, 8);
  if (block == NULL) {
    char msg[] =
        "mlf: cmsis-nn: a kernel needs 0x00000000 bytes of scratch, more than the operator's "
        "workspace window holds";
    put_hex(msg + 32, (uint32_t)needed, 8); /* after "...needs 0x" */
    mlf_platform_log(msg);
    mlf_platform_abort((int)needed);
  }
  return block;
}

void mlf_cmsis_nn_release(void* held) {
  if (held != NULL) (void)TVMBackendFreeWorkspace(1, 0, held);
}

cmsis_nn_context mlf_cmsis_nn_context(const cmsis_nn_context* given, int32_t needed, void** held) {
  *held = NULL;
  if (needed <= 0 || (given != NULL && given->buf != NULL && given->size >= needed)) {
    cmsis_nn_context same = {given != NULL ? given->buf : NULL, given != NULL ? given->size : 0};
    return same;
  }
  *held = mlf_cmsis_nn_scratch(needed);
  cmsis_nn_context ctx = {*held, needed};
  return ctx;
}

static void compute_sums(int32_t* out, const int8_t* filter, const int32_t* bias,
                         int32_t input_offset, int32_t rows, int32_t cols) {
  for (int32_t r = 0; r < rows; ++r) {
    int32_t sum = 0;
    const int8_t* row = filter + (size_t)r * (size_t)cols;
    for (int32_t c = 0; c < cols; ++c) sum += row[c];
#if MLF_CMSIS_NN_FC_SUMS == 2
    /* Wrapping int32 arithmetic like CMSIS-NN's own, without C's signed-overflow UB. */
    const uint32_t scaled = (uint32_t)sum * (uint32_t)input_offset;
    out[r] = (int32_t)((uint32_t)(bias != NULL ? bias[r] : 0) + scaled);
#else
    (void)bias;
    (void)input_offset;
    out[r] = sum;
#endif
  }
}

const int32_t* mlf_cmsis_nn_kernel_sums(const cmsis_nn_context* given, const int8_t* filter,
                                        const int32_t* bias, int32_t input_offset, int32_t rows,
                                        int32_t cols, void** held) {
  *held = NULL;
#if MLF_CMSIS_NN_SUM_SLOTS > 0 && MLF_CMSIS_NN_SUM_WORDS > 0
  for (int32_t i = 0; i < slots_used; ++i) {
    const sum_slot* s = &slots[i];
    if (s->filter == filter && s->bias == bias && s->input_offset == input_offset &&
        s->rows == rows && s->cols == cols) {
      return s->sums;
    }
  }
  if (slots_used < MLF_CMSIS_NN_SUM_SLOTS && rows <= MLF_CMSIS_NN_SUM_WORDS - words_used) {
    sum_slot* s = &slots[slots_used++];
    s->filter = filter;
    s->bias = bias;
    s->input_offset = input_offset;
    s->rows = rows;
    s->cols = cols;
    s->sums = sum_words + words_used;
    words_used += rows;
    compute_sums(s->sums, filter, bias, input_offset, rows, cols);
    return s->sums;
  }
#endif
  const cmsis_nn_context spare = mlf_cmsis_nn_context(given, rows * (int32_t)sizeof(int32_t), held);
  compute_sums((int32_t*)spare.buf, filter, bias, input_offset, rows, cols);
  return (const int32_t*)spare.buf;
}

arm_cmsis_nn_status mlf_cmsis_nn_check(arm_cmsis_nn_status status, const char* kernel) {
  if (status == ARM_CMSIS_NN_SUCCESS) return status;
  char msg[96] = "mlf: cmsis-nn: ";
  size_t at = 15;
  for (const char* p = kernel; *p != '\0' && at < sizeof msg - 24; ++p) msg[at++] = *p;
  const char* tail = " failed, status -";
  for (const char* p = tail; *p != '\0'; ++p) msg[at++] = *p;
  put_hex(msg + at, (uint32_t)(-(int32_t)status), 2);
  msg[at + 2] = '\0';
  mlf_platform_log(msg);
  mlf_platform_abort((int)status);
  return status;
}

arm_cmsis_nn_status mlf_cmsis_nn_finish(arm_cmsis_nn_status status, void* held,
                                        const char* kernel) {
  mlf_cmsis_nn_release(held);
  return mlf_cmsis_nn_check(status, kernel);
}
