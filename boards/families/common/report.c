/*
 * report.c — the diagnostic lines every microcontroller seam prints before it gives up (fault
 * handlers, mlf_platform_abort): numbers in hex from one template, so no printf is linked;
 * and where they go: semihosting, on QEMU (log and exit status).
 */
#include <stddef.h>
#include <stdint.h>

#include "mlf_board.h"
#include "mlf_platform.h"

void mlf_board_report(const char* line, const uint32_t* values) {
  char text[192]; /* the templates are the seams' own constants, all shorter */
  unsigned nibble = 0;
  size_t i = 0;
  char c;
  do {
    c = line[i];
    if (c == '.') {
      c = "0123456789abcdef"[(*values >> (28u - 4u * nibble)) & 0xFu];
      nibble = (nibble + 1u) & 7u;
      values += nibble == 0;
    }
    text[i++] = c;
  } while (c != '\0');
  mlf_platform_log(text);
}

void mlf_platform_log(const char* msg) {
#if MLF_BOARD_SEMIHOSTING
  mlf_semihosting_call(MLF_SEMIHOSTING_SYS_WRITE0, (uintptr_t)msg);
  mlf_semihosting_call(MLF_SEMIHOSTING_SYS_WRITE0, (uintptr_t) "\n");
#else
  (void)msg; /* no debugger to print to; the console link carries only the protocol */
#endif
}

void mlf_board_semihosting_exit(int status) {
#if MLF_BOARD_SEMIHOSTING
  uint32_t block[2] = {MLF_SEMIHOSTING_ADP_STOPPED_APPLICATION_EXIT, (uint32_t)status};
  mlf_semihosting_call(MLF_SEMIHOSTING_SYS_EXIT_EXTENDED, (uintptr_t)block);
  /* Only reached if the host lacks SYS_EXIT_EXTENDED: status 0 or 1 is all it can carry. */
  mlf_semihosting_call(MLF_SEMIHOSTING_SYS_EXIT,
                       status == 0 ? MLF_SEMIHOSTING_ADP_STOPPED_APPLICATION_EXIT : 0u);
#else
  (void)status;
#endif
}

void mlf_platform_abort(int code) {
  const uint32_t value = (uint32_t)code;
  mlf_board_report("mlf: abort: code 0x........", &value);
  mlf_platform_exit(MLF_EXIT_ABORT);
}
