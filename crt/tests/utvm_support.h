/*
 * utvm_support.h — a host side for the microTVM RPC server's C tests and fuzzer: frames
 * packets as TVM's host does, reads the device's packets back (checking their CRC), builds
 * MinRPC requests, and holds a server with its memory over an in-memory link.
 */
#ifndef MLF_UTVM_SUPPORT_H_
#define MLF_UTVM_SUPPORT_H_

#include <stddef.h>
#include <stdint.h>

#include "mlf_utvm.h"

#define UTVM_RX 2048u
#define UTVM_ARENA (64u * 1024u)
#define UTVM_OUT (64u * 1024u)

/* A growing request: bytes appended little-endian. */
typedef struct {
  uint8_t bytes[4096];
  size_t len;
} utvm_msg;

void msg_u(utvm_msg* m, uint64_t v, size_t n);
void msg_bytes(utvm_msg* m, const void* data, size_t n);
void msg_str(utvm_msg* m, const char* s); /* u64 length + bytes */
/* A DLTensor's wire fields (data .. byte_offset), float32 unless bits says otherwise. */
void msg_tensor(utvm_msg* m, uint64_t data, int32_t ndim, const int64_t* shape, uint8_t code,
                uint8_t bits);

/* payload -> escaped packet with CRC; returns its length (out needs 2 * len + 16 bytes). */
size_t utvm_frame(const uint8_t* payload, size_t len, uint8_t* out);

typedef struct {
  mlf_utvm ut;
  uint8_t rx[UTVM_RX + 1];
  uint8_t arena[UTVM_ARENA];
  uint8_t out[UTVM_OUT];
  size_t out_len, out_read;
  uint8_t host_nonce, device_nonce;
} utvm_device;

/* A server over these models (may be NULL/0) with a workspace (may be NULL), announced. */
int utvm_device_start(utvm_device* d, const mlf_utvm_model* models, uint32_t num_models,
                      mlf_workspace* workspace);
/* The next packet the device sent: payload copied (up to cap), length returned; -1 when none
 * is left, -2 for one with a bad CRC or escape (a device bug). */
long utvm_next_packet(utvm_device* d, uint8_t* payload, size_t cap);
/* Frames and feeds one packet. */
void utvm_send_packet(utvm_device* d, const uint8_t* payload, size_t len);
/* Terminate + StartSessionInit with nonce n; returns 0 when the device replied properly. */
int utvm_handshake(utvm_device* d, uint8_t nonce);
/* Sends a MinRPC body (code and what follows) as a Normal message of the session and returns
 * the reply's MinRPC body (code onwards) in reply; its length, or -1 without a reply. */
long utvm_request(utvm_device* d, const utvm_msg* body, uint8_t* reply, size_t cap);

uint64_t utvm_le(const uint8_t* p, size_t n);

#endif /* MLF_UTVM_SUPPORT_H_ */
