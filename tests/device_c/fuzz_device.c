/*
 * fuzz_device.c — libFuzzer target for the frame decoder and the command dispatcher.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I<firmware> -I<crt/include> \
 *     fuzz_device.c fake_runtime.c <firmware>/mlf_device.c <firmware>/mlf_frame.c \
 *     <firmware>/mlf_text.c
 *
 * Input: byte 0 picks the device's max payload (bits 0-1), whether the rest is raw bytes
 * or records (bit 2) that become mostly well-formed requests (so the dispatcher, not only
 * the CRC check, gets explored), whether the line goes idle between some pieces (bit 3),
 * whether four known requests follow the stream at once (bit 4, see below), and whether
 * recovery is tested by a silence or by zeros (bit 5); byte 1 the size of the pieces the
 * stream is fed in.
 * Checked besides memory safety:
 *   - everything the device writes decodes as well-formed reply frames;
 *   - every request frame start the decoder reports (good, bad CRC, too long, cut short)
 *     gets exactly one reply, until an EXIT is answered;
 *   - bit 4: the stream is followed without a pause by HELLO, RUN, GET_OUTPUT, DESCRIBE and
 *     SET_INPUT requests (the last one's data is a whole HELLO frame), then a silence and a
 *     wake-up byte; the last replies must answer exactly those, in order: every complete
 *     valid request behind garbage is found, once, and nothing inside a good frame's payload
 *     is taken for a request (unless the garbage held a valid frame reaching into them, or
 *     an EXIT);
 *   - after any input, a silence (or MLF_FRAME_BUFFER_BYTES(max) zero bytes) and a HELLO
 *     always get the HELLO answered (the decoder cannot be wedged).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_runtime.h"
#include "mlf_device.h"
#include "mlf_platform.h"

#define RECENT_REPLIES 8u

typedef struct {
  uint8_t type;
  uint8_t seq;
  uint8_t request; /* ERROR replies: the request type answered */
} reply_seen;

