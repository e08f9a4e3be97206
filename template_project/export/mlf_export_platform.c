/*
 * mlf_export_platform.c — TVM's CRT platform hooks for an exported model library, as weak
 * defaults: the library has no board code, no printf and no allocator, so firmware that
 * wants an abort that reports, a timer or log lines defines these functions itself and its
 * definitions win. Neither the runtime nor the model's code calls them on a normal run.
 */
#include <stddef.h>

#include "tvm/runtime/crt/platform.h"

#if defined(__GNUC__) || defined(__clang__)
#define MLF_WEAK __attribute__((weak))
#else
#define MLF_WEAK
#endif

/* An unrecoverable error: stop here (a debugger shows `code`). */
MLF_WEAK void TVMPlatformAbort(tvm_crt_error_t code) {
  volatile tvm_crt_error_t last = code;
  (void)last;
  for (;;) {
  }
}

/* No formatting without printf: an empty message. */
MLF_WEAK size_t TVMPlatformFormatMessage(char* out_buf, size_t out_buf_size_bytes, const char* fmt,
                                         va_list args) {
  (void)fmt;
  (void)args;
  if (out_buf != NULL && out_buf_size_bytes > 0) out_buf[0] = '\0';
  return 0;
}

/* No console: log lines are dropped. */
MLF_WEAK void TVMLogf(const char* fmt, ...) { (void)fmt; }

/* No timer: TVM's timing calls report "not implemented". */
MLF_WEAK tvm_crt_error_t TVMPlatformTimerStart(void) { return kTvmErrorFunctionCallNotImplemented; }

MLF_WEAK tvm_crt_error_t TVMPlatformTimerStop(double* elapsed_time_seconds) {
  if (elapsed_time_seconds != NULL) *elapsed_time_seconds = 0.0;
  return kTvmErrorFunctionCallNotImplemented;
}

/* What the CMSIS-NN adapter (when exported with it) reports through: nothing to log to, and a
 * call whose scratch its operator's workspace window cannot hold, or a kernel's failure, stops
 * as TVM's abort does. */
MLF_WEAK void mlf_platform_log(const char* msg);
MLF_WEAK void mlf_platform_log(const char* msg) { (void)msg; }

MLF_WEAK void mlf_platform_abort(int code);
MLF_WEAK void mlf_platform_abort(int code) { TVMPlatformAbort((tvm_crt_error_t)code); }
