/*
 * fuzz_device.c — libFuzzer target for the frame decoder and the command dispatcher.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I<firmware> -I<crt/include> \
 *     fuzz_device.c fake_runtime.c <firmware>/mlf_device.c <firmware>/mlf_frame.c
 *
 * Input: byte 0 picks the device's max payload (bits 0-1), whether the rest is raw bytes
 * or records (bit 2) that become mostly well-formed requests (so the dispatcher, not only
 * the CRC check, gets explored), and whether the line goes idle between some pieces (bit 3);
 * byte 1 the size of the pieces the stream is fed in.
 * Checked besides memory safety:
 *   - everything the device writes decodes as well-formed reply frames;
 *   - every request frame start the decoder reports (good, bad CRC, too long) gets exactly
 *     one reply, until an EXIT is answered;
 *   - after any input, MLF_FRAME_BUFFER_BYTES(max) zero bytes and a HELLO always get the
 *     HELLO answered (the decoder cannot be wedged).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_runtime.h"
#include "mlf_device.h"
#include "mlf_platform.h"

typedef struct {
  mlf_frame_decoder decoder;
  uint8_t buffer[MLF_FRAME_BUFFER_BYTES(MLF_FRAME_MAX_PAYLOAD)];
  size_t replies;
  uint8_t last_type;
  uint8_t last_seq;
} reply_checker;

/* The platform seam has no context argument: the fuzzer's output checker is a static. */
static reply_checker checker;
static uint64_t fake_ticks;

MLF_NORETURN static void fail(const char* what) {
  fprintf(stderr, "fuzz_device: %s\n", what);
  abort();
}

void mlf_platform_init(void) {}
size_t mlf_platform_read(uint8_t* buf, size_t max) {
  (void)buf;
  (void)max;
  return 0;
}

void mlf_platform_write(const uint8_t* buf, size_t n) {
  while (n > 0) {
    size_t taken = mlf_frame_decoder_push(&checker.decoder, buf, n);
    buf += taken;
    n -= taken;
    mlf_frame_event ev;
    for (;;) {
      mlf_frame_event_kind kind = mlf_frame_decoder_next(&checker.decoder, &ev);
      if (kind == MLF_FRAME_NONE) break;
      if (kind != MLF_FRAME_OK) fail("device wrote a malformed frame");
      if (!(ev.type & MLF_MSG_REPLY)) fail("device wrote a request");
      checker.replies++;
      checker.last_type = ev.type;
      checker.last_seq = ev.seq;
    }
  }
}

uint64_t mlf_platform_ticks(void) { return fake_ticks += 7; }
uint64_t mlf_platform_tick_hz(void) { return 1000; }
void mlf_platform_log(const char* msg) { (void)msg; }
void mlf_platform_exit(int status) {
  (void)status;
  fail("exit called");
}
void mlf_platform_abort(int code) {
  (void)code;
  fail("abort called");
}

static const uint32_t kMaxPayloads[4] = {16, 64, 300, 4096};

/*
 * Records: u8 kind, then
 *   kind bit 0 set: u8 n, n raw bytes;
 *   else: u8 type (low 3 bits, plus the reply bit from kind bit 3), u8 seq, u8 n, n payload
 *         bytes, encoded as a frame; kind bit 1 flips a CRC bit, kind bit 2 makes the
 *         first payload u16 (model index) small.
 */
static size_t build_stream(const uint8_t* in, size_t size, uint8_t* out, size_t cap) {
  size_t pos = 0, used = 0;
  while (pos < size) {
    uint8_t kind = in[pos++];
    if (kind & 1u) {
      if (pos >= size) break;
      size_t n = in[pos++];
      if (n > size - pos) n = size - pos;
      if (used + n > cap) break;
      memcpy(out + used, in + pos, n);
      used += n;
      pos += n;
      continue;
    }
    if (size - pos < 3) break;
    uint8_t type = (uint8_t)((in[pos] & 7u) | ((kind & 8u) ? MLF_MSG_REPLY : 0));
    uint8_t seq = in[pos + 1];
    size_t n = in[pos + 2];
    pos += 3;
    if (n > size - pos) n = size - pos;
    uint8_t payload[255];
    memcpy(payload, in + pos, n);
    pos += n;
    if ((kind & 4u) && n >= 2) {
      payload[0] %= 4u;
      payload[1] = 0;
    }
    size_t frame = mlf_frame_encode(out + used, cap - used, type, seq, payload, n);
    if (frame == 0) break;
    if (kind & 2u) out[used + frame - 1] ^= 0x10u;
    used += frame;
  }
  return used;
}

