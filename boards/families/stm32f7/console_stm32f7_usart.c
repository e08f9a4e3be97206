/*
 * console_stm32f7_usart.c — the console of STM32F7 boards (NUCLEO-F746ZG: USART3 on PD8/PD9,
 * 32F746G-DISCO: USART1 on PA9/PB7, as the board file says): a USART with the ISR/RDR/TDR
 * registers of the L4 (shared in families/stm32), polled. No clock set-up: the F7 leaves
 * reset on HSI 16 MHz with the APB buses undivided, which the board's clock_hz values state.
 *
 * Built in CI (it must compile) but only runs on the real boards.
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
#error "stm32f7 seam: console clock_hz / baud out of range for a USART (16x oversampling)"
#endif

void mlf_family_init(void) {
  mlf_stm32_console_pins();
  mlf_stm32_uart_enable(USART_DIVISOR);
}

size_t mlf_platform_read(uint8_t* buf, size_t max) { return mlf_stm32_uart_read(buf, max); }

void mlf_platform_write(const uint8_t* buf, size_t n) { mlf_stm32_uart_write(buf, n); }
