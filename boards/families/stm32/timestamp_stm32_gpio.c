/*
 * timestamp_stm32l4_gpio.c — the timestamp pin of MLPerf Tiny's energy mode on STM32L4/L4+
 * boards (mlf_platform_timestamp_pulse): a push-pull output, idle high, pulled low for at
 * least 1 us per timestamp, which the EEMBC energy monitor / IO manager watches for.
 *
 * The pin defaults to PF13 (Arduino D7 on the Nucleo-144 boards); choose another with the
 * project option compile_definitions, e.g. "MLF_TIMESTAMP_GPIO_PORT=2 MLF_TIMESTAMP_GPIO_PIN=8"
 * for PC8 (port 0 is A). Configured on first use, so firmware that never pulses leaves the
 * pin alone. Built in CI (it must compile) but only runs on the real board.
 */
#include <stddef.h>
#include <stdint.h>

#include "mlf_cortex_m.h"
#include "mlf_platform.h"

#ifndef MLF_TIMESTAMP_GPIO_PORT
#define MLF_TIMESTAMP_GPIO_PORT 5u /* F */
#endif
#ifndef MLF_TIMESTAMP_GPIO_PIN
#define MLF_TIMESTAMP_GPIO_PIN 13u
#endif
#if MLF_TIMESTAMP_GPIO_PORT > 8 || MLF_TIMESTAMP_GPIO_PIN > 15
#error "stm32l4 seam: the timestamp pin is port 0..8 (A..I), pin 0..15"
#endif

#define RCC_AHB2ENR MLF_REG32(0x40021000u + 0x4Cu)
#define GPIO_BASE (0x48000000u + 0x400u * (MLF_TIMESTAMP_GPIO_PORT))
#define GPIO_MODER MLF_REG32(GPIO_BASE + 0x00u)
#define GPIO_OTYPER MLF_REG32(GPIO_BASE + 0x04u)
#define GPIO_BSRR MLF_REG32(GPIO_BASE + 0x18u)
#define PIN_BIT (1u << (MLF_TIMESTAMP_GPIO_PIN))
#define MODE_SHIFT (2u * (MLF_TIMESTAMP_GPIO_PIN))
#define MODE_OUTPUT 1u

/* Ticks of at least 1 us, rounded up. */
#define PULSE_TICKS (((uint64_t)MLF_BOARD_TICK_HZ + 999999u) / 1000000u + 1u)

static int timestamp_pin_ready;

static void timestamp_pin_init(void) {
  RCC_AHB2ENR |= 1u << (MLF_TIMESTAMP_GPIO_PORT);
  (void)RCC_AHB2ENR;   /* the clock must run before the port is written */
  GPIO_BSRR = PIN_BIT; /* idle high before it drives */
  GPIO_OTYPER &= ~PIN_BIT;
  GPIO_MODER = (GPIO_MODER & ~(3u << MODE_SHIFT)) | (MODE_OUTPUT << MODE_SHIFT);
  timestamp_pin_ready = 1;
}

int mlf_platform_timestamp_pulse(void) {
  if (!timestamp_pin_ready) timestamp_pin_init();
  GPIO_BSRR = PIN_BIT << 16; /* low */
  uint64_t start = mlf_platform_ticks();
  while (mlf_platform_ticks() - start < PULSE_TICKS) {
  }
  GPIO_BSRR = PIN_BIT; /* released: high again */
  return 1;
}
