/*
 * mlf_board.h — what every microcontroller seam shares whatever its architecture: the board
 * constants the generator passes in, the exit statuses and stack paint the host recognises,
 * register access, and the one-line numeric report the fault and abort paths print.
 *
 * Board constants come from boards/<board>.toml through Board.compile_definitions(); they are
 * required so that a board description and its firmware can never disagree silently.
 */
#ifndef MLF_BOARD_H_
#define MLF_BOARD_H_

#include <stdint.h>

#ifndef MLF_BOARD_TICK_HZ
#error "MLF_BOARD_TICK_HZ missing: compile with Board.compile_definitions()"
#endif
#ifndef MLF_BOARD_CONSOLE_BASE
#error "MLF_BOARD_CONSOLE_BASE missing: compile with Board.compile_definitions()"
#endif
#ifndef MLF_BOARD_CONSOLE_BAUD
#error "MLF_BOARD_CONSOLE_BAUD missing: compile with Board.compile_definitions()"
#endif
#ifndef MLF_BOARD_CONSOLE_CLOCK_HZ
#error "MLF_BOARD_CONSOLE_CLOCK_HZ missing: compile with Board.compile_definitions()"
#endif
#ifndef MLF_BOARD_SEMIHOSTING
#error "MLF_BOARD_SEMIHOSTING missing: compile with Board.compile_definitions()"
#endif

/* Exit statuses reserved by the seams (project_api/run/qemu.py names them). A firmware's own
 * statuses should stay below 0xF0. */
#define MLF_EXIT_FAULT 0xFA         /* a fault or unexpected exception/interrupt */
#define MLF_EXIT_ABORT 0xFB         /* mlf_platform_abort(): the runtime gave up */
#define MLF_STACK_PAINT 0x5AA5C33Cu /* what unused stack holds (start-up paints it) */

#define MLF_REG32(addr) (*(volatile uint32_t*)(uintptr_t)(addr))

/* Semihosting (the Arm semihosting operations; each architecture traps into the debugger its
 * own way: mlf_semihosting_call). Only meaningful when MLF_BOARD_SEMIHOSTING: on a real board
 * without a debugger the trap faults. report.c's mlf_platform_log writes through it. */
#define MLF_SEMIHOSTING_SYS_WRITE0 0x04u
#define MLF_SEMIHOSTING_SYS_EXIT 0x18u
#define MLF_SEMIHOSTING_SYS_EXIT_EXTENDED 0x20u
#define MLF_SEMIHOSTING_ADP_STOPPED_APPLICATION_EXIT 0x20026u

uintptr_t mlf_semihosting_call(uintptr_t operation, uintptr_t argument);

/* Ends a QEMU run with `status` as QEMU's exit status (SYS_EXIT_EXTENDED); returns only
 * without semihosting, where the caller stops the core its own way. */
void mlf_board_semihosting_exit(int status);

/* Logs `line` (through mlf_platform_log) with each run of 8 dots replaced by the next of
 * `values` in hex: numbers only, the host puts words to them. `line` must be shorter than
 * 192 characters. */
void mlf_board_report(const char* line, const uint32_t* values);

#endif /* MLF_BOARD_H_ */
