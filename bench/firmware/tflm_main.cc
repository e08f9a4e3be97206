/*
 * tflm_main.cc — bench part 25 (bench/tflm.py): one inference of a .tflite under TFLM, on a
 * QEMU board through our board seam (start-up, linker script, SysTick, semihosting log).
 *
 * bench/tflm.py writes tflm_model.h beside it:
 *   TFLM_OPS(X)        X(AddConv2D, registration) ... : the model's operators, for a
 *                      MicroMutableOpResolver (an empty registration: the method's default)
 *   TFLM_NUM_OPS       how many
 *   TFLM_SAMPLE_BYTES  the inputs' bytes
 * and defines in tflm_data.S (.incbin) and tflm_arena.c, linked beside it:
 *   tflm_model[]       the .tflite (16-aligned)
 *   tflm_sample[]      the inputs, one after the other in input order (a symbol of its own,
 *                      so that its bytes can be subtracted from flash)
 *   tflm_arena[], tflm_arena_bytes: the tensor arena (16-aligned; only this file changes
 *                      while the bench looks for the smallest arena that works)
 *
 * It prints, one per line through mlf_platform_log: "arena_used <n>", "ticks <hi> <lo>" (the
 * SysTick ticks of Invoke() alone, as our firmware counts mlf_executor_run()), "stack <n>",
 * then "output <i> <hex bytes>" per output, and exits 0; a failure prints "error <what>" and
 * exits 3.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <new>

#include "tensorflow/lite/micro/cortex_m_generic/debug_log_callback.h"
#include "tensorflow/lite/micro/micro_interpreter.h"
#include "tensorflow/lite/micro/micro_mutable_op_resolver.h"
#include "tensorflow/lite/schema/schema_generated.h"
#include "tflm_model.h"

extern "C" {
#include "mlf_platform.h"

extern const unsigned char tflm_model[];
extern const unsigned char tflm_sample[];
extern unsigned char tflm_arena[];
extern const unsigned int tflm_arena_bytes;
}

namespace {

using Resolver = tflite::MicroMutableOpResolver<TFLM_NUM_OPS>;

// Constructed in place: static objects with destructors would pull in atexit.
alignas(Resolver) uint8_t resolver_storage[sizeof(Resolver)];
alignas(tflite::MicroInterpreter) uint8_t interpreter_storage[sizeof(tflite::MicroInterpreter)];

char line[16 + 2 * 32 + 1];

char* put_decimal(char* out, uint32_t value) {
  char digits[10];
  int count = 0;
  do {
    digits[count++] = static_cast<char>('0' + value % 10u);
    value /= 10u;
  } while (value != 0u);
  while (count > 0) *out++ = digits[--count];
  return out;
}

void log_number(const char* label, uint32_t value) {
  char* out = line;
  while (*label != '\0') *out++ = *label++;
  *out++ = ' ';
  *put_decimal(out, value) = '\0';
  mlf_platform_log(line);
}

void fail(const char* what) {
  char* out = line;
  const char* prefix = "error ";
  while (*prefix != '\0') *out++ = *prefix++;
  while (*what != '\0' && out < line + sizeof(line) - 1) *out++ = *what++;
  *out = '\0';
  mlf_platform_log(line);
  mlf_platform_exit(3);
}

// "output <index> <offset> <up to 32 bytes in hex>", one line per 32 bytes.
void log_bytes(uint32_t index, const uint8_t* bytes, size_t count) {
  static const char hex[] = "0123456789abcdef";
  for (size_t offset = 0; offset < count; offset += 32u) {
    char* out = line;
    memcpy(out, "output ", 7);
    out = put_decimal(out + 7, index);
    *out++ = ' ';
    out = put_decimal(out, static_cast<uint32_t>(offset));
    *out++ = ' ';
    for (size_t i = offset; i < count && i < offset + 32u; ++i) {
      *out++ = hex[bytes[i] >> 4];
      *out++ = hex[bytes[i] & 15u];
    }
    *out = '\0';
    mlf_platform_log(line);
  }
}

}  // namespace

int main(void) {
  mlf_platform_init();
  RegisterDebugLogCallback(mlf_platform_log);

  const tflite::Model* model = tflite::GetModel(tflm_model);
  if (model->version() != TFLITE_SCHEMA_VERSION) fail("schema version");
  Resolver* resolver = new (resolver_storage) Resolver();
#define TFLM_ADD(method, ...) \
  if (resolver->method(__VA_ARGS__) != kTfLiteOk) fail(#method);
  TFLM_OPS(TFLM_ADD)
#undef TFLM_ADD
  tflite::MicroInterpreter* interpreter = new (interpreter_storage)
      tflite::MicroInterpreter(model, *resolver, tflm_arena, tflm_arena_bytes);
  if (interpreter->AllocateTensors() != kTfLiteOk) fail("AllocateTensors");
  log_number("arena_used", static_cast<uint32_t>(interpreter->arena_used_bytes()));

  size_t offset = 0;
  for (size_t i = 0; i < interpreter->inputs_size(); ++i) {
    TfLiteTensor* input = interpreter->input(i);
    if (offset + input->bytes > TFLM_SAMPLE_BYTES) fail("sample too short");
    memcpy(input->data.raw, tflm_sample + offset, input->bytes);
    offset += input->bytes;
  }
  if (offset != TFLM_SAMPLE_BYTES) fail("sample too long");

  uint64_t start = mlf_platform_ticks();
  TfLiteStatus status = interpreter->Invoke();
  uint64_t ticks = mlf_platform_ticks() - start;
  if (status != kTfLiteOk) fail("Invoke");
  log_number("ticks_hi", static_cast<uint32_t>(ticks >> 32));
  log_number("ticks_lo", static_cast<uint32_t>(ticks));
  log_number("stack", static_cast<uint32_t>(mlf_platform_stack_used()));
  for (size_t i = 0; i < interpreter->outputs_size(); ++i) {
    const TfLiteTensor* output = interpreter->output(i);
    log_bytes(static_cast<uint32_t>(i), reinterpret_cast<const uint8_t*>(output->data.raw),
              output->bytes);
  }
  return 0;
}
