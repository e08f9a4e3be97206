/*
 * mlf_riscv.h — what the RISC-V board families share: CSR access and the hooks each family
 * implements (board constants, exit statuses: families/common/mlf_board.h, as on Cortex-M).
 */
#ifndef MLF_RISCV_H_
#define MLF_RISCV_H_

#include <stdint.h>

#include "mlf_board.h"

#if __riscv_xlen != 32
#error "the riscv seam is for RV32: build with the board's -march=rv32... -mabi=ilp32..."
#endif

/* The lowest bytes of the stack are a PMP guard no access may touch: an overflow becomes a
 * store access fault the trap handler reports instead of a silent write below RAM. (A frame
 * bigger than the guard jumps it and faults in the write-protected FLASH region below.) */
#define MLF_STACK_GUARD_BYTES 32u

#define MLF_REG8(addr) (*(volatile uint8_t*)(uintptr_t)(addr))

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

#endif /* MLF_RISCV_H_ */
