/*
 * mlf_device.h — the `host_driven` firmware: answers the device protocol (docs/protocol.md)
 * on the console link so a host can describe the models, stream inputs in, run, and stream
 * outputs out.
 *
 * What a generated main.c does:
 *
 *   static uint8_t rx_buffer[MLF_FRAME_BUFFER_BYTES(MAX_PAYLOAD)];
 *   mlf_platform_init();
 *   ... mlf_executor_init() every model, keep each status ...
 *   const mlf_device_model models[] = {{"default", &executor, &workspace, init_status, 0}};
 *   const mlf_device_config config = {models, 1, "host", "host_driven",
 *                                     rx_buffer, sizeof(rx_buffer), MAX_PAYLOAD, 200};
 *   mlf_platform_exit(mlf_device_serve(&config));
 *
 * A model whose init failed is still listed: every request about it is answered with an
 * ERROR carrying init_status and the executor's failure in numbers (docs/protocol.md 2.3),
 * so the host learns why.
 *
 * The loop uses only mlf_platform_read/write/ticks/tick_hz/log from the platform (and
 * mlf_platform_stack_used, which a platform may leave out), keeps all its state in an
 * mlf_device (on the stack of mlf_device_serve()), and never allocates.
 */
#ifndef MLF_DEVICE_H_
#define MLF_DEVICE_H_

#include <stddef.h>
#include <stdint.h>

#include "mlf_frame.h"
#include "mlf_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MLF_PROTOCOL_MAGIC "MLFP"
#define MLF_PROTOCOL_VERSION 1u

/* Message types. A reply has the request's type with the high bit set (or is an ERROR)
 * and the request's seq. Frames with the high bit set are never answered by the device. */
#define MLF_MSG_HELLO 0x01u
#define MLF_MSG_DESCRIBE 0x02u
#define MLF_MSG_SET_INPUT 0x03u
#define MLF_MSG_RUN 0x04u
#define MLF_MSG_GET_OUTPUT 0x05u
#define MLF_MSG_EXIT 0x06u
#define MLF_MSG_PROFILE 0x07u /* answered by firmware built with the profile option only */
#define MLF_MSG_REPLY 0x80u
#define MLF_MSG_ERROR 0xFFu

/* ERROR codes: 1..0xFF are mlf_status values (runtime failures); protocol errors: */
#define MLF_DEVICE_ERR_BAD_CRC 0x100u      /* a request's CRC did not match, or it was cut short */
#define MLF_DEVICE_ERR_TOO_LONG 0x101u     /* payload over its type's limit or max_payload */
#define MLF_DEVICE_ERR_UNKNOWN_TYPE 0x102u /* no such request type */
#define MLF_DEVICE_ERR_BAD_PAYLOAD 0x103u  /* payload size wrong for the request type */
#define MLF_DEVICE_ERR_BAD_MODEL 0x104u    /* no model with that index */
#define MLF_DEVICE_ERR_BAD_INDEX 0x105u    /* no input/output with that index */
#define MLF_DEVICE_ERR_OUT_OF_RANGE 0x106u /* byte range or describe index beyond the end */
#define MLF_DEVICE_ERR_UNSUPPORTED 0x107u  /* cannot be described on the wire (e.g. ndim>255) */
#define MLF_DEVICE_ERR_ARENA_TAKEN 0x108u  /* another model used the arena they share since */

/* PROFILE reply: u32 count, u32 dropped, u64 anchor, u32 first, u32 n, then n records of
 * u64 function, u64 enter ticks, u64 exit ticks, u32 workspace bytes, u32 depth. */
#define MLF_PROFILE_REPLY_HEADER 24u
#define MLF_PROFILE_RECORD_BYTES 32u

/* No operator node involved (the ERROR payload's node field). */
#define MLF_DEVICE_NO_NODE 0xFFFFFFFFu

/* mlf_device_serve() result when the configuration is unusable (also logged). */
#define MLF_DEVICE_EXIT_BAD_CONFIG 125

