/*
 * mlf_stm32_series.h — STM32G0 (Cortex-M0+): GPIO ports on the IOPORT bus at 0x50000000,
 * clocked from RCC_IOPENR. Read by the shared STM32 code (families/stm32/mlf_stm32.h).
 */
#ifndef MLF_STM32_SERIES_H_
#define MLF_STM32_SERIES_H_

#define MLF_STM32_GPIO_BASE 0x50000000u
#define MLF_STM32_GPIO_PORT_STRIDE 0x400u
#define MLF_STM32_RCC_GPIO_ENR MLF_REG32(0x40021000u + 0x34u)

/* Arduino D7 of the Nucleo-64 boards: PA8. */
#define MLF_STM32_TIMESTAMP_DEFAULT_PORT 0u
#define MLF_STM32_TIMESTAMP_DEFAULT_PIN 8u

#endif /* MLF_STM32_SERIES_H_ */
