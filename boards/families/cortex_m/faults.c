/*
 * faults.c — every unexpected exception ends the program with MLF_EXIT_FAULT after one
 * diagnostic line, so a crashing firmware is reported by the runner within its time-out
 * instead of spinning forever in a default handler.
 */
#include <stddef.h>
#include <stdint.h>

#include "mlf_cortex_m.h"
#include "mlf_platform.h"

void mlf_fault_entry(void);
__attribute__((noreturn, used)) void mlf_fault_report(const uint32_t* frame, uint32_t exc_return);

/* The stacked frame is on whichever stack was active: EXC_RETURN bit 2 tells which. The
 * handler never returns, so it may run on top of that frame. */
__attribute__((naked)) void mlf_fault_entry(void) {
  __asm__ volatile(
      "tst lr, #4\n\t"
      "ite eq\n\t"
      "mrseq r0, msp\n\t"
      "mrsne r0, psp\n\t"
      "mov r1, lr\n\t"
      "b mlf_fault_report\n\t");
}

static const char* exception_name(uint32_t number) {
  switch (number) {
    case 2:
      return "NMI";
    case 3:
      return "HardFault";
    case 4:
      return "MemManage";
    case 5:
      return "BusFault";
    case 6:
      return "UsageFault";
    case 7:
      return "SecureFault";
    case 11:
      return "SVCall";
    case 12:
      return "DebugMonitor";
    case 14:
      return "PendSV";
    default:
      return number >= 16 ? "IRQ" : "exception";
  }
}

typedef struct {
  char text[192];
  size_t length;
} line_buffer;

static void append_text(line_buffer* line, const char* text) {
  while (*text != '\0' && line->length + 1 < sizeof line->text) {
    line->text[line->length++] = *text++;
  }
  line->text[line->length] = '\0';
}

static void append_hex(line_buffer* line, const char* label, uint32_t value) {
  static const char kDigits[] = "0123456789abcdef";
  char digits[12] = {' ', '\0'};
  append_text(line, " ");
  append_text(line, label);
  append_text(line, "=0x");
  for (int i = 0; i < 8; ++i) {
    digits[i] = kDigits[(value >> (28 - 4 * i)) & 0xFu];
  }
  digits[8] = '\0';
  append_text(line, digits);
}

void mlf_fault_report(const uint32_t* frame, uint32_t exc_return) {
  uint32_t ipsr;
  __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
  uint32_t number = ipsr & 0x1FFu;

  line_buffer line = {{0}, 0};
  append_text(&line, "mlf: fault: ");
  append_text(&line, exception_name(number));
  append_hex(&line, "exception", number);
  append_hex(&line, "pc", frame[6]);
  append_hex(&line, "lr", frame[5]);
  append_hex(&line, "xpsr", frame[7]);
  append_hex(&line, "cfsr", MLF_SCB_CFSR);
  append_hex(&line, "hfsr", MLF_SCB_HFSR);
  append_hex(&line, "bfar", MLF_SCB_BFAR);
  append_hex(&line, "exc_return", exc_return);
  mlf_platform_log(line.text);
  mlf_platform_exit(MLF_EXIT_FAULT);
}