typedef struct {
  const char* name;         /* not NULL, NUL-terminated; raw JSON string contents */
  mlf_executor* executor;   /* initialised (or not: see init_status) */
  mlf_workspace* workspace; /* bound around every RUN; NULL when the model needs none */
  mlf_status init_status;   /* what mlf_executor_init() returned */
  /* 1: its arena is one other models share too (firmware built with MLF_SHARED_ARENA=1):
   * its inputs and outputs hold until another sharing model sets an input or runs, and a
   * RUN or GET_OUTPUT after that is refused (ARENA_TAKEN) rather than served from bytes
   * the other model overwrote. */
  uint8_t shares_arena;
} mlf_device_model;

typedef struct {
  const mlf_device_model* models;
  uint32_t num_models;      /* 1..65535 */
  const char* board;        /* NUL-terminated, at most 255 bytes, e.g. "host" */
  const char* project_type; /* NUL-terminated, at most 255 bytes, e.g. "host_driven" */
  uint8_t* rx_buffer;       /* at least MLF_FRAME_BUFFER_BYTES(max_payload) bytes */
  size_t rx_buffer_size;
  uint32_t max_payload;   /* largest request payload accepted, >= 16 (above 65535: 65535) */
  uint32_t idle_reset_ms; /* silence after which a half-received request counts as cut short
                             (a sender never pauses inside a frame); 0 = never. Must stay
                             below the host's 0.5 s; 200 suits UARTs, USB serial and ptys. */
} mlf_device_config;

#define MLF_DEVICE_TX_STAGING 64u
#define MLF_DEVICE_MESSAGE_BYTES 128u

/* The loop's state. Fields are private. */
typedef struct {
  const mlf_device_config* config;
  mlf_frame_decoder rx;
  uint32_t max_payload;
  uint64_t idle_ticks;
  uint8_t tx[MLF_DEVICE_TX_STAGING];
  size_t tx_fill;
  uint32_t tx_crc;
  int exit_requested;
  int32_t exit_status;
  uint32_t arena_owner; /* 1 + the sharing model whose tensors the arena holds; 0: none yet */
  char message[MLF_DEVICE_MESSAGE_BYTES];
} mlf_device;

/* Checks the configuration against the rules of mlf_device_config's fields; 0 when usable,
 * else -1 ("bad configuration" via mlf_platform_log). */
int mlf_device_init(mlf_device* dev, const mlf_device_config* config);

/* Sends the unsolicited HELLO reply (seq 0) that tells a listening host we booted. */
void mlf_device_announce(mlf_device* dev);

/* Answers every complete request held. Returns 1 once an EXIT was answered (the rest of
 * the input is then left alone), else 0. */
int mlf_device_process(mlf_device* dev);

/* One blocking mlf_platform_read() into the receive buffer, then mlf_device_process().
 * When the read waited longer than idle_reset_ms, the bytes held from before the silence are
 * settled first (mlf_frame_decoder_idle()): a request start among them that is not whole was
 * cut short (answered with BAD_CRC) and the bytes after its marker are scanned again, so a
 * request hidden behind it is answered. Returns 1 after EXIT, -1 when the link is gone,
 * else 0. */
int mlf_device_receive(mlf_device* dev);

/* The line was silent: settle the bytes held as above and answer what that releases.
 * Returns 1 once an EXIT was answered, else 0. mlf_device_receive() does this by itself when
 * bytes arrive after idle_reset_ms of silence (the host sends a byte after its own silence
 * for that reason); platforms with an idle-line interrupt may call it sooner. */
int mlf_device_idle(mlf_device* dev);

/* For tests and fuzzers: takes bytes from memory instead of the platform. Returns 1 once
 * an EXIT was answered, else 0. */
int mlf_device_feed(mlf_device* dev, const uint8_t* data, size_t n);

/* The status of the EXIT request that ended the session (valid after it returned 1). */
int32_t mlf_device_exit_status(const mlf_device* dev);

/* init + announce + receive until EXIT or link loss. Returns the EXIT status, 0 when the
 * link went away, MLF_DEVICE_EXIT_BAD_CONFIG for an unusable configuration. */
int mlf_device_serve(const mlf_device_config* config);

#ifdef __cplusplus
}
#endif

#endif /* MLF_DEVICE_H_ */
