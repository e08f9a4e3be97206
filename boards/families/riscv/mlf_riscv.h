/*
 * mlf_riscv.h — what the RISC-V board families share: CSR access, the hooks each family
 * implements, the board constants the generator passes in, and the exit statuses the QEMU
 * runner recognises (the same as on Cortex-M).
 *
 * Board constants come from boards/<board>.toml through Board.compile_definitions(); they are
 * required so that a board description and its firmware can never disagree silently.
 */
#ifndef MLF_RISCV_H_
#define MLF_RISCV_H_

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
#if __riscv_xlen != 32
#error "the riscv seam is for RV32: build with the board's -march=rv32... -mabi=ilp32..."
#endif

/* Exit statuses reserved by the seam (project_api/run/qemu.py names them). A firmware's own
 * statuses should stay below 0xF0. */
#define MLF_EXIT_FAULT 0xFA         /* a trap: exception or unexpected interrupt */
#define MLF_EXIT_ABORT 0xFB         /* mlf_platform_abort(): the runtime gave up */
#define MLF_STACK_PAINT 0x5AA5C33Cu /* what unused stack holds (startup.c paints it) */
/* The lowest bytes of the stack are a PMP guard no access may touch: an overflow becomes a
 * store access fault the trap handler reports instead of a silent write below RAM. (A frame
 * bigger than the guard jumps it and faults in the write-protected FLASH region below.) */
#define MLF_STACK_GUARD_BYTES 32u

#define MLF_REG8(addr) (*(volatile uint8_t*)(uintptr_t)(addr))
#define MLF_REG32(addr) (*(volatile uint32_t*)(uintptr_t)(addr))

#define MLF_CSR_READ(csr)                              \
  __extension__({                                      \
    uint32_t value_;                                   \
    __asm__ volatile("csrr %0, " #csr : "=r"(value_)); \
    value_;                                            \
  })
#define MLF_CSR_WRITE(csr, value) __asm__ volatile("csrw " #csr ", %0" ::"r"(value) : "memory")
#define MLF_CSR_SET(csr, bits) __asm__ volatile("csrs " #csr ", %0" ::"r"(bits) : "memory")

#define MLF_MIE_MEIE (1u << 11) /* machine external interrupt enable (mie) */

/* Implemented by each family (riscv_virt): the console UART, and whatever its receive
 * interrupt needs to wake a `wfi`, called once from mlf_platform_init(). The family also
 * implements mlf_platform_read() and mlf_platform_write() from mlf_platform.h. */
void mlf_family_init(void);

/* Semihosting (the Arm semihosting operations, RISC-V calling sequence). Only meaningful when
 * MLF_BOARD_SEMIHOSTING: without a debugger or QEMU's -semihosting-config the ebreak traps. */
#define MLF_SEMIHOSTING_SYS_WRITE0 0x04u
#define MLF_SEMIHOSTING_SYS_EXIT_EXTENDED 0x20u
#define MLF_SEMIHOSTING_ADP_STOPPED_APPLICATION_EXIT 0x20026u

uintptr_t mlf_semihosting_call(uintptr_t operation, uintptr_t argument);

#endif /* MLF_RISCV_H_ */