int LLVMFuzzerTestOneInput(const uint8_t* input, size_t input_size) {
  if (input_size < 2) return 0;
  const uint32_t max_payload = kMaxPayloads[input[0] & 3u];
  const size_t piece = 1 + input[1];
  static uint8_t stream[1u << 16];
  const uint8_t* data = input + 2;
  size_t size = input_size - 2;
  if (input[0] & 4u) {
    size = build_stream(data, size, stream, sizeof(stream));
    data = stream;
  }

  static uint8_t echo_in[100], echo_out[100];
  static fake_model adder, echo, broken;
  static uint8_t rx[MLF_FRAME_BUFFER_BYTES(4096)];
  static mlf_workspace workspace;
  fake_model_adder(&adder);
  fake_model_echo(&echo, echo_in, echo_out, sizeof(echo_in));
  echo.traps = 0;
  fake_model_adder(&broken);
  broken.ex.error.status = MLF_ERR_MISSING_FUNCTION;
  broken.ex.error.what = "missing";
  memset(&workspace, 0, sizeof(workspace));
  const mlf_device_model models[] = {
      {"adder", &adder.ex, NULL, MLF_OK},
      {"echo", &echo.ex, &workspace, MLF_OK},
      {"broken", &broken.ex, NULL, MLF_ERR_MISSING_FUNCTION},
  };
  const mlf_device_config config = {
      models, 3, "fuzz", "host_driven", rx, MLF_FRAME_BUFFER_BYTES(max_payload), max_payload, 0};

  memset(&checker, 0, sizeof(checker));
  mlf_frame_decoder_init(&checker.decoder, checker.buffer, sizeof(checker.buffer),
                         MLF_FRAME_MAX_PAYLOAD);

  /* The requests the device must answer, found by a decoder fed exactly like the device's. */
  static uint8_t ref_buffer[MLF_FRAME_BUFFER_BYTES(4096)];
  mlf_frame_decoder ref;
  mlf_frame_decoder_init(&ref, ref_buffer, MLF_FRAME_BUFFER_BYTES(max_payload), max_payload);
  size_t expected = 0;
  int ref_exit = 0;

  mlf_device dev;
  if (mlf_device_init(&dev, &config) != 0) fail("init failed");
  int exited = 0;
  const int idle_gaps = (input[0] & 8u) != 0;
  for (size_t pos = 0; pos < size && !exited; pos += piece) {
    size_t n = size - pos < piece ? size - pos : piece;
    if (idle_gaps && (pos / piece) % 3 == 2) {
      mlf_device_idle(&dev);
      size_t room;
      mlf_frame_decoder_space(&ref, &room);
      mlf_frame_decoder_abandon(&ref);
    }
    exited = mlf_device_feed(&dev, data + pos, n);
    const uint8_t* p = data + pos;
    size_t left = n;
    while (left > 0 && !ref_exit) {
      size_t taken = mlf_frame_decoder_push(&ref, p, left);
      p += taken;
      left -= taken;
      mlf_frame_event ev;
      while (!ref_exit && mlf_frame_decoder_next(&ref, &ev) != MLF_FRAME_NONE) {
        if (ev.type & MLF_MSG_REPLY) continue;
        expected++;
        if (ev.kind == MLF_FRAME_OK && ev.type == MLF_MSG_EXIT && ev.length == 4) ref_exit = 1;
      }
    }
  }
  if (checker.replies != expected) fail("not exactly one reply per request");
  if (exited != ref_exit) fail("EXIT disagreement");
  if (exited) return 0;

  /* Recovery: zeros flush any half-received frame (releasing frames that were hidden behind
   * it, which may be an EXIT), then HELLO must be answered. */
  static const uint8_t zeros[MLF_FRAME_BUFFER_BYTES(4096)];
  if (mlf_device_feed(&dev, zeros, MLF_FRAME_BUFFER_BYTES(max_payload))) return 0;
  uint8_t hello[MLF_FRAME_OVERHEAD];
  size_t hello_len = mlf_frame_encode(hello, sizeof(hello), MLF_MSG_HELLO, 0x42, NULL, 0);
  size_t before = checker.replies;
  mlf_device_feed(&dev, hello, hello_len);
  if (checker.replies == before || checker.last_type != (MLF_MSG_HELLO | MLF_MSG_REPLY) ||
      checker.last_seq != 0x42) {
    fail("device did not recover to answer HELLO");
  }
  return 0;
}
