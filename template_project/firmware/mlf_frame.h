/*
 * mlf_frame.h — frames of the mlf-project-api device protocol (docs/protocol.md).
 *
 *   A5 5A | u8 type | u8 seq | u16 length (LE) | length bytes of payload | u32 CRC-32 (LE)
 *
 * The CRC is the IEEE 802.3 CRC-32 (what Python's zlib.crc32 computes) over type, seq,
 * length and payload — everything but the marker and the CRC itself.
 *
 * The decoder works in place over a caller-supplied buffer: the caller reads bytes straight
 * into mlf_frame_decoder_space(), commits them, and asks for the next event; a good frame's
 * payload is handed out as a pointer into that buffer (no copy), valid until the next call
 * on the decoder. It never needs more than max_payload + MLF_FRAME_OVERHEAD bytes.
 *
 * Resynchronisation (docs/protocol.md 1.1): a frame start is a marker with a header whose
 * length fits both max_payload and its type (mlf_frame_payload_limit()). Frame starts are
 * judged strictly in order, and no later start is looked at while an earlier one may still
 * complete, so a frame inside a good frame's payload is never taken for a frame. A start
 * that fails (bad CRC, implausible length, or cut short: the line went silent before it was
 * whole, see mlf_frame_decoder_idle()) gives up only its marker byte: the bytes after it
 * are scanned again, so a real frame hidden behind garbage or a truncated frame is found.
 * Bytes of a good frame are consumed and never scanned again.
 */
#ifndef MLF_FRAME_H_
#define MLF_FRAME_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MLF_FRAME_MARKER0 0xA5u
#define MLF_FRAME_MARKER1 0x5Au
#define MLF_FRAME_HEADER_BYTES 6u /* marker, type, seq, length */
#define MLF_FRAME_CRC_BYTES 4u
#define MLF_FRAME_OVERHEAD (MLF_FRAME_HEADER_BYTES + MLF_FRAME_CRC_BYTES)
#define MLF_FRAME_MAX_PAYLOAD 0xFFFFu /* the length field is 16 bits */

/* Frames of types without a larger limit carry at most this many payload bytes, and frame
 * starts claiming up to this many bytes are always checked (see the check credit below). */
#define MLF_FRAME_SMALL_PAYLOAD 64u

/* CRC checking of longer frame starts is paid from a credit that grows by this many bytes
 * per byte received, up to this many buffers' worth: a flood of fake headers claiming long
 * payloads costs O(1) work per byte instead of O(max_payload) (docs/protocol.md 1.1). */
#define MLF_FRAME_CHECK_CREDIT_PER_BYTE 8u
#define MLF_FRAME_CHECK_CREDIT_BUFFERS 4u

/* Buffer bytes a decoder needs to accept payloads of up to max_payload bytes. */
#define MLF_FRAME_BUFFER_BYTES(max_payload) ((size_t)(max_payload) + MLF_FRAME_OVERHEAD)

/* CRC-32 (IEEE, reflected, as zlib.crc32): start with crc = 0, chain like zlib.crc32(data,
 * crc) to cover data given in pieces. */
uint32_t mlf_crc32(uint32_t crc, const void* data, size_t n);

/* Writes the 6 header bytes; returns the CRC of the header's covered part (type, seq,
 * length), to be continued over the payload with mlf_crc32(). */
uint32_t mlf_frame_put_header(uint8_t header[MLF_FRAME_HEADER_BYTES], uint8_t type, uint8_t seq,
                              uint16_t length);

/* Writes the 4 CRC bytes (little-endian). */
void mlf_frame_put_crc(uint8_t out[MLF_FRAME_CRC_BYTES], uint32_t crc);

/* Encodes a whole frame into out; returns its size, or 0 when cap is too small or the
 * payload longer than MLF_FRAME_MAX_PAYLOAD. */
