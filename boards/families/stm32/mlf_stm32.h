/*
 * mlf_stm32.h — what the STM32 families (stm32f4, stm32f7, stm32l4) really share: the GPIO
 * port layout, the console pins and their clock enable given by the board file, and the
 * U(S)ART with ISR/RDR/TDR registers that the L4 LPUART and the F7 USART both have (the F4
 * USART is the older SR/DR kind and has its own driver).
 *
 * Each family provides "mlf_stm32_series.h" with where its GPIO ports and their clock enable
 * live (MLF_STM32_GPIO_BASE, MLF_STM32_GPIO_PORT_STRIDE, MLF_STM32_RCC_GPIO_ENR).
 */
#ifndef MLF_STM32_H_
#define MLF_STM32_H_

#include <stddef.h>
#include <stdint.h>

#include "mlf_cortex_m.h"
#include "mlf_stm32_series.h"

#ifndef MLF_BOARD_CONSOLE_IRQ
#error "MLF_BOARD_CONSOLE_IRQ missing: the board file needs [console] irq (its U(S)ART's IRQ)"
#endif

/* GPIO port registers (identical on F4, F7, L4). Ports are numbered from 0 (A). */
#define MLF_STM32_GPIO(port) (MLF_STM32_GPIO_BASE + MLF_STM32_GPIO_PORT_STRIDE * (uint32_t)(port))
#define MLF_STM32_GPIO_MODER(port) MLF_REG32(MLF_STM32_GPIO(port) + 0x00u)
#define MLF_STM32_GPIO_OTYPER(port) MLF_REG32(MLF_STM32_GPIO(port) + 0x04u)
#define MLF_STM32_GPIO_OSPEEDR(port) MLF_REG32(MLF_STM32_GPIO(port) + 0x08u)
#define MLF_STM32_GPIO_BSRR(port) MLF_REG32(MLF_STM32_GPIO(port) + 0x18u)
#define MLF_STM32_GPIO_AFR(port, pin) MLF_REG32(MLF_STM32_GPIO(port) + 0x20u + 4u * ((pin) >> 3))
#define MLF_STM32_GPIO_MODE_OUTPUT 1u
#define MLF_STM32_GPIO_MODE_ALTERNATE 2u
#define MLF_STM32_GPIO_SPEED_HIGH 2u

static inline void mlf_stm32_gpio_clock_on(uint32_t port) {
  MLF_STM32_RCC_GPIO_ENR |= 1u << port;
  (void)MLF_STM32_RCC_GPIO_ENR; /* the clock must run before the port is written */
}

static inline void mlf_stm32_gpio_mode(uint32_t port, uint32_t pin, uint32_t mode) {
  MLF_STM32_GPIO_MODER(port) =
      (MLF_STM32_GPIO_MODER(port) & ~(3u << (2u * pin))) | (mode << (2u * pin));
}

static inline void mlf_stm32_gpio_alternate(uint32_t port, uint32_t pin, uint32_t af) {
  mlf_stm32_gpio_clock_on(port);
  mlf_stm32_gpio_mode(port, pin, MLF_STM32_GPIO_MODE_ALTERNATE);
  MLF_STM32_GPIO_OSPEEDR(port) = (MLF_STM32_GPIO_OSPEEDR(port) & ~(3u << (2u * pin))) |
                                 (MLF_STM32_GPIO_SPEED_HIGH << (2u * pin));
  uint32_t shift = 4u * (pin & 7u);
  MLF_STM32_GPIO_AFR(port, pin) =
      (MLF_STM32_GPIO_AFR(port, pin) & ~(0xFu << shift)) | (af << shift);
}

/* The console's pins and clock enable come from the board file ([definitions]); a family
 * whose boards all share them may define defaults before including this header. */
#if !defined(MLF_STM32_CONSOLE_TX_PORT) || !defined(MLF_STM32_CONSOLE_TX_PIN) || \
    !defined(MLF_STM32_CONSOLE_RX_PORT) || !defined(MLF_STM32_CONSOLE_RX_PIN) || \
    !defined(MLF_STM32_CONSOLE_AF) || !defined(MLF_STM32_CONSOLE_RCC_ENR) ||     \
    !defined(MLF_STM32_CONSOLE_RCC_BIT)
