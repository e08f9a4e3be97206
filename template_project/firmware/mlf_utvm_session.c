/*
 * mlf_utvm_session.c — microTVM's session layer (see mlf_utvm.h, docs/protocol.md).
 *
 * Every packet starts with [host nonce, device nonce, type]. The device never starts a
 * session: at boot it says TerminateSession, then answers each StartSessionInit (host nonce
 * non-zero) with exactly one StartSessionReply carrying a fresh device nonce — also when a
 * session was already established (a restarted host). Normal messages of any other session
 * (a stale host) are dropped, and so is anything malformed; no state survives a dropped
 * message, so the next good one is served.
 */
#include <string.h>

#include "mlf_platform.h"
#include "mlf_utvm.h"

#define TYPE_INIT 0x00u
#define TYPE_REPLY 0x01u
#define TYPE_TERMINATE 0x02u
#define TYPE_LOG 0x03u
#define TYPE_NORMAL 0x10u
#define SESSION_VERSION 0x01u
#define HEADER 3u
#define MAX_LOG 1023u /* the host refuses longer logs and then blocks */

uint32_t mlf_utvm_random(mlf_utvm* ut) {
  /* xorshift32, stirred with the tick counter so nonces differ between boots on real
   * hardware; under QEMU -icount the sequence is repeatable, which tests like. */
  uint32_t x = ut->rng ^ (uint32_t)mlf_platform_ticks();
  if (x == 0) x = 0x6D2B79F5u;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  ut->rng = x;
  return x;
}

/* Everything handed to a host: allocations, function handles, the time evaluator. */
static void forget_objects(mlf_utvm* ut) {
  mlf_utvm_alloc_init(ut, ut->config.arena, ut->config.arena_size);
  memset(ut->funcs, 0, sizeof(ut->funcs));
  memset(&ut->timer, 0, sizeof(ut->timer));
  memset(ut->graphs, 0, sizeof(ut->graphs)); /* their memory went with the arena's blocks */
}

int mlf_utvm_init(mlf_utvm* ut, const mlf_utvm_config* config) {
  memset(ut, 0, sizeof(*ut));
  if (config == NULL || config->rx_buffer == NULL || config->rx_size < 64 ||
      (config->models == NULL && config->num_models > 0)) {
    return -1;
  }
  ut->config = *config;
  ut->rng = config->seed ^ 0x9E3779B9u;
  forget_objects(ut);
  return 0;
}

int mlf_utvm_serve(mlf_utvm* ut, const mlf_utvm_config* config) {
  if (mlf_utvm_init(ut, config) != 0) {
    mlf_platform_log("microTVM RPC server: bad configuration");
    return 125;
  }
  mlf_utvm_announce(ut);
  uint8_t chunk[64];
  for (;;) {
    size_t n = mlf_platform_read(chunk, sizeof(chunk));
    if (n == 0 || mlf_utvm_feed(ut, chunk, n)) return 0;
  }
}

static void send_message(mlf_utvm* ut, uint8_t n0, uint8_t n1, uint8_t type, const uint8_t* a,
                         size_t a_len, const uint8_t* b, size_t b_len) {
  const uint8_t header[HEADER] = {n0, n1, type};
  mlf_utvm_tx_begin(ut, (uint32_t)(HEADER + a_len + b_len));
  mlf_utvm_tx_bytes(ut, header, HEADER);
  mlf_utvm_tx_bytes(ut, a, a_len);
  mlf_utvm_tx_bytes(ut, b, b_len);
  mlf_utvm_tx_end(ut);
}

void mlf_utvm_announce(mlf_utvm* ut) {
  mlf_utvm_tx_noop(ut);
  send_message(ut, 0, 0, TYPE_TERMINATE, NULL, 0, NULL, 0);
}

void mlf_utvm_log(mlf_utvm* ut, const char* text, size_t n) {
  if (n == 0 || n > MAX_LOG) return;
  send_message(ut, 0, 0, TYPE_LOG, (const uint8_t*)text, n, NULL, 0);
}

void mlf_utvm_session_send(mlf_utvm* ut, const uint8_t* head, size_t head_len, const uint8_t* tail,
                           size_t tail_len) {
  send_message(ut, ut->host_nonce, ut->device_nonce, TYPE_NORMAL, head, head_len, tail, tail_len);
}

void mlf_utvm_session_packet(mlf_utvm* ut, uint8_t* payload, uint32_t len) {
  if (len < HEADER) return;
  switch (payload[2]) {
    case TYPE_INIT:
      if (payload[0] == 0) return; /* an invalid host nonce */
      ut->host_nonce = payload[0];
      do {
        ut->device_nonce = (uint8_t)(mlf_utvm_random(ut) >> 24);
      } while (ut->device_nonce == 0);
      ut->established = 1;
      forget_objects(ut); /* the previous host's handles die with its session */
      {
        const uint8_t version = SESSION_VERSION;
        send_message(ut, ut->host_nonce, ut->device_nonce, TYPE_REPLY, &version, 1, NULL, 0);
      }
      return;
    case TYPE_TERMINATE:
      ut->established = 0;
      return;
    case TYPE_NORMAL:
      if (!ut->established || payload[0] != ut->host_nonce || payload[1] != ut->device_nonce) {
        return; /* a stale session's message, or none established */
      }
      /* The body is writable: strings are NUL-terminated in place. */
      mlf_utvm_minrpc_request(ut, payload + HEADER, len - HEADER);
      return;
    default: /* replies and logs are the device's to send; unknown types are ignored */
      return;
  }
}

void mlf_utvm_session_oversized(mlf_utvm* ut, const uint8_t* head) {
  /* TVM's host sends a graph JSON or params blob in one packet and would wait for a reply
   * forever: a request of this session is answered, anything else stays dropped. */
  if (head[2] == TYPE_NORMAL && ut->established && head[0] == ut->host_nonce &&
      head[1] == ut->device_nonce) {
    mlf_utvm_exception(ut,
                       "request larger than the device's receive buffer: a graph JSON or "
                       "params blob goes in one packet (generate the project with "
                       "device_graph_executor=true, which sizes the buffer for the models'), "
                       "else set params per tensor");
  }
}
