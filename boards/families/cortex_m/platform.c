/*
 * platform.c — the parts of mlf_platform.h every Cortex-M board shares: start-up order, the
 * semihosting trap (BKPT 0xAB), the console's sleeping wait, and the newlib hooks a
 * bare-metal program still needs (_exit, _sbrk). The tick counter is the board's timer kind
 * (timer_systick.c, or a family's); reports and exit are common/report.c's.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "mlf_cortex_m.h"
#include "mlf_platform.h"

void mlf_platform_init(void) {
  mlf_family_init();
  mlf_timer_start();
}

#ifndef MLF_CONSOLE_POLL
#define MLF_CONSOLE_POLL 0
#endif

#ifdef MLF_BOARD_CONSOLE_IRQ
void mlf_console_wait(int (*rx_ready)(void)) {
#if MLF_CONSOLE_POLL
  while (!rx_ready()) {
  }
#else
  /* Masked for the whole wait: the console interrupt has no handler, and a byte may arrive at
   * any point of the loop. A pending interrupt ends WFI all the same, so a byte that lands
   * between rx_ready() and WFI makes WFI return at once: nothing is slept through. Reads come
   * from thread code with interrupts on, so they are simply turned back on at the end (saving
   * and restoring PRIMASK costs bytes every firmware would carry). */
  __asm__ volatile("cpsid i" ::: "memory");
  MLF_NVIC_ISER(MLF_BOARD_CONSOLE_IRQ) = MLF_NVIC_BIT(MLF_BOARD_CONSOLE_IRQ);
  for (;;) {
    /* A level the UART still asserts keeps it pending; rx_ready() drops the level, so at
     * worst the next WFI returns at once and this runs again. */
    MLF_NVIC_ICPR(MLF_BOARD_CONSOLE_IRQ) = MLF_NVIC_BIT(MLF_BOARD_CONSOLE_IRQ);
    if (rx_ready()) {
      break;
    }
    __asm__ volatile("wfi" ::: "memory");
    /* A SysTick wrap ends WFI too but cannot be taken here; left pending it would keep WFI
     * from sleeping. Re-phasing counts it and clears it (a wait's length is the host's
     * anyway), in fewer bytes than doing the handler's work here. */
    mlf_systick_rephase();
  }
  /* Disabled before unmasking: a byte arriving during an inference must not be taken. */
  MLF_NVIC_ICER(MLF_BOARD_CONSOLE_IRQ) = MLF_NVIC_BIT(MLF_BOARD_CONSOLE_IRQ);
  __asm__ volatile("cpsie i" ::: "memory");
#endif
}
#endif

uint64_t mlf_platform_tick_hz(void) { return (uint64_t)MLF_BOARD_TICK_HZ; }

extern uint32_t __mlf_stack_top;
extern uint32_t __mlf_stack_limit;

size_t mlf_platform_stack_used(void) {
  /* The reset handler painted the stack; the first word from the bottom that lost the paint
   * is the deepest the stack has reached (a word that happened to be written with the pattern
   * itself makes this an underestimate by at most that word). */
  const uint32_t* word = &__mlf_stack_limit;
  while (word < &__mlf_stack_top && *word == MLF_STACK_PAINT) {
    ++word;
  }
  return (size_t)((uintptr_t)&__mlf_stack_top - (uintptr_t)word);
}

/* Boards whose family wires a timestamp pin for MLPerf Tiny's energy monitor (stm32) override
 * this; the others (QEMU machines) have none. */
__attribute__((weak)) int mlf_platform_timestamp_pulse(void) { return 0; }

uintptr_t mlf_semihosting_call(uintptr_t operation, uintptr_t argument) {
  register uintptr_t r0 __asm__("r0") = operation;
  register uintptr_t r1 __asm__("r1") = argument;
  __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

void mlf_platform_exit(int status) {
  mlf_board_semihosting_exit(status);
  __asm__ volatile("cpsid i" ::: "memory");
  for (;;) {
    __asm__ volatile("wfi");
  }
}

/* newlib's exit() and abort() end here. */
void _exit(int status);
void _exit(int status) { mlf_platform_exit(status); }

/* newlib's malloc grows the heap through _sbrk. The firmware never allocates, but a library
 * function might; the heap is bounded by the linker script (heap_bytes, 0 by default) so an
 * allocation fails cleanly instead of running into the stack or the arena. */
extern uint8_t __mlf_heap_start[];
extern uint8_t __mlf_heap_end[];
void* _sbrk(ptrdiff_t increment);
void* _sbrk(ptrdiff_t increment) {
  static uint8_t* heap_top = __mlf_heap_start;
  if (increment < 0 || increment > __mlf_heap_end - heap_top) {
    errno = ENOMEM;
    return (void*)-1;
  }
  uint8_t* previous = heap_top;
  heap_top += increment;
  return previous;
}
