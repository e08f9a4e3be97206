/* utvm_support.c — see utvm_support.h. */
#include "utvm_support.h"

#include <string.h>

void msg_u(utvm_msg* m, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i, v >>= 8) {
    if (m->len < sizeof(m->bytes)) m->bytes[m->len++] = (uint8_t)v;
  }
}

void msg_bytes(utvm_msg* m, const void* data, size_t n) {
  if (n > sizeof(m->bytes) - m->len) n = sizeof(m->bytes) - m->len;
  memcpy(m->bytes + m->len, data, n);
  m->len += n;
}

void msg_str(utvm_msg* m, const char* s) {
  msg_u(m, strlen(s), 8);
  msg_bytes(m, s, strlen(s));
}

void msg_tensor(utvm_msg* m, uint64_t data, int32_t ndim, const int64_t* shape, uint8_t code,
                uint8_t bits) {
  msg_u(m, data, 8);
  msg_u(m, 1, 4); /* kDLCPU */
  msg_u(m, 0, 4);
  msg_u(m, (uint32_t)ndim, 4);
  msg_u(m, code, 1);
  msg_u(m, bits, 1);
  msg_u(m, 1, 2);
  for (int32_t i = 0; i < ndim; ++i) msg_u(m, (uint64_t)shape[i], 8);
  msg_u(m, 0, 8);
}

static size_t put_escaped(uint8_t* out, const uint8_t* data, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    if (data[i] == 0xFF) out[k++] = 0xFF;
    out[k++] = data[i];
  }
  return k;
}

size_t utvm_frame(const uint8_t* payload, size_t len, uint8_t* out) {
  const uint8_t length[4] = {(uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16),
                             (uint8_t)(len >> 24)};
  size_t k = 0;
  out[k++] = 0xFF;
  out[k++] = 0xFD;
  k += put_escaped(out + k, length, 4);
  k += put_escaped(out + k, payload, len);
  uint16_t crc = mlf_utvm_crc16(0xFFFF, out, k);
  const uint8_t tail[2] = {(uint8_t)crc, (uint8_t)(crc >> 8)};
  return k + put_escaped(out + k, tail, 2);
}

uint64_t utvm_le(const uint8_t* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static void capture(void* context, const uint8_t* data, size_t n) {
  utvm_device* d = (utvm_device*)context;
  if (n > sizeof(d->out) - d->out_len) {
    /* Keep the newest bytes: drop what was already read. */
    memmove(d->out, d->out + d->out_read, d->out_len - d->out_read);
    d->out_len -= d->out_read;
    d->out_read = 0;
    if (n > sizeof(d->out) - d->out_len) n = sizeof(d->out) - d->out_len;
  }
  memcpy(d->out + d->out_len, data, n);
  d->out_len += n;
}

int utvm_device_start(utvm_device* d, const mlf_utvm_model* models, uint32_t num_models,
                      mlf_workspace* workspace) {
  mlf_utvm_config config;
  memset(&config, 0, sizeof(config));
  config.models = models;
  config.num_models = num_models;
  config.rx_buffer = d->rx;
  config.rx_size = UTVM_RX;
  config.arena = d->arena;
  config.arena_size = sizeof(d->arena);
  config.workspace = workspace;
  config.write = capture;
  config.write_context = d;
  config.seed = 1234;
  d->out_len = d->out_read = 0;
  if (mlf_utvm_init(&d->ut, &config) != 0) return -1;
  mlf_utvm_announce(&d->ut);
  return 0;
}

long utvm_next_packet(utvm_device* d, uint8_t* payload, size_t cap) {
  size_t i = d->out_read;
  while (i + 1 < d->out_len && !(d->out[i] == 0xFF && d->out[i + 1] == 0xFD)) ++i;
  if (i + 1 >= d->out_len) return -1;
  size_t start = i;
  i += 2;
  static uint8_t fields[4 + UTVM_OUT];
  size_t got = 0, need = 4, crc_at = 0;
  uint8_t crc_bytes[2];
  size_t crc_got = 0;
  while (i < d->out_len) {
    uint8_t b = d->out[i++];
    if (b == 0xFF) {
      if (i >= d->out_len || d->out[i] != 0xFF) return -2;
      ++i;
    }
    if (got < need) {
      fields[got++] = b;
      if (got == 4) need = 4 + (size_t)utvm_le(fields, 4);
      if (got == need) crc_at = i;
      if (need > sizeof(fields)) return -2;
    } else {
      crc_bytes[crc_got++] = b;
      if (crc_got == 2) break;
    }
  }
  if (crc_got != 2) return -1;
  d->out_read = i;
  uint16_t crc = mlf_utvm_crc16(0xFFFF, d->out + start, crc_at - start);
  if (crc != utvm_le(crc_bytes, 2)) return -2;
  size_t len = need - 4;
  memcpy(payload, fields + 4, len < cap ? len : cap);
  return (long)len;
}

void utvm_send_packet(utvm_device* d, const uint8_t* payload, size_t len) {
  static uint8_t wire[2 * 8192 + 16];
  if (len > 8192) return;
  size_t n = utvm_frame(payload, len, wire);
  mlf_utvm_feed(&d->ut, wire, n);
}

int utvm_handshake(utvm_device* d, uint8_t nonce) {
  const uint8_t terminate[3] = {0, 0, 2};
  const uint8_t init[4] = {nonce, 0, 0, 1};
  uint8_t reply[16];
  d->out_read = d->out_len;
  utvm_send_packet(d, terminate, sizeof(terminate));
  utvm_send_packet(d, init, sizeof(init));
  long n = utvm_next_packet(d, reply, sizeof(reply));
  if (n != 4 || reply[0] != nonce || reply[1] == 0 || reply[2] != 1 || reply[3] != 1) return -1;
  d->host_nonce = nonce;
  d->device_nonce = reply[1];
  return 0;
}

long utvm_request(utvm_device* d, const utvm_msg* body, uint8_t* reply, size_t cap) {
  static utvm_msg packet;
  static uint8_t payload[UTVM_OUT];
  packet.len = 0;
  msg_u(&packet, d->host_nonce, 1);
  msg_u(&packet, d->device_nonce, 1);
  msg_u(&packet, 0x10, 1);
  msg_u(&packet, body->len, 8);
  msg_bytes(&packet, body->bytes, body->len);
  d->out_read = d->out_len;
  utvm_send_packet(d, packet.bytes, packet.len);
  long n = utvm_next_packet(d, payload, sizeof(payload));
  if (n < 11 || payload[0] != d->host_nonce || payload[1] != d->device_nonce ||
      payload[2] != 0x10 || utvm_le(payload + 3, 8) != (uint64_t)(n - 11)) {
    return -1;
  }
  size_t len = (size_t)n - 11;
  memcpy(reply, payload + 11, len < cap ? len : cap);
  return (long)len;
}
