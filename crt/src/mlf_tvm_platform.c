/*
 * mlf_tvm_platform.c — TVM's CRT platform hooks (abort, log, timer, message formatting)
 * over our platform seam, so firmware written for TVM's CRT links unchanged. Not needed by
 * the executor itself; link it when the firmware or ported code calls these hooks.
 */
#include <stdio.h>

#include "mlf_platform.h"
#include "tvm/runtime/crt/platform.h"

void TVMPlatformAbort(tvm_crt_error_t code) { mlf_platform_abort((int)code); }

size_t TVMPlatformFormatMessage(char* out_buf, size_t out_buf_size_bytes, const char* fmt,
                                va_list args) {
  int written = vsnprintf(out_buf, out_buf_size_bytes, fmt, args);
  if (written < 0) return 0;
  /* vsnprintf reports what it would have written; callers want what is in the buffer. */
  if (out_buf_size_bytes == 0) return 0;
  return (size_t)written < out_buf_size_bytes ? (size_t)written : out_buf_size_bytes - 1;
}

void TVMLogf(const char* fmt, ...) {
  char line[128];
  va_list args;
  va_start(args, fmt);
  TVMPlatformFormatMessage(line, sizeof(line), fmt, args);
  va_end(args);
  mlf_platform_log(line);
}

/* TVM's timer API has no handle, so the start tick is kept here (0: not running). Storing
 * tick + 1 keeps a start at tick 0 distinguishable from "not running". */
static uint64_t g_timer_start_plus_one;

tvm_crt_error_t TVMPlatformTimerStart(void) {
  if (g_timer_start_plus_one != 0) return kTvmErrorPlatformTimerBadState;
  g_timer_start_plus_one = mlf_platform_ticks() + 1;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPlatformTimerStop(double* elapsed_time_seconds) {
  if (g_timer_start_plus_one == 0) return kTvmErrorPlatformTimerBadState;
  uint64_t ticks = mlf_platform_ticks() + 1 - g_timer_start_plus_one;
  g_timer_start_plus_one = 0;
  if (elapsed_time_seconds != NULL) {
    *elapsed_time_seconds = (double)ticks / (double)mlf_platform_tick_hz();
  }
  return kTvmErrorNoError;
}
