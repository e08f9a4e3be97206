/*
 * tvm/runtime/crt/platform.h — the platform hooks of a TVM-style CRT, for firmware ported
 * from TVM's CRT. Our runtime implements TVMPlatformAbort, TVMLogf, TVMPlatformTimerStart/Stop
 * and TVMPlatformFormatMessage over mlf_platform.h (crt/src/mlf_tvm_platform.c). The memory
 * hooks are the firmware's: only the TVMGraphExecutor_* compatibility layer calls them.
 */
#ifndef TVM_RUNTIME_CRT_PLATFORM_H_
#define TVM_RUNTIME_CRT_PLATFORM_H_

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "dlpack/dlpack.h"
#include "tvm/runtime/crt/error_codes.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TVM_CRT_NORETURN __attribute__((noreturn))
#define TVM_CRT_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#define TVM_CRT_NORETURN
#define TVM_CRT_PRINTF(fmt_index, first_arg)
#endif

/* Stops for good; never returns. */
TVM_CRT_NORETURN void TVMPlatformAbort(tvm_crt_error_t code);

/* vsnprintf into out_buf; returns the number of characters written (excluding the NUL). */
size_t TVMPlatformFormatMessage(char* out_buf, size_t out_buf_size_bytes, const char* fmt,
                                va_list args);

/* Firmware-provided allocator (TVM's convention); *out_ptr must be 8-byte aligned. */
tvm_crt_error_t TVMPlatformMemoryAllocate(size_t num_bytes, DLDevice dev, void** out_ptr);
tvm_crt_error_t TVMPlatformMemoryFree(void* ptr, DLDevice dev);

/* One timer at a time: Start, then Stop reports the seconds elapsed since Start. */
tvm_crt_error_t TVMPlatformTimerStart(void);
tvm_crt_error_t TVMPlatformTimerStop(double* elapsed_time_seconds);

/* Firmware-provided, optional for this runtime. */
tvm_crt_error_t TVMPlatformGenerateRandom(uint8_t* buffer, size_t num_bytes);
tvm_crt_error_t TVMPlatformInitialize(void);

/* A diagnostic line through mlf_platform_log() (formatted into a 128-byte stack buffer). */
void TVMLogf(const char* fmt, ...) TVM_CRT_PRINTF(1, 2);

#ifdef __cplusplus
}
#endif

#endif /* TVM_RUNTIME_CRT_PLATFORM_H_ */