#error \
    "stm32: the board's [definitions] must give MLF_STM32_CONSOLE_TX_PORT/_PIN, _RX_PORT/_PIN, _AF, _RCC_ENR and _RCC_BIT"
#endif

/* Clock, pins: what every STM32 console needs before its UART is programmed. */
static inline void mlf_stm32_console_pins(void) {
  MLF_REG32(MLF_STM32_CONSOLE_RCC_ENR) |= 1u << (MLF_STM32_CONSOLE_RCC_BIT);
  (void)MLF_REG32(MLF_STM32_CONSOLE_RCC_ENR);
  mlf_stm32_gpio_alternate(MLF_STM32_CONSOLE_TX_PORT, MLF_STM32_CONSOLE_TX_PIN,
                           MLF_STM32_CONSOLE_AF);
  mlf_stm32_gpio_alternate(MLF_STM32_CONSOLE_RX_PORT, MLF_STM32_CONSOLE_RX_PIN,
                           MLF_STM32_CONSOLE_AF);
}

/* U(S)ART with ISR/RDR/TDR (L4 LPUART, F7 USART), at the console's address. */
#define MLF_STM32_UART_CR1 MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x00u)
#define MLF_STM32_UART_CR3 MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x08u)
#define MLF_STM32_UART_BRR MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x0Cu)
#define MLF_STM32_UART_ISR MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x1Cu)
#define MLF_STM32_UART_RDR MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x24u)
#define MLF_STM32_UART_TDR MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x28u)
#define MLF_STM32_UART_CR1_UE (1u << 0)
#define MLF_STM32_UART_CR1_RE (1u << 2)
#define MLF_STM32_UART_CR1_TE (1u << 3)
#define MLF_STM32_UART_CR1_RXNEIE (1u << 5)
#define MLF_STM32_UART_CR3_OVRDIS (1u << 12)
#define MLF_STM32_UART_ISR_RXNE (1u << 5)
#define MLF_STM32_UART_ISR_TXE (1u << 7)

static inline void mlf_stm32_uart_enable(uint32_t brr) {
  MLF_STM32_UART_CR1 = 0;
  MLF_STM32_UART_BRR = brr;
  /* A byte lost while the firmware computes must not wedge reception: the protocol's
   * checksums catch the loss. */
  MLF_STM32_UART_CR3 = MLF_STM32_UART_CR3_OVRDIS;
  /* The receive interrupt only wakes the core (mlf_console_wait). */
  MLF_STM32_UART_CR1 = MLF_STM32_UART_CR1_UE | MLF_STM32_UART_CR1_RE | MLF_STM32_UART_CR1_TE |
                       MLF_STM32_UART_CR1_RXNEIE;
}

/* RXNE is the interrupt's level and reading RDR clears it: nothing is latched to clear. */
static inline int mlf_stm32_uart_rx_ready(void) {
  return (MLF_STM32_UART_ISR & MLF_STM32_UART_ISR_RXNE) != 0u;
}

static inline size_t mlf_stm32_uart_read(uint8_t* buf, size_t max) {
  if (max == 0) {
    return 0;
  }
  mlf_console_wait(mlf_stm32_uart_rx_ready);
  size_t count = 0;
  do {
    buf[count++] = (uint8_t)MLF_STM32_UART_RDR;
  } while (count < max && (MLF_STM32_UART_ISR & MLF_STM32_UART_ISR_RXNE) != 0u);
  mlf_systick_rephase();
  return count;
}

static inline void mlf_stm32_uart_write(const uint8_t* buf, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    while ((MLF_STM32_UART_ISR & MLF_STM32_UART_ISR_TXE) == 0u) {
    }
    MLF_STM32_UART_TDR = buf[i];
  }
  mlf_systick_rephase();
}

#endif /* MLF_STM32_H_ */
