/*
 * console_stm32f4_usart.c — the console of STM32F4 boards: a USART of the older SR/DR kind
 * (F4 and F2; the F7 and L4 have ISR/RDR/TDR), polled; which USART, its pins and its clock
 * enable come from the board file. No clock set-up: the F4 leaves reset on HSI 16 MHz with
 * the APB buses undivided, which the board's clock_hz values state. (QEMU's netduinoplus2
 * models RCC and the flash interface as reading 0, so code waiting for a ready bit would
 * hang there; this code waits on none.)
 *
 * QEMU's STM32F4 USART drops every received byte while CR1 lacks UE or RE, so both are set
 * before anything can arrive.
 */
#include <stddef.h>
#include <stdint.h>

#include "mlf_cortex_m.h"
#include "mlf_platform.h"
#include "mlf_stm32.h"

#define USART_SR MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x00u)
#define USART_DR MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x04u)
#define USART_BRR MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x08u)
#define USART_CR1 MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x0Cu)
#define USART_SR_RXNE (1u << 5)
#define USART_SR_TXE (1u << 7)
#define USART_CR1_RE (1u << 2)
#define USART_CR1_RXNEIE (1u << 5)
#define USART_CR1_TE (1u << 3)
#define USART_CR1_UE (1u << 13)

/* 16x oversampling: BRR = f_ck / baud (mantissa and 4-bit fraction), rounded. */
#define USART_DIVISOR \
  ((MLF_BOARD_CONSOLE_CLOCK_HZ + MLF_BOARD_CONSOLE_BAUD / 2u) / MLF_BOARD_CONSOLE_BAUD)
#if USART_DIVISOR < 16 || USART_DIVISOR > 0xFFFF
#error "stm32f4 seam: console clock_hz / baud out of range for a USART (16x oversampling)"
#endif

void mlf_family_init(void) {
  mlf_stm32_console_pins();
  USART_CR1 = 0;
  USART_BRR = USART_DIVISOR;
  /* The receive interrupt only wakes the core (mlf_console_wait). */
  USART_CR1 = USART_CR1_UE | USART_CR1_TE | USART_CR1_RE | USART_CR1_RXNEIE;
}

/* RXNE is the interrupt's level and reading DR clears it: nothing is latched to clear. */
static int rx_ready(void) { return (USART_SR & USART_SR_RXNE) != 0u; }

size_t mlf_platform_read(uint8_t* buf, size_t max) {
  if (max == 0) {
    return 0;
  }
  mlf_console_wait(rx_ready);
  size_t count = 0;
  do {
    buf[count++] = (uint8_t)USART_DR;
  } while (count < max && (USART_SR & USART_SR_RXNE) != 0u);
  mlf_systick_rephase();
  return count;
}

void mlf_platform_write(const uint8_t* buf, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    while ((USART_SR & USART_SR_TXE) == 0u) {
    }
    USART_DR = buf[i];
  }
  mlf_systick_rephase();
}
