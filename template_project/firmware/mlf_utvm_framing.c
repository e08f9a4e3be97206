/*
 * mlf_utvm_framing.c — microTVM's byte framing (see mlf_utvm.h, docs/protocol.md).
 *
 * A packet: FF FD, u32 length, payload, u16 CRC; every FF of length, payload and CRC doubled.
 * The CRC (CRC-16/CCITT-FALSE) covers the bytes as they travel, from FF FD to the payload's
 * end, doubled FFs included. Receiving is a byte-wise state machine: FF FF is a data FF,
 * FF FE nothing, FF FD a new packet (the current one is abandoned), FF + anything else
 * abandons the packet. A packet longer than the receive buffer is still followed to its end
 * (so bytes inside it are never taken for a start) and then dropped; so is one with a bad
 * CRC: nothing of it stays behind to spoil the next one.
 */
#include <string.h>

#include "mlf_platform.h"
#include "mlf_utvm.h"

#define ESCAPE 0xFFu
#define START 0xFDu
#define NOOP 0xFEu

enum { HUNT, HUNT_ESCAPE, LENGTH, PAYLOAD, CRC };

uint16_t mlf_utvm_crc16(uint16_t crc, const uint8_t* data, size_t n) {
  /* Four bits at a time: 32 bytes of table instead of 512, twice the speed of bit by bit. */
  static const uint16_t kNibble[16] = {0x0000, 0x1021, 0x2042, 0x3063, 0x4084, 0x50A5,
                                       0x60C6, 0x70E7, 0x8108, 0x9129, 0xA14A, 0xB16B,
                                       0xC18C, 0xD1AD, 0xE1CE, 0xF1EF};
  for (size_t i = 0; i < n; ++i) {
    crc = (uint16_t)((uint32_t)crc << 4 ^ kNibble[(crc >> 12) ^ (data[i] >> 4)]);
    crc = (uint16_t)((uint32_t)crc << 4 ^ kNibble[(crc >> 12) ^ (data[i] & 0x0Fu)]);
  }
  return crc;
}

/* ---- sending ------------------------------------------------------------------------- */

static void tx_flush(mlf_utvm* ut) {
  if (ut->tx_fill == 0) return;
  if (ut->config.write != NULL) {
    ut->config.write(ut->config.write_context, ut->tx, ut->tx_fill);
  } else {
    mlf_platform_write(ut->tx, ut->tx_fill);
  }
  ut->tx_fill = 0;
}

static void tx_raw(mlf_utvm* ut, uint8_t byte, int in_crc) {
  if (ut->tx_fill == sizeof(ut->tx)) tx_flush(ut);
  ut->tx[ut->tx_fill++] = byte;
  if (in_crc) ut->tx_crc = mlf_utvm_crc16(ut->tx_crc, &byte, 1);
}

static void tx_escaped(mlf_utvm* ut, const uint8_t* data, size_t n, int in_crc) {
  for (size_t i = 0; i < n; ++i) {
    if (data[i] == ESCAPE) tx_raw(ut, ESCAPE, in_crc);
    tx_raw(ut, data[i], in_crc);
  }
}

void mlf_utvm_tx_noop(mlf_utvm* ut) {
  tx_raw(ut, NOOP, 0);
  tx_flush(ut);
}

void mlf_utvm_tx_begin(mlf_utvm* ut, uint32_t payload_len) {
  const uint8_t length[4] = {(uint8_t)payload_len, (uint8_t)(payload_len >> 8),
                             (uint8_t)(payload_len >> 16), (uint8_t)(payload_len >> 24)};
  ut->tx_crc = 0xFFFFu;
  tx_raw(ut, ESCAPE, 1);
  tx_raw(ut, START, 1);
  tx_escaped(ut, length, sizeof(length), 1);
}

void mlf_utvm_tx_bytes(mlf_utvm* ut, const uint8_t* data, size_t n) { tx_escaped(ut, data, n, 1); }