typedef struct {
  mlf_frame_decoder decoder;
  uint8_t buffer[MLF_FRAME_BUFFER_BYTES(MLF_FRAME_MAX_PAYLOAD)];
  size_t replies;
  reply_seen recent[RECENT_REPLIES]; /* ring: reply i is at i % RECENT_REPLIES */
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
      reply_seen* seen = &checker.recent[checker.replies % RECENT_REPLIES];
      seen->type = ev.type;
      seen->seq = ev.seq;
      seen->request = ev.type == MLF_MSG_ERROR && ev.length >= 3 ? ev.payload[2] : 0;
      checker.replies++;
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

/* The n-th reply before the last one (0 = the last); only for n < replies. */
static const reply_seen* recent_reply(size_t n) {
  return &checker.recent[(checker.replies - 1 - n) % RECENT_REPLIES];
}

/* The requests appended in bit-4 mode, and the reply type each must get. */
typedef struct {
  uint8_t type;
  uint8_t seq;
  uint8_t length;
  uint8_t payload[18];
} known_request;

/* The last one's data is a whole HELLO frame (seq 0xE6): it must not be answered. It is
 * left out when max_payload cannot carry it. */
static const known_request kKnownRequests[] = {
    {MLF_MSG_HELLO, 0xE1, 0, {0}},
    {MLF_MSG_RUN, 0xE2, 2, {0, 0}},
    {MLF_MSG_GET_OUTPUT, 0xE3, 12, {0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0}},
    {MLF_MSG_DESCRIBE, 0xE4, 4, {0, 0, 0, 0}},
    {MLF_MSG_SET_INPUT,
     0xE5,
     18,
     {1, 0, 0, 0, 0, 0, 0, 0, 0xA5, 0x5A, 0x01, 0xE6, 0x00, 0x00, 0x6B, 0x14, 0x97, 0x34}},
};
#define MAX_KNOWN (sizeof(kKnownRequests) / sizeof(kKnownRequests[0]))

/* A frame with a good CRC and a plausible length starts in s[0, garbage) and ends after it:
 * the known requests are then legitimately payload. */
static int valid_frame_reaches_past(const uint8_t* s, size_t garbage, size_t size,
                                    size_t max_payload) {
  for (size_t pos = 0; pos < garbage && pos + MLF_FRAME_HEADER_BYTES <= size; ++pos) {
    if (s[pos] != MLF_FRAME_MARKER0 || s[pos + 1] != MLF_FRAME_MARKER1) continue;
    size_t length = (size_t)s[pos + 4] | ((size_t)s[pos + 5] << 8);
    size_t limit = mlf_frame_payload_limit(s[pos + 2]);
    if (length > limit || length > max_payload) continue;
    size_t end = pos + MLF_FRAME_OVERHEAD + length;
    if (end <= garbage || end > size) continue;
    const uint8_t* c = s + end - MLF_FRAME_CRC_BYTES;
    uint32_t want =
        (uint32_t)c[0] | ((uint32_t)c[1] << 8) | ((uint32_t)c[2] << 16) | ((uint32_t)c[3] << 24);
    if (mlf_crc32(0, s + pos + 2, MLF_FRAME_HEADER_BYTES - 2 + length) == want) return 1;
  }
  return 0;
}

typedef struct {
  mlf_frame_decoder* decoder;
  size_t expected; /* request frame starts reported */
  int exited;      /* a good EXIT was reported */
} reference;

static void reference_events(reference* ref) {
  mlf_frame_event ev;
  while (!ref->exited && mlf_frame_decoder_next(ref->decoder, &ev) != MLF_FRAME_NONE) {
    if (ev.type & MLF_MSG_REPLY) continue;
    ref->expected++;
    if (ev.kind == MLF_FRAME_OK && ev.type == MLF_MSG_EXIT && ev.length == 4) ref->exited = 1;
  }
}

static void reference_feed(reference* ref, const uint8_t* p, size_t n) {
  while (n > 0 && !ref->exited) {
    size_t taken = mlf_frame_decoder_push(ref->decoder, p, n);
    p += taken;
    n -= taken;
    reference_events(ref);
  }
}

static void reference_idle(reference* ref) {
  size_t room;
  mlf_frame_decoder_space(ref->decoder, &room);
  mlf_frame_decoder_idle(ref->decoder);
  reference_events(ref);
}

int LLVMFuzzerTestOneInput(const uint8_t* input, size_t input_size) {
  if (input_size < 2) return 0;
  const uint32_t max_payload = kMaxPayloads[input[0] & 3u];
  const size_t piece = 1 + input[1];
  static uint8_t stream[(1u << 16) + 256];
  const uint8_t* data = input + 2;
  size_t size = input_size - 2;
  if (input[0] & 4u) {
    size = build_stream(data, size, stream, 1u << 16);
    data = stream;
  }
  const int known_mode = (input[0] & 16u) != 0;
  const size_t garbage = size;
  const size_t num_known = max_payload >= 18 ? MAX_KNOWN : MAX_KNOWN - 1;
  if (known_mode) {
    if (data != stream) {
      if (size > (1u << 16)) return 0;
      memcpy(stream, data, size);
      data = stream;
    }
    for (size_t i = 0; i < num_known; ++i) {
      const known_request* k = &kKnownRequests[i];
      size += mlf_frame_encode(stream + size, sizeof(stream) - size, k->type, k->seq, k->payload,
                               k->length);
    }
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
  broken.ex.error.why = 8;
  broken.ex.error.subject =
      "a name longer than the device's message buffer can hold: it is cut "
      "where the buffer ends, and the message stays NUL-terminated";
  broken.ex.error.subject_len = 126;
  memset(&workspace, 0, sizeof(workspace));
  const mlf_device_model models[] = {
      {"adder", &adder.ex, NULL, MLF_OK, 0},
      {"echo", &echo.ex, &workspace, MLF_OK, 0},
      {"broken", &broken.ex, NULL, MLF_ERR_MISSING_FUNCTION, 0},
  };
  const mlf_device_config config = {
      models, 3, "fuzz", "host_driven", rx, MLF_FRAME_BUFFER_BYTES(max_payload), max_payload, 0};

  memset(&checker, 0, sizeof(checker));
  mlf_frame_decoder_init(&checker.decoder, checker.buffer, sizeof(checker.buffer),
                         MLF_FRAME_MAX_PAYLOAD);

  /* The requests the device must answer, found by a decoder fed exactly like the device's. */
  static uint8_t ref_buffer[MLF_FRAME_BUFFER_BYTES(4096)];
  mlf_frame_decoder ref_decoder;
  mlf_frame_decoder_init(&ref_decoder, ref_buffer, MLF_FRAME_BUFFER_BYTES(max_payload),
                         max_payload);
  reference ref = {&ref_decoder, 0, 0};

  mlf_device dev;
  if (mlf_device_init(&dev, &config) != 0) fail("init failed");
  int exited = 0;
  const int idle_gaps = (input[0] & 8u) != 0;
  size_t piece_index = 0;
  for (size_t pos = 0; pos < size && !exited; ++piece_index) {
    /* Silences only inside the garbage: the known requests are sent without a pause. */
    size_t end = pos < garbage ? garbage : size;
    size_t n = end - pos < piece ? end - pos : piece;
    if (idle_gaps && pos < garbage && piece_index % 3 == 2) {
      exited = mlf_device_idle(&dev);
      reference_idle(&ref);
      if (exited) break;
    }
    exited = mlf_device_feed(&dev, data + pos, n);
    reference_feed(&ref, data + pos, n);
    pos += n;
  }
  if (known_mode && !exited) {
    /* The host's silence, then its wake-up byte: what hid behind a cut-short start is out. */
    exited = mlf_device_idle(&dev);
    reference_idle(&ref);
    static const uint8_t wake_up = 0;
    if (!exited) {
      exited = mlf_device_feed(&dev, &wake_up, 1);
      reference_feed(&ref, &wake_up, 1);
    }
  }
  const size_t expected = ref.expected;
  const int ref_exit = ref.exited;
  if (checker.replies != expected) fail("not exactly one reply per request");
  if (exited != ref_exit) fail("EXIT disagreement");
  if (exited) return 0;

  if (known_mode && !valid_frame_reaches_past(data, garbage, size, max_payload)) {
    if (checker.replies < num_known) fail("known requests behind garbage lost");
    for (size_t i = 0; i < num_known; ++i) {
      const known_request* k = &kKnownRequests[i];
      const reply_seen* r = recent_reply(num_known - 1 - i);
      if (r->seq != k->seq || r->type != (k->type | MLF_MSG_REPLY)) {
        fail("known requests behind garbage not answered exactly once, in order");
      }
    }
  }

  /* Recovery: a silence settles any half-received frame (releasing frames that were hidden
   * behind it, which may be an EXIT); so does a flush of zeros. Then HELLO must be answered. */
  if (input[0] & 32u) {
    if (mlf_device_idle(&dev)) return 0;
  } else {
    static const uint8_t zeros[MLF_FRAME_BUFFER_BYTES(4096)];
    if (mlf_device_feed(&dev, zeros, MLF_FRAME_BUFFER_BYTES(max_payload))) return 0;
  }
  uint8_t hello[MLF_FRAME_OVERHEAD];
  size_t hello_len = mlf_frame_encode(hello, sizeof(hello), MLF_MSG_HELLO, 0x42, NULL, 0);
  size_t before = checker.replies;
  mlf_device_feed(&dev, hello, hello_len);
  if (checker.replies == before || recent_reply(0)->type != (MLF_MSG_HELLO | MLF_MSG_REPLY) ||
      recent_reply(0)->seq != 0x42) {
    fail("device did not recover to answer HELLO");
  }
  return 0;
}
