/*
 * console_stm32g0_usart.c — the console of STM32G0 boards (NUCLEO-G071RB: USART2 on PA2/PA3,
 * AF1, as the board file says): a USART with the ISR/RDR/TDR registers of the L4 and F7
 * (shared in families/stm32), its FIFO left off as reset leaves it. No clock set-up: the G0
 * leaves reset on HSI16 (HSIDIV 1) with PCLK undivided, and USART2's kernel clock is PCLK,
 * which the board's clock_hz values state.
 *
 * Built in CI (it must compile) but only runs on the real board.
 */
#include <stddef.h>
#include <stdint.h>

#include "mlf_cortex_m.h"
#include "mlf_platform.h"
#include "mlf_stm32.h"

/* 16x oversampling: BRR = USARTDIV = f_ck / baud, rounded. */
#define USART_DIVISOR \
  ((MLF_BOARD_CONSOLE_CLOCK_HZ + MLF_BOARD_CONSOLE_BAUD / 2u) / MLF_BOARD_CONSOLE_BAUD)
#if USART_DIVISOR < 16 || USART_DIVISOR > 0xFFFF
#error "stm32g0 seam: console clock_hz / baud out of range for a USART (16x oversampling)"
#endif

void mlf_family_init(void) {
  mlf_stm32_console_pins();
  mlf_stm32_uart_enable(USART_DIVISOR);
}

size_t mlf_platform_read(uint8_t* buf, size_t max) { return mlf_stm32_uart_read(buf, max); }

void mlf_platform_write(const uint8_t* buf, size_t n) { mlf_stm32_uart_write(buf, n); }
