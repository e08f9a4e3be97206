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

static const uint32_t kCrcTable[256] = {
    0x00000000u, 0x77073096u, 0xEE0E612Cu, 0x990951BAu, 0x076DC419u, 0x706AF48Fu, 0xE963A535u,
    0x9E6495A3u, 0x0EDB8832u, 0x79DCB8A4u, 0xE0D5E91Eu, 0x97D2D988u, 0x09B64C2Bu, 0x7EB17CBDu,
    0xE7B82D07u, 0x90BF1D91u, 0x1DB71064u, 0x6AB020F2u, 0xF3B97148u, 0x84BE41DEu, 0x1ADAD47Du,
    0x6DDDE4EBu, 0xF4D4B551u, 0x83D385C7u, 0x136C9856u, 0x646BA8C0u, 0xFD62F97Au, 0x8A65C9ECu,
    0x14015C4Fu, 0x63066CD9u, 0xFA0F3D63u, 0x8D080DF5u, 0x3B6E20C8u, 0x4C69105Eu, 0xD56041E4u,
    0xA2677172u, 0x3C03E4D1u, 0x4B04D447u, 0xD20D85FDu, 0xA50AB56Bu, 0x35B5A8FAu, 0x42B2986Cu,
    0xDBBBC9D6u, 0xACBCF940u, 0x32D86CE3u, 0x45DF5C75u, 0xDCD60DCFu, 0xABD13D59u, 0x26D930ACu,
    0x51DE003Au, 0xC8D75180u, 0xBFD06116u, 0x21B4F4B5u, 0x56B3C423u, 0xCFBA9599u, 0xB8BDA50Fu,
    0x2802B89Eu, 0x5F058808u, 0xC60CD9B2u, 0xB10BE924u, 0x2F6F7C87u, 0x58684C11u, 0xC1611DABu,
    0xB6662D3Du, 0x76DC4190u, 0x01DB7106u, 0x98D220BCu, 0xEFD5102Au, 0x71B18589u, 0x06B6B51Fu,
    0x9FBFE4A5u, 0xE8B8D433u, 0x7807C9A2u, 0x0F00F934u, 0x9609A88Eu, 0xE10E9818u, 0x7F6A0DBBu,
    0x086D3D2Du, 0x91646C97u, 0xE6635C01u, 0x6B6B51F4u, 0x1C6C6162u, 0x856530D8u, 0xF262004Eu,
    0x6C0695EDu, 0x1B01A57Bu, 0x8208F4C1u, 0xF50FC457u, 0x65B0D9C6u, 0x12B7E950u, 0x8BBEB8EAu,
    0xFCB9887Cu, 0x62DD1DDFu, 0x15DA2D49u, 0x8CD37CF3u, 0xFBD44C65u, 0x4DB26158u, 0x3AB551CEu,
    0xA3BC0074u, 0xD4BB30E2u, 0x4ADFA541u, 0x3DD895D7u, 0xA4D1C46Du, 0xD3D6F4FBu, 0x4369E96Au,
    0x346ED9FCu, 0xAD678846u, 0xDA60B8D0u, 0x44042D73u, 0x33031DE5u, 0xAA0A4C5Fu, 0xDD0D7CC9u,
    0x5005713Cu, 0x270241AAu, 0xBE0B1010u, 0xC90C2086u, 0x5768B525u, 0x206F85B3u, 0xB966D409u,
    0xCE61E49Fu, 0x5EDEF90Eu, 0x29D9C998u, 0xB0D09822u, 0xC7D7A8B4u, 0x59B33D17u, 0x2EB40D81u,
    0xB7BD5C3Bu, 0xC0BA6CADu, 0xEDB88320u, 0x9ABFB3B6u, 0x03B6E20Cu, 0x74B1D29Au, 0xEAD54739u,
    0x9DD277AFu, 0x04DB2615u, 0x73DC1683u, 0xE3630B12u, 0x94643B84u, 0x0D6D6A3Eu, 0x7A6A5AA8u,
    0xE40ECF0Bu, 0x9309FF9Du, 0x0A00AE27u, 0x7D079EB1u, 0xF00F9344u, 0x8708A3D2u, 0x1E01F268u,
    0x6906C2FEu, 0xF762575Du, 0x806567CBu, 0x196C3671u, 0x6E6B06E7u, 0xFED41B76u, 0x89D32BE0u,
    0x10DA7A5Au, 0x67DD4ACCu, 0xF9B9DF6Fu, 0x8EBEEFF9u, 0x17B7BE43u, 0x60B08ED5u, 0xD6D6A3E8u,
    0xA1D1937Eu, 0x38D8C2C4u, 0x4FDFF252u, 0xD1BB67F1u, 0xA6BC5767u, 0x3FB506DDu, 0x48B2364Bu,
    0xD80D2BDAu, 0xAF0A1B4Cu, 0x36034AF6u, 0x41047A60u, 0xDF60EFC3u, 0xA867DF55u, 0x316E8EEFu,
    0x4669BE79u, 0xCB61B38Cu, 0xBC66831Au, 0x256FD2A0u, 0x5268E236u, 0xCC0C7795u, 0xBB0B4703u,
    0x220216B9u, 0x5505262Fu, 0xC5BA3BBEu, 0xB2BD0B28u, 0x2BB45A92u, 0x5CB36A04u, 0xC2D7FFA7u,
    0xB5D0CF31u, 0x2CD99E8Bu, 0x5BDEAE1Du, 0x9B64C2B0u, 0xEC63F226u, 0x756AA39Cu, 0x026D930Au,
    0x9C0906A9u, 0xEB0E363Fu, 0x72076785u, 0x05005713u, 0x95BF4A82u, 0xE2B87A14u, 0x7BB12BAEu,
    0x0CB61B38u, 0x92D28E9Bu, 0xE5D5BE0Du, 0x7CDCEFB7u, 0x0BDBDF21u, 0x86D3D2D4u, 0xF1D4E242u,
    0x68DDB3F8u, 0x1FDA836Eu, 0x81BE16CDu, 0xF6B9265Bu, 0x6FB077E1u, 0x18B74777u, 0x88085AE6u,
    0xFF0F6A70u, 0x66063BCAu, 0x11010B5Cu, 0x8F659EFFu, 0xF862AE69u, 0x616BFFD3u, 0x166CCF45u,
    0xA00AE278u, 0xD70DD2EEu, 0x4E048354u, 0x3903B3C2u, 0xA7672661u, 0xD06016F7u, 0x4969474Du,
    0x3E6E77DBu, 0xAED16A4Au, 0xD9D65ADCu, 0x40DF0B66u, 0x37D83BF0u, 0xA9BCAE53u, 0xDEBB9EC5u,
    0x47B2CF7Fu, 0x30B5FFE9u, 0xBDBDF21Cu, 0xCABAC28Au, 0x53B39330u, 0x24B4A3A6u, 0xBAD03605u,
    0xCDD70693u, 0x54DE5729u, 0x23D967BFu, 0xB3667A2Eu, 0xC4614AB8u, 0x5D681B02u, 0x2A6F2B94u,
    0xB40BBE37u, 0xC30C8EA1u, 0x5A05DF1Bu, 0x2D02EF8Du,
};

