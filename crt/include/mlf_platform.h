/*
 * mlf_platform.h — the seam between portable code (runtime, firmware loop) and a platform.
 *
 * Implemented once per platform: crt/platform/host/ for a POSIX process, and by the C seam
 * of each board family under boards/families/. The runtime itself needs none of it except
 * through the TVM compatibility hooks (TVMPlatformAbort, TVMLogf, TVMPlatformTimer*); the
 * firmware's loops use the byte link, the tick counter and exit (mlperftiny: the timestamp
 * pulse).
 */
#ifndef MLF_PLATFORM_H_
#define MLF_PLATFORM_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define MLF_NORETURN __attribute__((noreturn))
#else
#define MLF_NORETURN
#endif

/* Clocks, console link, tick counter. Called once, first thing in main(). */
void mlf_platform_init(void);

/* Blocks until at least one byte arrives on the console link; returns how many were
 * stored (1..max), or 0 when the link is gone for good (host: EOF). Blocks asleep, never
 * spinning, so an idle firmware costs its host nothing (host: read(2); Cortex-M: WFI on the
 * console's receive interrupt, mlf_console_wait in boards/families/cortex_m). */
size_t mlf_platform_read(uint8_t* buf, size_t max);

/* Blocks until all n bytes are written to the console link. */
void mlf_platform_write(const uint8_t* buf, size_t n);

/* A free-running counter (64-bit, never wraps in practice) and its frequency in Hz. On
 * Cortex-M under QEMU with -icount shift=0 one tick is a fixed number of instructions. */
uint64_t mlf_platform_ticks(void);
uint64_t mlf_platform_tick_hz(void);

/* MLPerf Tiny energy mode (template_project/firmware/mlf_mlperftiny.c): marks a timestamp for
 * the energy monitor with a falling edge on the board's timestamp pin, held low for at least
 * 1 us, then released. Returns 1 after the pulse, 0 when the board has no such pin (host,
 * QEMU boards): the board family seam decides. */
int mlf_platform_timestamp_pulse(void);

/* The most stack, in bytes, the program has used since it started (Cortex-M: the reset
 * handler paints the stack and this finds the deepest word written). SIZE_MAX when the
 * platform cannot tell (host: the OS owns the stack). Optional: the device loop provides a
 * weak default that answers SIZE_MAX. */
size_t mlf_platform_stack_used(void);

/* A diagnostic line that must not disturb the console link (host: stderr; QEMU:
 * semihosting; real boards: dropped). msg is NUL-terminated, without newline. */
void mlf_platform_log(const char* msg);

/* Ends the program with an exit status (host: exit(); QEMU: semihosting
 * SYS_EXIT_EXTENDED; real boards: stop and wait). */
MLF_NORETURN void mlf_platform_exit(int status);

/* An unrecoverable error inside the runtime (only reached through TVMPlatformAbort). */
MLF_NORETURN void mlf_platform_abort(int code);

#ifdef __cplusplus
}
#endif

#endif /* MLF_PLATFORM_H_ */
