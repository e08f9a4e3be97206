/*
 * timer_systick.c — the board timer of kind "systick": a 64-bit tick counter from the 24-bit
 * SysTick and its overflow interrupt, at the CPU clock (MLF_BOARD_TICK_HZ). Compiled for
 * boards whose [timer] kind is systick (Board.compile_definitions() defines
 * MLF_BOARD_TIMER_SYSTICK); other timer kinds bring their own file.
 */
#include <stddef.h>
#include <stdint.h>

#include "mlf_cortex_m.h"
#include "mlf_platform.h"

#if MLF_BOARD_TIMER_SYSTICK

#define SYSTICK_RELOAD 0x00FFFFFFu
#define SYSTICK_PERIOD ((uint64_t)SYSTICK_RELOAD + 1u)

/* Ticks already accounted for by the overflow interrupt; the live 24-bit counter adds the
 * rest. Shared between the interrupt and mlf_platform_ticks(), hence file-scope volatile. */
static volatile uint64_t systick_wrapped_ticks;

void mlf_systick_handler(void);

void mlf_systick_handler(void) { systick_wrapped_ticks += SYSTICK_PERIOD; }

void mlf_timer_start(void) {
  MLF_SYST_CSR = 0;
  systick_wrapped_ticks = 0;
  MLF_SYST_RVR = SYSTICK_RELOAD;
  MLF_SYST_CVR = 0;
  MLF_SYST_CSR = MLF_SYST_CSR_ENABLE | MLF_SYST_CSR_TICKINT | MLF_SYST_CSR_CLKSOURCE_CPU;
  /* Writing CVR leaves it at 0 until the first tick reloads it; a read in that window would
   * look like a full period, so let the counter start properly first. */
  while (MLF_SYST_CVR == 0) {
  }
}

/* The tick count now; interrupts must be masked. */
static uint64_t ticks_masked(void) {
  uint32_t count = MLF_SYST_CVR;
  uint64_t base = systick_wrapped_ticks;
  if ((MLF_SCB_ICSR & MLF_SCB_ICSR_PENDSTSET) != 0u) {
    /* The counter reached zero but the interrupt has not run yet (we masked it): account for
     * the period here. Re-read so that count and base agree; a zero still belongs to the
     * period that is ending. */
    count = MLF_SYST_CVR;
    if (count != 0u) {
      base += SYSTICK_PERIOD;
    }
  }
  return base + (uint64_t)(SYSTICK_RELOAD - count);
}

uint64_t mlf_platform_ticks(void) {
  uint32_t primask = mlf_mask_interrupts();
  uint64_t now = ticks_masked();
  mlf_restore_interrupts(primask);
  return now;
}

void mlf_systick_rephase(void) {
  if ((MLF_SYST_CSR & MLF_SYST_CSR_ENABLE) == 0u) {
    return; /* not started yet: nothing to keep in phase */
  }
  uint32_t primask = mlf_mask_interrupts();
  uint64_t now = ticks_masked();
  /* Any write clears the counter; it reloads one tick later, so from here on tick edges fall
   * at a fixed instruction distance from this point. A wrap up to now is already in `now`. */
  MLF_SYST_CVR = 0;
  MLF_SCB_ICSR = MLF_SCB_ICSR_PENDSTCLR;
  while (MLF_SYST_CVR == 0u) {
  }
  systick_wrapped_ticks = now;
  mlf_restore_interrupts(primask);
}

#endif /* MLF_BOARD_TIMER_SYSTICK */