uint32_t mlf_crc32(uint32_t crc, const void* data, size_t n) {
  const uint8_t* p = (const uint8_t*)data;
  crc = ~crc;
  while (n--) {
    crc = kCrcTable[(crc ^ *p++) & 0xFFu] ^ (crc >> 8);
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

size_t mlf_frame_encode(uint8_t* out, size_t cap, uint8_t type, uint8_t seq, const uint8_t* payload,
                        size_t length) {
  if (length > MLF_FRAME_MAX_PAYLOAD || cap < MLF_FRAME_OVERHEAD + length) {
    return 0;
  }
  uint32_t crc = mlf_frame_put_header(out, type, seq, (uint16_t)length);
  if (length > 0) {
    memmove(out + MLF_FRAME_HEADER_BYTES, payload, length);
    crc = mlf_crc32(crc, payload, length);
  }
  mlf_frame_put_crc(out + MLF_FRAME_HEADER_BYTES + length, crc);
  return MLF_FRAME_OVERHEAD + length;
}

size_t mlf_frame_payload_limit(uint8_t type) {
  /* Message types of docs/protocol.md section 2 (mlf_device.h names them). */
  switch (type) {
    case 0x02u: /* DESCRIBE: u16 model, u16 first */
    case 0x06u: /* EXIT: i32 status */
      return 4;
    case 0x03u: /* SET_INPUT: header + tensor data */
    case 0x82u: /* DESCRIBE reply: pages up to 64 KiB */
    case 0x85u: /* GET_OUTPUT reply: tensor data */
      return MLF_FRAME_MAX_PAYLOAD;
    case 0x04u: /* RUN: u16 model */
      return 2;
    case 0x05u: /* GET_OUTPUT: u16 model, u16 output, u32 offset, u32 max length */
      return 12;
    case 0x81u: /* HELLO reply: 20 bytes + two names of up to 255 bytes; later versions may
                   append fields */
      return 1024;
    case 0x83u: /* SET_INPUT reply */
    case 0x86u: /* EXIT reply */
      return 0;
    case 0x84u: /* RUN reply: status, ticks, tick_hz, workspace bytes, stack bytes used */
      return 28;
    case 0xFFu: /* ERROR: 8 bytes + a message of at most 127 */
      return 135;
    default: /* HELLO (payload ignored) and types this version does not know */
      return MLF_FRAME_SMALL_PAYLOAD;
  }
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
    memmove(dec->buf, dec->buf + dec->start, dec->fill);
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
