/*
 * seam_test.c — a tiny firmware that exercises a board's C seam (mlf_platform.h) and nothing
 * else, driven by tests/test_qemu.py over the console link with one-byte commands:
 *
 *   'g'             greet: "SEAM\n", or "BAD!\n" when the start-up code did not copy .data
 *                   from flash or zero .bss (checked at boot)
 *   'e' n bytes[n]  echo n bytes, each XORed with 0x5A
 *   't' n(u32 LE)   run a 2-instruction busy loop n times; reply ticks(u64 LE) tick_hz(u64 LE)
 *   'w' any         reply 'W', wait (asleep) for one more byte; reply the wait's ticks(u64 LE)
 *   'p'             reply 4 bytes: the float 1.5f * x + 0.25f for x = 2.5f (FPU check)
 *   'l'             write a diagnostic line through mlf_platform_log; reply 'L'
 *   'x' status      exit with that status
 *   'a' code        mlf_platform_abort(code)
 *   'f'             execute an undefined instruction (fault)
 *   'b' addr(u32 LE) load from that address (a bus fault where nothing answers)
 *   'o'             recurse until the stack overflows
 *   'h'             hang (spin forever with interrupts enabled)
 *
 * It greets when asked, not at boot: QEMU's pty drops what the firmware writes before the
 * host has opened it, which a loaded machine can make late.
 */
#include <stddef.h>
#include <stdint.h>

#include "mlf_platform.h"

/* In .data and .bss on purpose: the greeting checks that start-up initialised them. */
static volatile uint8_t echo_key = 0x5Au;
static volatile uint32_t commands_seen;

static uint8_t read_byte(void) {
  uint8_t byte = 0;
  while (mlf_platform_read(&byte, 1) == 0) {
  }
  return byte;
}

static void write_u64(uint64_t value) {
  uint8_t bytes[8];
  for (size_t i = 0; i < sizeof bytes; ++i) {
    bytes[i] = (uint8_t)(value >> (8 * i));
  }
  mlf_platform_write(bytes, sizeof bytes);
}

static void echo(void) {
  uint8_t length = read_byte();
  uint8_t data[256];
  size_t received = 0;
  while (received < length) {
    received += mlf_platform_read(data + received, length - received);
  }
  for (size_t i = 0; i < length; ++i) {
    data[i] ^= echo_key;
  }
  mlf_platform_write(data, length);
}

static void busy_loop(uint32_t iterations) {
  /* Two instructions per iteration, whatever the compiler's optimisation level. */
#if defined(__riscv)
  __asm__ volatile(
      "1:\n\t"
      "addi %0, %0, -1\n\t"
      "bnez %0, 1b\n\t"
      : "+r"(iterations));
#else
  /* GCC hands Thumb-1 (ARMv6-M) inline assembly over in divided syntax, where SUBS is
   * spelled SUB: ask for unified syntax, which every Arm target then reads alike. */
  __asm__ volatile(
      ".syntax unified\n\t"
      "1:\n\t"
      "subs %0, %0, #1\n\t"
      "bne 1b\n\t"
      : "+r"(iterations)
      :
      : "cc");
#endif
}

static uint32_t read_u32(void) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) {
    value |= (uint32_t)read_byte() << (8 * i);
  }
  return value;
}

static void measure_ticks(void) {
  uint32_t iterations = read_u32();
  uint64_t start = mlf_platform_ticks();
  busy_loop(iterations == 0 ? 1 : iterations);
  uint64_t end = mlf_platform_ticks();
  write_u64(end - start);
  write_u64(mlf_platform_tick_hz());
}

static void measure_wait(void) {
  static const uint8_t kAck = 'W';
  uint64_t start = mlf_platform_ticks();
  mlf_platform_write(&kAck, 1);
  (void)read_byte();
  write_u64(mlf_platform_ticks() - start);
}

/* Each level keeps a buffer live across the call, so the compiler can neither drop the frame
 * nor turn the recursion into a loop. */
static uint32_t recurse(uint32_t depth, uint32_t limit) {
  volatile uint32_t frame[64];
  frame[depth % 64u] = depth;
  if (depth == limit) {
    return frame[0];
  }
  return recurse(depth + 1u, limit) + frame[(depth + 1u) % 64u];
}

static void float_check(void) {
  volatile float x = 2.5f;
  float result = 1.5f * x + 0.25f;
  uint32_t bits;
  const uint8_t* source = (const uint8_t*)&result;
  uint8_t* target = (uint8_t*)&bits;
  for (size_t i = 0; i < sizeof bits; ++i) {
    target[i] = source[i];
  }
  uint8_t bytes[4] = {(uint8_t)bits, (uint8_t)(bits >> 8), (uint8_t)(bits >> 16),
                      (uint8_t)(bits >> 24)};
  mlf_platform_write(bytes, sizeof bytes);
}

int main(void) {
  mlf_platform_init();
  static const uint8_t kGreeting[] = "SEAM\n";
  static const uint8_t kBadStart[] = "BAD!\n";
  const int started_well = echo_key == 0x5Au && commands_seen == 0u;
  for (;;) {
    uint8_t command = read_byte();
    commands_seen = commands_seen + 1u;
    switch (command) {
      case 'g':
        mlf_platform_write(started_well ? kGreeting : kBadStart, sizeof kGreeting - 1);
        break;
      case 'e':
        echo();
        break;
      case 't':
        measure_ticks();
        break;
      case 'w':
        measure_wait();
        break;
      case 'p':
        float_check();
        break;
      case 'l': {
        mlf_platform_log("seam_test: diagnostic line");
        static const uint8_t kAck = 'L';
        mlf_platform_write(&kAck, 1);
        break;
      }
      case 'x':
        mlf_platform_exit(read_byte());
      case 'a':
        mlf_platform_abort(read_byte());
      case 'f':
#if defined(__riscv)
        __asm__ volatile(".word 0"); /* an all-zero word is reserved as illegal */
#else
        __asm__ volatile("udf #0");
#endif
        break;
      case 'b': {
        volatile const uint32_t* address = (volatile const uint32_t*)(uintptr_t)read_u32();
        uint32_t value = *address;
        uint8_t bytes[4] = {(uint8_t)value, (uint8_t)(value >> 8), (uint8_t)(value >> 16),
                            (uint8_t)(value >> 24)};
        mlf_platform_write(bytes, sizeof bytes);
        break;
      }
      case 'o':
        (void)recurse(0, UINT32_MAX);
        break;
      case 'h':
        for (;;) {
          __asm__ volatile("nop");
        }
      default: {
        static const uint8_t kUnknown = '?';
        mlf_platform_write(&kUnknown, 1);
        break;
      }
    }
  }
}
