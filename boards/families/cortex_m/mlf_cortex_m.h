/*
 * mlf_cortex_m.h — what the Cortex-M board families share: core registers and the hooks
 * each family implements (board constants, exit statuses: families/common/mlf_board.h).
 */
#ifndef MLF_CORTEX_M_H_
#define MLF_CORTEX_M_H_

#include <stdint.h>

#include "mlf_board.h"

/* System control block and SysTick (identical on ARMv7-M and ARMv8-M Mainline). */
#define MLF_SCB_ICSR MLF_REG32(0xE000ED04u)
#define MLF_SCB_VTOR MLF_REG32(0xE000ED08u)
#define MLF_SCB_CFSR MLF_REG32(0xE000ED28u)
#define MLF_SCB_HFSR MLF_REG32(0xE000ED2Cu)
#define MLF_SCB_MMFAR MLF_REG32(0xE000ED34u)
#define MLF_SCB_BFAR MLF_REG32(0xE000ED38u)
#define MLF_SCB_CPACR MLF_REG32(0xE000ED88u)
#define MLF_SCB_ICSR_PENDSTSET (1u << 26)
#define MLF_SCB_ICSR_PENDSTCLR (1u << 25)

/* NVIC: one bit per external interrupt in each bank of 32. */
#define MLF_NVIC_ISER(irq) MLF_REG32(0xE000E100u + 4u * ((irq) / 32u))
#define MLF_NVIC_ICER(irq) MLF_REG32(0xE000E180u + 4u * ((irq) / 32u))
#define MLF_NVIC_ICPR(irq) MLF_REG32(0xE000E280u + 4u * ((irq) / 32u))
#define MLF_NVIC_BIT(irq) (1u << ((irq) % 32u))

#define MLF_SYST_CSR MLF_REG32(0xE000E010u)
#define MLF_SYST_RVR MLF_REG32(0xE000E014u)
#define MLF_SYST_CVR MLF_REG32(0xE000E018u)
#define MLF_SYST_CSR_ENABLE (1u << 0)
#define MLF_SYST_CSR_TICKINT (1u << 1)
#define MLF_SYST_CSR_CLKSOURCE_CPU (1u << 2)

/* Implemented by each family (mps2, lm3s, stm32l4, stm32f4, stm32f7): clocks and console UART,
 * called once from mlf_platform_init() before the tick counter starts. The family also implements
 * mlf_platform_read() and mlf_platform_write() from mlf_platform.h. */
void mlf_family_init(void);

/* Masks interrupts (PRIMASK) and returns the previous mask for mlf_restore_interrupts(). */
static inline uint32_t mlf_mask_interrupts(void) {
  uint32_t primask;
  __asm__ volatile("mrs %0, primask\n\tcpsid i" : "=r"(primask)::"memory");
  return primask;
}

static inline void mlf_restore_interrupts(uint32_t primask) {
  __asm__ volatile("msr primask, %0" ::"r"(primask) : "memory");
}

/* Implemented by the board's timer (its [timer] kind: cortex_m/timer_systick.c for systick,
 * a family's timer_*.c otherwise, each compiled only when MLF_BOARD_TIMER_<KIND> is set):
 * starts the 64-bit tick counter at MLF_BOARD_TICK_HZ, after mlf_family_init(). The timer
 * also implements mlf_platform_ticks() and mlf_systick_rephase() below. */
void mlf_timer_start(void);

/* Restarts the SysTick period at this instant, keeping the 64-bit count (less the fraction of
 * a tick already elapsed, so it stays monotonic). Families call it when mlf_platform_read()
 * and mlf_platform_write() return: those are the only places whose duration depends on the
 * host (waiting for bytes), and re-phasing there makes the ticks between two later points
 * depend only on the instructions executed between them. Under QEMU -icount that makes a
 * measured span reproducible to the tick instead of +-1. A timer that counts instructions
 * exactly under -icount needs no re-phasing and implements this as nothing. */
void mlf_systick_rephase(void);

/* Implemented in cortex_m: returns once rx_ready() is true, asleep (WFI) in between, so an
 * idle firmware costs its host nothing. The family enables its UART's receive interrupt once
 * (in mlf_family_init) and calls this first thing in mlf_platform_read(), from thread code
 * with interrupts enabled (they are enabled again on return). rx_ready() must clear the
 * UART's latched receive-interrupt status before it reports whether a byte is there, so that
 * a byte arriving after the look raises the interrupt again.
 *
 * The board's [console] irq, MLF_BOARD_CONSOLE_IRQ, is enabled in the NVIC only during the
 * wait and only with PRIMASK set: it is never taken (no vector, no handler), but a pending
 * enabled interrupt still ends WFI. SysTick wraps that also end it are counted here, so the
 * tick count stays right across a long wait. Built with MLF_CONSOLE_POLL=1 it spins on
 * rx_ready() instead (the polling behaviour bench part 14 compares against). */
void mlf_console_wait(int (*rx_ready)(void));

#endif /* MLF_CORTEX_M_H_ */
