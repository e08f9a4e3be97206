/*
 * mlf_frame.c — frame encoding, CRC-32 and the resynchronising decoder (see mlf_frame.h).
 *
 * Offsets in the decoder are relative to the first byte held (buf + start). Dropped bytes
 * are only forgotten (start moves); memory moves once per read, in
 * mlf_frame_decoder_space(), so rescanning after a failed frame start needs no second buffer;
 * the marker scan only moves forward (each byte passes it once), and the CRC checks that
 * overlapping starts repeat are bounded by the check credit (mlf_frame.h).
 *
 * No lookahead past an incomplete frame: a complete frame found inside another frame's
 * payload must never be taken for a frame of its own, or tensor bytes could act as
 * requests. A stuck corrupt header is therefore settled by silence (mlf_frame_decoder_idle()
 * marks the bytes held as settled; a start not whole within them was cut short) and by the
 * per-type length limits, which reject most corrupt headers at once.
 */
#include "mlf_frame.h"

#include <string.h>

/* Half a byte at a time: 64 bytes of table instead of 1 KiB, for a loop that is never the
 * bottleneck (a UART delivers far fewer bytes than even this computes). */
static const uint32_t kCrcNibble[16] = {
    0x00000000u, 0x1DB71064u, 0x3B6E20C8u, 0x26D930ACu, 0x76DC4190u, 0x6B6B51F4u,
    0x4DB26158u, 0x5005713Cu, 0xEDB88320u, 0xF00F9344u, 0xD6D6A3E8u, 0xCB61B38Cu,
    0x9B64C2B0u, 0x86D3D2D4u, 0xA00AE278u, 0xBDBDF21Cu,
};

uint32_t mlf_crc32(uint32_t crc, const void* data, size_t n) {
  const uint8_t* p = (const uint8_t*)data;
  crc = ~crc;
  while (n--) {
    crc ^= *p++;
    crc = kCrcNibble[crc & 0xFu] ^ (crc >> 4);
    crc = kCrcNibble[crc & 0xFu] ^ (crc >> 4);
  }
  return ~crc;
}