void mlf_utvm_tx_end(mlf_utvm* ut) {
  const uint8_t crc[2] = {(uint8_t)ut->tx_crc, (uint8_t)(ut->tx_crc >> 8)};
  tx_escaped(ut, crc, sizeof(crc), 0);
  tx_flush(ut);
}

/* ---- receiving ----------------------------------------------------------------------- */

static void rx_start(mlf_utvm* ut) {
  static const uint8_t start[2] = {ESCAPE, START};
  ut->rx_state = LENGTH;
  ut->rx_escaped = 0;
  ut->rx_discard = 0;
  ut->rx_field_got = 0;
  ut->rx_len = 0;
  ut->rx_got = 0;
  ut->rx_packet_crc = 0;
  ut->rx_crc = mlf_utvm_crc16(0xFFFFu, start, sizeof(start));
}

/* One unescaped byte of the current packet's fields. Returns 1 when a whole packet with a
 * good CRC is in the receive buffer, 2 for a good one too large for it (its head is there). */
static int rx_data(mlf_utvm* ut, uint8_t byte) {
  switch (ut->rx_state) {
    case LENGTH:
      ut->rx_len |= (uint32_t)byte << (8u * ut->rx_field_got);
      if (++ut->rx_field_got == 4) {
        ut->rx_field_got = 0;
        ut->rx_discard = ut->rx_len > ut->config.rx_size;
        ut->rx_state = ut->rx_len > 0 ? PAYLOAD : CRC;
      }
      return 0;
    case PAYLOAD:
      /* An oversized packet keeps its head: its sender is told (mlf_utvm_session_oversized). */
      if (ut->rx_got < ut->config.rx_size) ut->config.rx_buffer[ut->rx_got] = byte;
      if (++ut->rx_got == ut->rx_len) ut->rx_state = CRC;
      return 0;
    default: /* CRC */
      ut->rx_packet_crc |= (uint16_t)(byte << (8u * ut->rx_field_got));
      if (++ut->rx_field_got < 2) return 0;
      ut->rx_state = HUNT;
      if (ut->rx_packet_crc != ut->rx_crc || ut->rx_len == 0) return 0;
      return ut->rx_discard ? 2 : 1;
  }
}

/* One received byte. Returns what rx_data does when it completed a packet, else 0. */
static int rx_byte(mlf_utvm* ut, uint8_t byte) {
  if (ut->rx_state == HUNT) {
    if (byte == ESCAPE) ut->rx_state = HUNT_ESCAPE;
    return 0;
  }
  if (ut->rx_state == HUNT_ESCAPE) {
    if (byte == START) {
      rx_start(ut);
    } else if (byte != ESCAPE) {
      ut->rx_state = HUNT;
    }
    return 0;
  }
  int covered = ut->rx_state != CRC;
  if (ut->rx_escaped) {
    ut->rx_escaped = 0;
    if (byte == START) {
      rx_start(ut); /* a new packet cuts the current one short */
      return 0;
    }
    if (byte != ESCAPE && byte != NOOP) {
      ut->rx_state = HUNT; /* invalid escape: the packet is abandoned */
      return 0;
    }
    if (covered) ut->rx_crc = mlf_utvm_crc16(ut->rx_crc, &byte, 1);
    return byte == ESCAPE ? rx_data(ut, byte) : 0;
  }
  if (covered) ut->rx_crc = mlf_utvm_crc16(ut->rx_crc, &byte, 1);
  if (byte == ESCAPE) {
    ut->rx_escaped = 1;
    return 0;
  }
  return rx_data(ut, byte);
}

int mlf_utvm_feed(mlf_utvm* ut, const uint8_t* data, size_t n) {
  for (size_t i = 0; i < n && !ut->shutdown; ++i) {
    int got = rx_byte(ut, data[i]);
    if (got == 1) mlf_utvm_session_packet(ut, ut->config.rx_buffer, ut->rx_len);
    if (got == 2) mlf_utvm_session_oversized(ut, ut->config.rx_buffer);
  }
  return ut->shutdown;
}