size_t mlf_frame_encode(uint8_t* out, size_t cap, uint8_t type, uint8_t seq, const uint8_t* payload,
                        size_t length);

/* The longest payload a frame of this type may carry on the wire (docs/protocol.md 1.1):
 * fixed-size messages their size, HELLO requests and unknown types MLF_FRAME_SMALL_PAYLOAD,
 * SET_INPUT and the DESCRIBE/GET_OUTPUT replies MLF_FRAME_MAX_PAYLOAD. */
size_t mlf_frame_payload_limit(uint8_t type);

typedef enum {
  MLF_FRAME_NONE = 0,     /* need more bytes */
  MLF_FRAME_OK = 1,       /* a good frame: type, seq, length, payload */
  MLF_FRAME_BAD_CRC = 2,  /* a complete frame whose CRC does not match (type/seq as read) */
  MLF_FRAME_TOO_LONG = 3, /* a header whose length exceeds max_payload or its type's limit */
  MLF_FRAME_TRUNCATED = 4 /* a plausible header whose frame was not whole when the line went
                             silent (mlf_frame_decoder_idle()); type/seq/length as read */
} mlf_frame_event_kind;

typedef struct {
  mlf_frame_event_kind kind;
  uint8_t type;
  uint8_t seq;
  uint16_t length;
  const uint8_t* payload; /* MLF_FRAME_OK only; points into the decoder's buffer */
} mlf_frame_event;

/* Fields are private; the struct is public so it can live inside the caller's context. */
typedef struct {
  uint8_t* buf;
  size_t cap;
  size_t max_payload;
  size_t start;    /* offset in buf of the first byte held */
  size_t fill;     /* bytes held */
  size_t consume;  /* bytes of the frame last handed out, dropped on the next call */
  size_t settled;  /* leading held bytes that arrived before the last silence */
  uint32_t credit; /* bytes of CRC checking long frame starts may still cost */
  uint32_t credit_cap;
  uint64_t discarded; /* bytes dropped as garbage (statistics) */
} mlf_frame_decoder;

/* Returns 0, or -1 when buf cannot hold a frame of max_payload bytes
 * (cap < MLF_FRAME_BUFFER_BYTES(max_payload)) or max_payload > MLF_FRAME_MAX_PAYLOAD. */
int mlf_frame_decoder_init(mlf_frame_decoder* dec, uint8_t* buf, size_t cap, size_t max_payload);

/* Where to put newly received bytes, and how many fit (always >= 1 after
 * mlf_frame_decoder_next() returned MLF_FRAME_NONE). Invalidates the last event's payload. */
uint8_t* mlf_frame_decoder_space(mlf_frame_decoder* dec, size_t* room);

/* Declares n bytes written at the space pointer. */
void mlf_frame_decoder_commit(mlf_frame_decoder* dec, size_t n);

/* Copies up to n bytes in (for callers that have the bytes elsewhere); returns how many
 * were taken: call mlf_frame_decoder_next() until MLF_FRAME_NONE before pushing more. */
size_t mlf_frame_decoder_push(mlf_frame_decoder* dec, const uint8_t* data, size_t n);

/* The line was silent for longer than any sender pauses inside a frame: every frame start
 * among the bytes held now must be whole within them, or it was cut short (reported as
 * MLF_FRAME_TRUNCATED by mlf_frame_decoder_next(), which then rescans from the byte after its
 * marker). No byte is dropped here. May be called between mlf_frame_decoder_space() and
 * mlf_frame_decoder_commit(): the bytes being committed arrived after the silence. */
void mlf_frame_decoder_idle(mlf_frame_decoder* dec);

/* The next event from the bytes held; MLF_FRAME_NONE when more bytes are needed. */
mlf_frame_event_kind mlf_frame_decoder_next(mlf_frame_decoder* dec, mlf_frame_event* event);

#ifdef __cplusplus
}
#endif

#endif /* MLF_FRAME_H_ */