static uint16_t get_u16(const uint8_t* p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static uint32_t get_u32(const uint8_t* p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

uint32_t mlf_frame_put_header(uint8_t header[MLF_FRAME_HEADER_BYTES], uint8_t type, uint8_t seq,
                              uint16_t length) {
  header[0] = MLF_FRAME_MARKER0;
  header[1] = MLF_FRAME_MARKER1;
  header[2] = type;
  header[3] = seq;
  header[4] = (uint8_t)(length & 0xFFu);
  header[5] = (uint8_t)(length >> 8);
  return mlf_crc32(0, header + 2, MLF_FRAME_HEADER_BYTES - 2);
}

void mlf_frame_put_crc(uint8_t out[MLF_FRAME_CRC_BYTES], uint32_t crc) {
  out[0] = (uint8_t)(crc & 0xFFu);
  out[1] = (uint8_t)((crc >> 8) & 0xFFu);
  out[2] = (uint8_t)((crc >> 16) & 0xFFu);
  out[3] = (uint8_t)(crc >> 24);
}

/* memmove's job (the buffers may overlap either way), so that the firmware links no libc
 * beyond memcpy/memset; frames are small, a byte loop is fast enough. */
static void move_bytes(uint8_t* dst, const uint8_t* src, size_t n) {
  if (dst < src) {
    for (size_t i = 0; i < n; ++i) dst[i] = src[i];
  } else if (dst > src) {
    while (n-- > 0) dst[n] = src[n];
  }
}

size_t mlf_frame_encode(uint8_t* out, size_t cap, uint8_t type, uint8_t seq, const uint8_t* payload,
                        size_t length) {
  if (length > MLF_FRAME_MAX_PAYLOAD || cap < MLF_FRAME_OVERHEAD + length) {
    return 0;
  }
  uint32_t crc = mlf_frame_put_header(out, type, seq, (uint16_t)length);
  if (length > 0) {
    move_bytes(out + MLF_FRAME_HEADER_BYTES, payload, length);
    crc = mlf_crc32(crc, payload, length);
  }
  mlf_frame_put_crc(out + MLF_FRAME_HEADER_BYTES + length, crc);
  return MLF_FRAME_OVERHEAD + length;
}

size_t mlf_frame_payload_limit(uint8_t type) {
  /* Requests 0x00-0x07, then replies 0x80-0x87: the message types of docs/protocol.md section
   * 2 (mlf_device.h names them); 0x00 and 0x80 are no message. A table: smaller than a switch. */
  static const uint16_t kLimits[16] = {
      MLF_FRAME_SMALL_PAYLOAD, /* 0x00 */
      MLF_FRAME_SMALL_PAYLOAD, /* HELLO: payload ignored */
      4,                       /* DESCRIBE: u16 model, u16 first */
      MLF_FRAME_MAX_PAYLOAD,   /* SET_INPUT: header + tensor data */
      2,                       /* RUN: u16 model */
      12,                      /* GET_OUTPUT: u16 model, u16 output, u32 offset, u32 max length */
      4,                       /* EXIT: i32 status */
      4,                       /* PROFILE: u32 first */
      MLF_FRAME_SMALL_PAYLOAD, /* 0x80 */
      1024,                    /* HELLO reply: 20 bytes + two names of up to 255; room to append */
      MLF_FRAME_MAX_PAYLOAD,   /* DESCRIBE reply: pages up to 64 KiB */
      0,                       /* SET_INPUT reply */
      MLF_FRAME_MAX_PAYLOAD,   /* RUN reply: 28 bytes, then the host's per-call workspace */
      MLF_FRAME_MAX_PAYLOAD,   /* GET_OUTPUT reply: tensor data */
      0,                       /* EXIT reply */
      MLF_FRAME_MAX_PAYLOAD,   /* PROFILE reply: call records */
  };
  if (type == 0xFFu) return 135; /* ERROR: 8 bytes + a message of at most 127 */
  /* types this version does not know */
  if ((type & 0x78u) != 0) return MLF_FRAME_SMALL_PAYLOAD;
  return kLimits[(type >> 4) | (type & 7u)];
}

/* ---- decoder ------------------------------------------------------------------------ */

static uint8_t* held(const mlf_frame_decoder* dec) { return dec->buf + dec->start; }

/* Forgets the first n held bytes (lazily: memory moves only in mlf_frame_decoder_space()). */
static void drop(mlf_frame_decoder* dec, size_t n) {
  dec->start += n;
  dec->fill -= n;
  dec->settled = dec->settled > n ? dec->settled - n : 0;
}

static void drop_consumed(mlf_frame_decoder* dec) {
  if (dec->consume > 0) {
    drop(dec, dec->consume);
    dec->consume = 0;
  }
}

/* A frame start failed: give up its marker byte only, so the bytes after it are scanned
 * again (a real frame may start inside the failed one). */
static void drop_marker(mlf_frame_decoder* dec) {
  dec->discarded += 1;
  drop(dec, 1);
}

/* Drops the bytes before the first marker (a lone A5 last is kept while it may still be
 * followed by 5A). */
static void skip_to_marker(mlf_frame_decoder* dec) {
  const uint8_t* p = held(dec);
  size_t head = 0;
  while (head < dec->fill && !(p[head] == MLF_FRAME_MARKER0 &&
                               (head + 1 == dec->fill || p[head + 1] == MLF_FRAME_MARKER1))) {
    ++head;
  }
  if (head > 0) {
    dec->discarded += head;
    drop(dec, head);
  }
}

static size_t length_at(const mlf_frame_decoder* dec, size_t pos) {
  return get_u16(held(dec) + pos + 4);
}

/* The CRC of the complete frame at pos matches. */
static int crc_ok_at(const mlf_frame_decoder* dec, size_t pos, size_t length) {
  const uint8_t* p = held(dec) + pos;
  uint32_t crc = mlf_crc32(0, p + 2, MLF_FRAME_HEADER_BYTES - 2 + length);
  return crc == get_u32(p + MLF_FRAME_HEADER_BYTES + length);
}

int mlf_frame_decoder_init(mlf_frame_decoder* dec, uint8_t* buf, size_t cap, size_t max_payload) {
  memset(dec, 0, sizeof(*dec));
  if (buf == NULL || max_payload > MLF_FRAME_MAX_PAYLOAD ||
      cap < MLF_FRAME_BUFFER_BYTES(max_payload)) {
    return -1;
  }
  dec->buf = buf;
  dec->cap = cap;
  dec->max_payload = max_payload;
  dec->credit_cap =
      (uint32_t)(MLF_FRAME_CHECK_CREDIT_BUFFERS * MLF_FRAME_BUFFER_BYTES(max_payload));
  dec->credit = dec->credit_cap;
  return 0;
}

uint8_t* mlf_frame_decoder_space(mlf_frame_decoder* dec, size_t* room) {
  drop_consumed(dec);
  if (dec->start > 0) {
    move_bytes(dec->buf, dec->buf + dec->start, dec->fill);
    dec->start = 0;
  }
  *room = dec->cap - dec->fill;
  return dec->buf + dec->fill;
}

void mlf_frame_decoder_commit(mlf_frame_decoder* dec, size_t n) {
  size_t room = dec->cap - dec->start - dec->fill;
  if (n > room) n = room;
  dec->fill += n;
  /* n is clamped first so that the product cannot overflow on a 32-bit target. */
  size_t earned = (n < dec->credit_cap ? n : dec->credit_cap) * MLF_FRAME_CHECK_CREDIT_PER_BYTE;
  if (earned >= dec->credit_cap - dec->credit) {
    dec->credit = dec->credit_cap;
  } else {
    dec->credit += (uint32_t)earned;
  }
}

size_t mlf_frame_decoder_push(mlf_frame_decoder* dec, const uint8_t* data, size_t n) {
  size_t room;
  uint8_t* space = mlf_frame_decoder_space(dec, &room);
  size_t taken = n < room ? n : room;
  memcpy(space, data, taken);
  mlf_frame_decoder_commit(dec, taken);
  return taken;
}

void mlf_frame_decoder_idle(mlf_frame_decoder* dec) {
  drop_consumed(dec);
  dec->settled = dec->fill;
}

mlf_frame_event_kind mlf_frame_decoder_next(mlf_frame_decoder* dec, mlf_frame_event* event) {
  drop_consumed(dec);
  for (;;) {
    memset(event, 0, sizeof(*event));
    skip_to_marker(dec);
    if (dec->fill == 0) return event->kind = MLF_FRAME_NONE;
    /* A start from before the last silence gets no more bytes: judge it by those it has. */
    const int final = dec->settled > 0;
    const size_t known = final ? dec->settled : dec->fill;
    if (known < MLF_FRAME_HEADER_BYTES) {
      if (!final) return event->kind = MLF_FRAME_NONE;
      drop_marker(dec); /* not even a header: garbage, nothing to report */
      continue;
    }
    const uint8_t* p = held(dec);
    size_t length = length_at(dec, 0);
    size_t limit = mlf_frame_payload_limit(p[2]);
    if (limit > dec->max_payload) limit = dec->max_payload;
    event->type = p[2];
    event->seq = p[3];
    event->length = (uint16_t)length;
    if (length > limit) {
      event->kind = MLF_FRAME_TOO_LONG;
    } else if (known < MLF_FRAME_OVERHEAD + length) {
      if (!final) return event->kind = MLF_FRAME_NONE; /* wait for the rest */
      event->kind = MLF_FRAME_TRUNCATED;
    } else if (length > MLF_FRAME_SMALL_PAYLOAD && dec->credit < length) {
      /* Out of check credit (a flood of long fake headers): drop unchecked, silently. */
      drop_marker(dec);
      continue;
    } else {
      if (length > MLF_FRAME_SMALL_PAYLOAD) dec->credit -= (uint32_t)length;
      if (crc_ok_at(dec, 0, length)) {
        event->payload = p + MLF_FRAME_HEADER_BYTES;
        dec->consume = MLF_FRAME_OVERHEAD + length;
        return event->kind = MLF_FRAME_OK;
      }
      event->kind = MLF_FRAME_BAD_CRC;
    }
    drop_marker(dec);
    return event->kind;
  }
}
