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

#define MLF_SYST_CSR MLF_REG32(0xE000E010u)
#define MLF_SYST_RVR MLF_REG32(0xE000E014u)
#define MLF_SYST_CVR MLF_REG32(0xE000E018u)
#define MLF_SYST_CSR_ENABLE (1u << 0)
#define MLF_SYST_CSR_TICKINT (1u << 1)
#define MLF_SYST_CSR_CLKSOURCE_CPU (1u << 2)

/* Implemented by each family (mps2, lm3s, stm32): clocks and console UART, called once from
 * mlf_platform_init() before the tick counter starts. The family also implements
 * mlf_platform_read() and mlf_platform_write() from mlf_platform.h. */
void mlf_family_init(void);

/* Implemented in cortex_m: starts the 64-bit SysTick counter at MLF_BOARD_TICK_HZ. */
void mlf_systick_start(void);

/* Restarts the SysTick period at this instant, keeping the 64-bit count (less the fraction of
 * a tick already elapsed, so it stays monotonic). Families call it when mlf_platform_read()
 * and mlf_platform_write() return: those are the only places whose duration depends on the
 * host (polling for bytes), and re-phasing there makes the ticks between two later points
 * depend only on the instructions executed between them. Under QEMU -icount that makes a
 * measured span reproducible to the tick instead of +-1. */
void mlf_systick_rephase(void);

#endif /* MLF_CORTEX_M_H_ */
