/*
 * timestamp_stm32_gpio.c — the timestamp pin of MLPerf Tiny's energy mode on STM32 boards
 * (mlf_platform_timestamp_pulse): a push-pull output, idle high, pulled low for at least
 * 1 us per timestamp, which the EEMBC energy monitor / IO manager watches for.
 *
 * The pin defaults to the series' choice in mlf_stm32_series.h (Arduino D7 of its Nucleo
 * boards: PF13 on the Nucleo-144 L4/F7 boards, PA8 on the Nucleo-64 F4 boards); choose
 * another with the project option compile_definitions, e.g.
 * "MLF_TIMESTAMP_GPIO_PORT=2 MLF_TIMESTAMP_GPIO_PIN=8" for PC8 (port 0 is A). Configured on
 * first use, so firmware that never pulses leaves the pin alone. Built in CI (it must
 * compile) but only runs on the real boards.
 */
#include <stddef.h>
#include <stdint.h>

#include "mlf_cortex_m.h"
#include "mlf_platform.h"
#include "mlf_stm32.h"

#ifndef MLF_TIMESTAMP_GPIO_PORT
#define MLF_TIMESTAMP_GPIO_PORT MLF_STM32_TIMESTAMP_DEFAULT_PORT
#endif
#ifndef MLF_TIMESTAMP_GPIO_PIN
#define MLF_TIMESTAMP_GPIO_PIN MLF_STM32_TIMESTAMP_DEFAULT_PIN
#endif
#if MLF_TIMESTAMP_GPIO_PORT > 10 || MLF_TIMESTAMP_GPIO_PIN > 15
#error "stm32 seam: the timestamp pin is port 0..10 (A..K), pin 0..15"
#endif

#define PIN_BIT (1u << (MLF_TIMESTAMP_GPIO_PIN))

/* Ticks of at least 1 us, rounded up. */
#define PULSE_TICKS (((uint64_t)MLF_BOARD_TICK_HZ + 999999u) / 1000000u + 1u)

static int timestamp_pin_ready;

static void timestamp_pin_init(void) {
  mlf_stm32_gpio_clock_on(MLF_TIMESTAMP_GPIO_PORT);
  MLF_STM32_GPIO_BSRR(MLF_TIMESTAMP_GPIO_PORT) = PIN_BIT; /* idle high before it drives */
  MLF_STM32_GPIO_OTYPER(MLF_TIMESTAMP_GPIO_PORT) &= ~PIN_BIT;
  mlf_stm32_gpio_mode(MLF_TIMESTAMP_GPIO_PORT, MLF_TIMESTAMP_GPIO_PIN, MLF_STM32_GPIO_MODE_OUTPUT);
  timestamp_pin_ready = 1;
}

int mlf_platform_timestamp_pulse(void) {
  if (!timestamp_pin_ready) timestamp_pin_init();
  MLF_STM32_GPIO_BSRR(MLF_TIMESTAMP_GPIO_PORT) = PIN_BIT << 16; /* low */
  uint64_t start = mlf_platform_ticks();
  while (mlf_platform_ticks() - start < PULSE_TICKS) {
  }
  MLF_STM32_GPIO_BSRR(MLF_TIMESTAMP_GPIO_PORT) = PIN_BIT; /* released: high again */
  return 1;
}
