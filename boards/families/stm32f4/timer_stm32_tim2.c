/*
 * timer_stm32_tim2.c — the board timer of kind "stm32-tim2": TIM2's free-running 32-bit
 * counter, extended to 64 bits in software. Compiled when Board.compile_definitions() sets
 * MLF_BOARD_TIMER_STM32_TIM2.
 *
 * It exists for QEMU's netduinoplus2: QEMU clocks TIM2 at 1 GHz from virtual time, so under
 * -icount shift=0 it counts exactly one per instruction, where SysTick (168 MHz) resolves
 * only ~6 instructions and needs re-phasing. On silicon TIM2 runs from its APB1 timer clock
 * (MLF_BOARD_TICK_HZ must then be that clock); SysTick is the usual choice there.
 *
 * QEMU's model raises its update interrupt only once, so wraps are not counted by interrupt:
 * every read folds a wrap since the previous read into the high word, and SysTick (HCLK/8,
 * a wrap every 2^24 ticks, far shorter than TIM2's 2^32) samples the counter so that no wrap
 * goes unseen between two reads.
 */
#include <stddef.h>
#include <stdint.h>

#include "mlf_cortex_m.h"
#include "mlf_platform.h"

#if MLF_BOARD_TIMER_STM32_TIM2

#define RCC_APB1ENR MLF_REG32(0x40023800u + 0x40u)
#define RCC_APB1ENR_TIM2EN (1u << 0)
#define TIM2_BASE 0x40000000u
#define TIM2_CR1 MLF_REG32(TIM2_BASE + 0x00u)
#define TIM2_CNT MLF_REG32(TIM2_BASE + 0x24u)
#define TIM2_PSC MLF_REG32(TIM2_BASE + 0x28u)
#define TIM2_ARR MLF_REG32(TIM2_BASE + 0x2Cu)
#define TIM2_CR1_CEN (1u << 0)

/* Shared between the SysTick sampler and mlf_platform_ticks(); both run masked. */
static volatile uint32_t last_count;
static volatile uint64_t high_ticks;

void mlf_systick_handler(void);

static uint64_t sample(void) {
  uint32_t count = TIM2_CNT;
  if (count < last_count) {
    high_ticks += (uint64_t)1u << 32;
  }
  last_count = count;
  return high_ticks | count;
}

void mlf_systick_handler(void) { (void)sample(); }

void mlf_timer_start(void) {
  RCC_APB1ENR |= RCC_APB1ENR_TIM2EN;
  (void)RCC_APB1ENR;
  TIM2_PSC = 0;
  TIM2_ARR = 0xFFFFFFFFu;
  TIM2_CR1 = TIM2_CR1_CEN;
  high_ticks = 0;
  last_count = TIM2_CNT;
  MLF_SYST_CSR = 0;
  MLF_SYST_RVR = 0x00FFFFFFu;
  MLF_SYST_CVR = 0;
  MLF_SYST_CSR = MLF_SYST_CSR_ENABLE | MLF_SYST_CSR_TICKINT; /* reference clock: HCLK/8 */
}

uint64_t mlf_platform_ticks(void) {
  uint32_t primask = mlf_mask_interrupts();
  uint64_t now = sample();
  mlf_restore_interrupts(primask);
  return now;
}

/* TIM2 needs no re-phasing; the sampler does, so that whether its interrupt falls inside a
 * measured span depends on the span's instructions only, not on when the host sent bytes.
 * The console's sleeping wait runs masked and calls this after each wake: a sampler wrap
 * left pending would keep WFI from sleeping, so it is sampled here and cleared. */
void mlf_systick_rephase(void) {
  uint32_t primask = mlf_mask_interrupts();
  (void)sample();
  MLF_SYST_CVR = 0;
  MLF_SCB_ICSR = MLF_SCB_ICSR_PENDSTCLR;
  mlf_restore_interrupts(primask);
}

#endif /* MLF_BOARD_TIMER_STM32_TIM2 */
