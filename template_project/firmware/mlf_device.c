/*
 * mlf_device.c — the host_driven command loop (see mlf_device.h and docs/protocol.md).
 *
 * Replies are streamed: header, payload pieces and CRC go out through a small staging
 * buffer, and tensor bytes are written straight from the executor's memory, so no reply
 * ever needs a buffer of its own size. Requests are handled in place in the receive buffer.
 */
#include "mlf_device.h"

#include <string.h>

#include "mlf_platform.h"
#include "mlf_text.h" /* mlf_text_length */
#if MLF_PROFILE
#include "mlf_profile.h"
#endif

/* Firmware whose runtime measures each operator call's workspace (MLF_WORKSPACE_MARKS, the
 * host's) appends those figures to the RUN reply (docs/protocol.md 2). */
#ifndef MLF_WORKSPACE_MARKS
#define MLF_WORKSPACE_MARKS 0
#endif
#define RUN_REPLY_BYTES 28u
#define RUN_MARKS_MAX ((MLF_FRAME_MAX_PAYLOAD - RUN_REPLY_BYTES - 4u) / 4u)

/* ---- little-endian fields ---------------------------------------------------------- */

/* Longer than any name a reply can carry (section 2.2's u16 length, less the fixed part). */
#define NAME_SCAN_LIMIT 0x10000u

static uint16_t get_u16(const uint8_t* p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static uint32_t get_u32(const uint8_t* p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* ---- reply streaming ------------------------------------------------------------------ */

static void tx_flush(mlf_device* dev) {
  if (dev->tx_fill > 0) {
    mlf_platform_write(dev->tx, dev->tx_fill);
    dev->tx_fill = 0;
  }
}

static void tx_bytes(mlf_device* dev, const void* data, size_t n) {
  if (n == 0) return;
  dev->tx_crc = mlf_crc32(dev->tx_crc, data, n);
  if (dev->tx_fill + n <= sizeof(dev->tx)) {
    memcpy(dev->tx + dev->tx_fill, data, n);
    dev->tx_fill += n;
    return;
  }
  tx_flush(dev);
  if (n <= sizeof(dev->tx)) {
    memcpy(dev->tx, data, n);
    dev->tx_fill = n;
  } else {
    mlf_platform_write((const uint8_t*)data, n);
  }
}

static void tx_begin(mlf_device* dev, uint8_t type, uint8_t seq, size_t length) {
  uint8_t header[MLF_FRAME_HEADER_BYTES];
  uint32_t crc = mlf_frame_put_header(header, type, seq, (uint16_t)length);
  tx_flush(dev);
  memcpy(dev->tx, header, sizeof(header));
  dev->tx_fill = sizeof(header);
  dev->tx_crc = crc;
}

static void tx_end(mlf_device* dev) {
  uint8_t crc[MLF_FRAME_CRC_BYTES];
  mlf_frame_put_crc(crc, dev->tx_crc);
  if (dev->tx_fill + sizeof(crc) > sizeof(dev->tx)) tx_flush(dev);
  memcpy(dev->tx + dev->tx_fill, crc, sizeof(crc));
  dev->tx_fill += sizeof(crc);
  tx_flush(dev);
}

/* The low n bytes of v, little-endian: one function for every field width. */
static void tx_le(mlf_device* dev, uint64_t v, size_t n) {
  uint8_t b[8];
  for (size_t i = 0; i < n; ++i, v >>= 8) b[i] = (uint8_t)v;
  tx_bytes(dev, b, n);
}

static void tx_u8(mlf_device* dev, uint8_t v) { tx_le(dev, v, 1); }
static void tx_u16(mlf_device* dev, uint16_t v) { tx_le(dev, v, 2); }
static void tx_u32(mlf_device* dev, uint32_t v) { tx_le(dev, v, 4); }
static void tx_u64(mlf_device* dev, uint64_t v) { tx_le(dev, v, 8); }

/* ---- error replies ------------------------------------------------------------------ */

/* The message buffer as a tiny string builder (no printf: it may pull in malloc). */
static size_t msg_len(const mlf_device* dev) {
  return mlf_text_length(dev->message, sizeof(dev->message));
}

/* Appends at most n bytes of s, up to a NUL; the buffer's end cuts it. */
static void msg_put(mlf_device* dev, const char* s, size_t n) {
  size_t len = msg_len(dev);
  for (; n > 0 && *s != '\0' && len + 1 < sizeof(dev->message); --n) dev->message[len++] = *s++;
  dev->message[len] = '\0';
}

/* The message becomes `numbers` in decimal, separated by spaces. */
static void msg_numbers(mlf_device* dev, const uint32_t* numbers, uint32_t count) {
  dev->message[0] = '\0';
  for (uint32_t i = 0; i < count; ++i) {
    char text[12];
    size_t at = sizeof(text) - 1;
    uint32_t v = numbers[i];
    text[at] = '\0';
    do {
      text[--at] = (char)('0' + v % 10u);
      v /= 10u;
    } while (v != 0);
    if (i > 0) text[--at] = ' ';
    msg_put(dev, text + at, sizeof(text));
  }
}

static void reply_error(mlf_device* dev, uint8_t seq, uint8_t request, uint16_t code,
                        uint32_t node) {
  size_t len = msg_len(dev);
  tx_begin(dev, MLF_MSG_ERROR, seq, 8 + len);
  tx_u16(dev, code);
  tx_u8(dev, request);
  tx_u8(dev, 0);
  tx_u32(dev, node);
  tx_bytes(dev, dev->message, len);
  tx_end(dev);
}

/* A protocol error (code 0x100 and up): its numbers only, in decimal separated by spaces;
 * the host words them (docs/protocol.md 2.3), so the firmware carries no English for them. */
static void fail_with(mlf_device* dev, uint8_t seq, uint8_t request, uint16_t code, uint32_t count,
                      uint32_t a, uint32_t b, uint32_t c) {
  const uint32_t numbers[3] = {a, b, c};
  msg_numbers(dev, numbers, count);
  reply_error(dev, seq, request, code, MLF_DEVICE_NO_NODE);
}

static void fail(mlf_device* dev, uint8_t seq, uint8_t request, uint16_t code) {
  fail_with(dev, seq, request, code, 0, 0, 0, 0);
}

/* A runtime failure in numbers the host words (docs/protocol.md 2.3): "<init> <why> <offset>",
 * then a space and the name it concerns, if any; the status is the ERROR code and the node
 * its own field. The firmware thus carries neither the runtime's texts nor its formatter.
 * Returns the node. */
static uint32_t runtime_message(mlf_device* dev, mlf_status status, const mlf_executor* ex,
                                uint32_t init) {
  const mlf_error* err = ex != NULL ? mlf_executor_error(ex) : NULL;
  if (err != NULL && err->status != status) err = NULL;
  const uint32_t numbers[3] = {init, err != NULL ? err->why : 0,
                               err != NULL ? err->offset : UINT32_MAX};
  msg_numbers(dev, numbers, 3);
  if (err != NULL && err->subject != NULL) {
    msg_put(dev, " ", 1);
    msg_put(dev, err->subject, err->subject_len);
  }
  return err != NULL ? err->node : MLF_DEVICE_NO_NODE;
}

/* init: 1 when the model's initialisation failed (the host says so), 0 for a request's own. */
static void fail_runtime(mlf_device* dev, uint8_t seq, uint8_t request, mlf_status status,
                         const mlf_executor* ex, uint32_t init) {
  uint32_t node = runtime_message(dev, status, ex, init);
  reply_error(dev, seq, request, (uint16_t)status, node);
}

/* ---- requests ----------------------------------------------------------------------- */

static const mlf_device_model* model_for(mlf_device* dev, uint8_t seq, uint8_t request,
                                         const uint8_t* payload) {
  uint16_t index = get_u16(payload);
  if (index >= dev->config->num_models) {
    fail_with(dev, seq, request, MLF_DEVICE_ERR_BAD_MODEL, 2, index, dev->config->num_models, 0);
    return NULL;
  }
  const mlf_device_model* model = &dev->config->models[index];
  if (model->init_status != MLF_OK || model->executor == NULL) {
    mlf_status status = model->init_status != MLF_OK ? model->init_status : MLF_ERR_STATE;
    fail_runtime(dev, seq, request, status, model->executor, 1);
    return NULL;
  }
  return model;
}

#if MLF_SHARED_ARENA
/* Models that share one arena: the one whose tensors it holds (taking it over when `take`),
 * or 0 after an ARENA_TAKEN was answered. A model that never touched the arena may run (its
 * inputs are what its last user left there, as a fresh firmware's are zeros). */
static int arena_held(mlf_device* dev, uint8_t seq, uint8_t request, const uint8_t* payload,
                      int take) {
  uint32_t index = get_u16(payload);
  const mlf_device_model* model = &dev->config->models[index];
  if (!model->shares_arena) return 1;
  if (!take && dev->arena_owner != 0 && dev->arena_owner != index + 1u) {
    fail_with(dev, seq, request, MLF_DEVICE_ERR_ARENA_TAKEN, 2, index, dev->arena_owner - 1u, 0);
    return 0;
  }
  dev->arena_owner = index + 1u;
  return 1;
}
#define ARENA_HELD(dev, seq, request, payload, take) arena_held(dev, seq, request, payload, take)
#else
#define ARENA_HELD(dev, seq, request, payload, take) 1
#endif

static void fail_index(mlf_device* dev, uint8_t seq, uint8_t request, uint32_t index,
                       uint32_t count) {
  fail_with(dev, seq, request, MLF_DEVICE_ERR_BAD_INDEX, 2, index, count, 0);
}

static void fail_range(mlf_device* dev, uint8_t seq, uint8_t request, uint32_t offset,
                       uint32_t length, size_t nbytes) {
  fail_with(dev, seq, request, MLF_DEVICE_ERR_OUT_OF_RANGE, 3, offset, length, (uint32_t)nbytes);
}

/* The three UNSUPPORTED cases of DESCRIBE, by the number the host words. */
enum { TOO_MANY_TENSORS = 0, NOT_DESCRIBABLE = 1, DESCRIPTION_TOO_LONG = 2 };

static uint8_t clamp_u8_len(const char* s) {
  return (uint8_t)(s != NULL ? mlf_text_length(s, 255) : 0);
}

static void on_hello(mlf_device* dev, uint8_t seq) {
  const mlf_device_config* cfg = dev->config;
  uint8_t board_len = clamp_u8_len(cfg->board);
  uint8_t type_len = clamp_u8_len(cfg->project_type);
  tx_begin(dev, MLF_MSG_HELLO | MLF_MSG_REPLY, seq, 20 + 1 + board_len + 1 + type_len);
  tx_bytes(dev, MLF_PROTOCOL_MAGIC, 4);
  tx_u16(dev, MLF_PROTOCOL_VERSION);
  tx_u16(dev, (uint16_t)cfg->num_models);
  tx_u32(dev, dev->max_payload);
  tx_u64(dev, mlf_platform_tick_hz());
  tx_u8(dev, board_len);
  tx_bytes(dev, cfg->board, board_len);
  tx_u8(dev, type_len);
  tx_bytes(dev, cfg->project_type, type_len);
  tx_end(dev);
}

/* Inputs first, then outputs: the describe index space. */
static mlf_status tensor_info(const mlf_executor* ex, uint32_t num_inputs, uint32_t index,
                              mlf_tensor_info* info) {
  memset(info, 0, sizeof(*info));
  if (index < num_inputs) return mlf_executor_input_info(ex, index, info);
  return mlf_executor_output_info(ex, index - num_inputs, info);
}

/* Written without comparing against a constant, which 32-bit targets warn is always true. */
static int fits_u32(size_t v) { return ((v >> 16) >> 16) == 0; }

static uint32_t u32_or_unknown(size_t v) { return fits_u32(v) ? (uint32_t)v : 0xFFFFFFFFu; }

/* Platforms that cannot measure their stack (the host) leave this default in place. */
__attribute__((weak)) size_t mlf_platform_stack_used(void) { return (size_t)-1; }

static int describable(const mlf_tensor_info* info) {
  return info->ndim >= 0 && info->ndim <= 255 && info->name_len <= 0xFFFFu &&
         fits_u32(info->nbytes) && (info->ndim == 0 || info->shape != NULL);
}

static size_t entry_bytes(const mlf_tensor_info* info) {
  return 2 + (info->name != NULL ? info->name_len : 0) + 4 + 1 + 8 * (size_t)info->ndim + 4;
}

static void on_describe(mlf_device* dev, uint8_t seq, const uint8_t* payload, size_t length) {
  const uint8_t request = MLF_MSG_DESCRIBE;
  if (length != 4) {
    fail(dev, seq, request, MLF_DEVICE_ERR_BAD_PAYLOAD);
    return;
  }
  uint16_t model_index = get_u16(payload);
  if (model_index >= dev->config->num_models) {
    model_for(dev, seq, request, payload); /* answers BAD_MODEL */
    return;
  }
  const mlf_device_model* model = &dev->config->models[model_index];
  const mlf_executor* ex = model->executor;
  size_t name_len = mlf_text_length(model->name, NAME_SCAN_LIMIT);
  mlf_status status = model->init_status != MLF_OK ? model->init_status
                      : ex == NULL                 ? MLF_ERR_STATE
                                                   : MLF_OK;
  uint32_t num_inputs = 0, num_outputs = 0, first = 0, count = 0;
  size_t size;
  mlf_tensor_info info;
  if (status != MLF_OK) {
    /* A model whose init failed: its name, status, and why in numbers (as an ERROR's, init
     * 0: the reply itself says the model is broken) where the entries would be. */
    runtime_message(dev, status, ex, 0);
    if (name_len > 0xFFFFu - 64) name_len = 0xFFFFu - 64;
    size = 14 + name_len + msg_len(dev);
  } else {
    num_inputs = mlf_executor_num_inputs(ex);
    num_outputs = mlf_executor_num_outputs(ex);
    first = get_u16(payload + 2);
    if (num_inputs > 0xFFFFu || num_outputs > 0xFFFFu || name_len > 0xFFFFu - 64) {
      fail_with(dev, seq, request, MLF_DEVICE_ERR_UNSUPPORTED, 1, TOO_MANY_TENSORS, 0, 0);
      return;
    }
    uint32_t total = num_inputs + num_outputs;
    if (first > total) {
      fail_with(dev, seq, request, MLF_DEVICE_ERR_OUT_OF_RANGE, 2, first, total, 0);
      return;
    }
    /* First pass: how many entries fit into one reply. */
    size = 14 + name_len;
    for (uint32_t i = first; i < total; ++i) {
      mlf_status found = tensor_info(ex, num_inputs, i, &info);
      if (found != MLF_OK) {
        fail_runtime(dev, seq, request, found, ex, 0);
        return;
      }
      if (!describable(&info)) {
        fail_with(dev, seq, request, MLF_DEVICE_ERR_UNSUPPORTED, 1, NOT_DESCRIBABLE, 0, 0);
        return;
      }
      if (size + entry_bytes(&info) > MLF_FRAME_MAX_PAYLOAD) break;
      size += entry_bytes(&info);
      ++count;
    }
    if (count == 0 && first < total) {
      fail_with(dev, seq, request, MLF_DEVICE_ERR_UNSUPPORTED, 1, DESCRIPTION_TOO_LONG, 0, 0);
      return;
    }
  }
  tx_begin(dev, MLF_MSG_DESCRIBE | MLF_MSG_REPLY, seq, size);
  tx_bytes(dev, payload, 2);
  tx_u16(dev, (uint16_t)status);
  tx_u16(dev, (uint16_t)num_inputs);
  tx_u16(dev, (uint16_t)num_outputs);
  tx_u16(dev, (uint16_t)first);
  tx_u16(dev, (uint16_t)count);
  tx_u16(dev, (uint16_t)name_len);
  tx_bytes(dev, model->name, name_len);
  for (uint32_t i = first; i < first + count; ++i) {
    tensor_info(ex, num_inputs, i, &info);
    uint16_t entry_name_len = (uint16_t)(info.name != NULL ? info.name_len : 0);
    tx_u16(dev, entry_name_len);
    tx_bytes(dev, info.name, entry_name_len);
    tx_u8(dev, info.dtype.code);
    tx_u8(dev, info.dtype.bits);
    tx_u16(dev, info.dtype.lanes);
    tx_u8(dev, (uint8_t)info.ndim);
    for (int32_t d = 0; d < info.ndim; ++d) tx_u64(dev, (uint64_t)info.shape[d]);
    tx_u32(dev, (uint32_t)info.nbytes);
  }
  if (status != MLF_OK) tx_bytes(dev, dev->message, msg_len(dev));
  tx_end(dev);
}

/* The input (`output` 0) or output a request's u16 model, u16 index names: its data, its size
 * in *nbytes; NULL once an ERROR answered. Outputs are only read through the pointer. */
static uint8_t* tensor_for(mlf_device* dev, uint8_t seq, uint8_t request, const uint8_t* payload,
                           int output, size_t* nbytes) {
  const mlf_device_model* model = model_for(dev, seq, request, payload);
  if (model == NULL) return NULL;
  mlf_executor* ex = model->executor;
  uint32_t index = get_u16(payload + 2);
  uint32_t count = output ? mlf_executor_num_outputs(ex) : mlf_executor_num_inputs(ex);
  if (index >= count) {
    fail_index(dev, seq, request, index, count);
    return NULL;
  }
  mlf_tensor_info info;
  mlf_status status = output ? mlf_executor_output_info(ex, index, &info)
                             : mlf_executor_input_info(ex, index, &info);
  uint8_t* data = output ? (uint8_t*)(uintptr_t)mlf_executor_output_data(ex, index)
                         : (uint8_t*)mlf_executor_input_data(ex, index);
  if (status != MLF_OK || data == NULL) {
    fail_runtime(dev, seq, request, status != MLF_OK ? status : MLF_ERR_STATE, ex, 0);
    return NULL;
  }
  *nbytes = info.nbytes;
  return data;
}

static void on_set_input(mlf_device* dev, uint8_t seq, const uint8_t* payload, size_t length) {
  const uint8_t request = MLF_MSG_SET_INPUT;
  if (length < 8) {
    fail(dev, seq, request, MLF_DEVICE_ERR_BAD_PAYLOAD);
    return;
  }
  size_t nbytes;
  uint8_t* tensor = tensor_for(dev, seq, request, payload, 0, &nbytes);
  if (tensor == NULL) return;
  uint32_t offset = get_u32(payload + 4);
  uint32_t count = (uint32_t)(length - 8);
  if (offset > nbytes || count > nbytes - offset) {
    fail_range(dev, seq, request, offset, count, nbytes);
    return;
  }
  (void)ARENA_HELD(dev, seq, request, payload, 1);
  if (count > 0) {
    memcpy(tensor + offset, payload + 8, count);
  }
  tx_begin(dev, MLF_MSG_SET_INPUT | MLF_MSG_REPLY, seq, 0);
  tx_end(dev);
}

static void on_run(mlf_device* dev, uint8_t seq, const uint8_t* payload, size_t length) {
  const uint8_t request = MLF_MSG_RUN;
  if (length != 2) {
    fail(dev, seq, request, MLF_DEVICE_ERR_BAD_PAYLOAD);
    return;
  }
  const mlf_device_model* model = model_for(dev, seq, request, payload);
  if (model == NULL || !ARENA_HELD(dev, seq, request, payload, 0)) return;
  if (model->workspace != NULL) {
    /* A run that failed inside an operator may have left blocks allocated. */
    mlf_workspace_reset(model->workspace);
    mlf_workspace_bind(model->workspace);
  }
#if MLF_PROFILE
  mlf_profile_start(model->workspace);
#endif
  uint64_t start = mlf_platform_ticks();
  mlf_status status = mlf_executor_run(model->executor);
  uint64_t ticks = mlf_platform_ticks() - start;
#if MLF_PROFILE
  mlf_profile_stop();
#endif
  if (model->workspace != NULL) mlf_workspace_bind(NULL);
  if (status != MLF_OK) {
    fail_runtime(dev, seq, request, status, model->executor, 0);
    return;
  }
  size_t high_water = model->workspace != NULL ? mlf_workspace_high_water(model->workspace) : 0;
#if MLF_WORKSPACE_MARKS
  const mlf_workspace* ws = model->workspace;
  uint32_t marks = ws != NULL && ws->marks != NULL ? ws->num_marks : 0;
  if (marks > RUN_MARKS_MAX) marks = RUN_MARKS_MAX;
  tx_begin(dev, MLF_MSG_RUN | MLF_MSG_REPLY, seq, RUN_REPLY_BYTES + 4u + 4u * (size_t)marks);
#else
  tx_begin(dev, MLF_MSG_RUN | MLF_MSG_REPLY, seq, RUN_REPLY_BYTES);
#endif
  tx_u32(dev, (uint32_t)status);
  tx_u64(dev, ticks);
  tx_u64(dev, mlf_platform_tick_hz());
  tx_u32(dev, u32_or_unknown(high_water));
  tx_u32(dev, u32_or_unknown(mlf_platform_stack_used()));
#if MLF_WORKSPACE_MARKS
  tx_u32(dev, marks);
  for (uint32_t i = 0; i < marks; ++i) tx_u32(dev, ws->marks[i]);
#endif
  tx_end(dev);
}

static void on_get_output(mlf_device* dev, uint8_t seq, const uint8_t* payload, size_t length) {
  const uint8_t request = MLF_MSG_GET_OUTPUT;
  if (length != 12) {
    fail(dev, seq, request, MLF_DEVICE_ERR_BAD_PAYLOAD);
    return;
  }
  size_t nbytes;
  const uint8_t* tensor = tensor_for(dev, seq, request, payload, 1, &nbytes);
  if (tensor == NULL || !ARENA_HELD(dev, seq, request, payload, 0)) return;
  uint32_t offset = get_u32(payload + 4);
  uint32_t max_length = get_u32(payload + 8);
  if (offset > nbytes) {
    fail_range(dev, seq, request, offset, 0, nbytes);
    return;
  }
  size_t count = nbytes - offset;
  if (count > max_length) count = max_length;
  if (count > MLF_FRAME_MAX_PAYLOAD) count = MLF_FRAME_MAX_PAYLOAD;
  tx_begin(dev, MLF_MSG_GET_OUTPUT | MLF_MSG_REPLY, seq, count);
  tx_bytes(dev, tensor + offset, count);
  tx_end(dev);
}

static void on_exit(mlf_device* dev, uint8_t seq, const uint8_t* payload, size_t length) {
  if (length != 4) {
    fail(dev, seq, MLF_MSG_EXIT, MLF_DEVICE_ERR_BAD_PAYLOAD);
    return;
  }
  dev->exit_status = (int32_t)get_u32(payload);
  dev->exit_requested = 1;
  tx_begin(dev, MLF_MSG_EXIT | MLF_MSG_REPLY, seq, 0);
  tx_end(dev);
}

#if MLF_PROFILE
/* PROFILE: the calls recorded during the last RUN, from record `first` on, as many as fit
 * one reply (docs/protocol.md 2.4). */
static void on_profile(mlf_device* dev, uint8_t seq, const uint8_t* payload, size_t length) {
  if (length != 4) {
    fail(dev, seq, MLF_MSG_PROFILE, MLF_DEVICE_ERR_BAD_PAYLOAD);
    return;
  }
  uint32_t first = get_u32(payload);
  uint32_t count = mlf_profile_count();
  if (first > count) {
    fail_range(dev, seq, MLF_MSG_PROFILE, first, 0, count);
    return;
  }
  uint32_t n = count - first;
  uint32_t room = (MLF_FRAME_MAX_PAYLOAD - MLF_PROFILE_REPLY_HEADER) / MLF_PROFILE_RECORD_BYTES;
  if (n > room) n = room;
  tx_begin(dev, MLF_MSG_PROFILE | MLF_MSG_REPLY, seq,
           MLF_PROFILE_REPLY_HEADER + (size_t)n * MLF_PROFILE_RECORD_BYTES);
  tx_u32(dev, count);
  tx_u32(dev, mlf_profile_dropped());
  tx_u64(dev, (uint64_t)mlf_profile_anchor());
  tx_u32(dev, first);
  tx_u32(dev, n);
  const mlf_profile_record* records = mlf_profile_records();
  for (uint32_t i = first; i < first + n; ++i) {
    tx_u64(dev, (uint64_t)records[i].function);
    tx_u64(dev, records[i].enter_ticks);
    tx_u64(dev, records[i].exit_ticks);
    tx_u32(dev, records[i].workspace_bytes);
    tx_u32(dev, records[i].depth);
  }
  tx_end(dev);
}
#endif

static void dispatch(mlf_device* dev, const mlf_frame_event* ev) {
  switch (ev->type) {
    case MLF_MSG_HELLO:
      on_hello(dev, ev->seq);
      break;
    case MLF_MSG_DESCRIBE:
      on_describe(dev, ev->seq, ev->payload, ev->length);
      break;
    case MLF_MSG_SET_INPUT:
      on_set_input(dev, ev->seq, ev->payload, ev->length);
      break;
    case MLF_MSG_RUN:
      on_run(dev, ev->seq, ev->payload, ev->length);
      break;
    case MLF_MSG_GET_OUTPUT:
      on_get_output(dev, ev->seq, ev->payload, ev->length);
      break;
    case MLF_MSG_EXIT:
      on_exit(dev, ev->seq, ev->payload, ev->length);
      break;
#if MLF_PROFILE
    case MLF_MSG_PROFILE:
      on_profile(dev, ev->seq, ev->payload, ev->length);
      break;
#endif
    default:
      fail(dev, ev->seq, ev->type, MLF_DEVICE_ERR_UNKNOWN_TYPE);
      break;
  }
}

/* ---- the loop ------------------------------------------------------------------------ */

/* 1 when every model has a name. */
static int models_named(const mlf_device_config* config) {
  for (uint32_t i = 0; i < config->num_models; ++i) {
    if (config->models[i].name == NULL) return 0;
  }
  return 1;
}

int mlf_device_init(mlf_device* dev, const mlf_device_config* config) {
  memset(dev, 0, sizeof(*dev));
  dev->config = config;
  /* The length field has 16 bits; a board may well state 64 KiB. */
  if (config != NULL) {
    dev->max_payload =
        config->max_payload < MLF_FRAME_MAX_PAYLOAD ? config->max_payload : MLF_FRAME_MAX_PAYLOAD;
  }
  /* One message for every rule (the header states them): text is flash on every firmware. */
  if (config == NULL || config->models == NULL || config->num_models == 0 ||
      config->num_models > 0xFFFFu || config->max_payload < 16 || !models_named(config) ||
      mlf_frame_decoder_init(&dev->rx, config->rx_buffer, config->rx_buffer_size,
                             dev->max_payload) != 0) {
    mlf_platform_log("mlf_device: bad configuration (the rules: mlf_device_config, mlf_device.h)");
    return -1;
  }
  /* In 32 bits (tick rates above 4 GHz are clamped): a 64-bit division would pull the C
   * library's long division into every Cortex-M firmware for this one line. */
  uint64_t hz64 = mlf_platform_tick_hz();
  uint32_t hz = hz64 > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)hz64;
  uint32_t ms = config->idle_reset_ms < 60000u ? (uint32_t)config->idle_reset_ms : 60000u;
  dev->idle_ticks = hz >= 1000u ? (uint64_t)(hz / 1000u) * ms : hz * ms / 1000u;
  return 0;
}

void mlf_device_announce(mlf_device* dev) { on_hello(dev, 0); }

static void reject_frame(mlf_device* dev, const mlf_frame_event* ev) {
  if (ev->kind == MLF_FRAME_BAD_CRC || ev->kind == MLF_FRAME_TRUNCATED) {
    /* A cut-short frame (1: bytes were lost on the line) is, to the host, a damaged request
     * to be resent, like one with a bad CRC (0). */
    fail_with(dev, ev->seq, ev->type, MLF_DEVICE_ERR_BAD_CRC, 1, ev->kind == MLF_FRAME_TRUNCATED, 0,
              0);
  } else {
    size_t limit = mlf_frame_payload_limit(ev->type);
    fail_with(dev, ev->seq, ev->type, MLF_DEVICE_ERR_TOO_LONG, 2, (uint32_t)ev->length,
              limit < dev->max_payload ? (uint32_t)limit : dev->max_payload, 0);
  }
}

int mlf_device_process(mlf_device* dev) {
  mlf_frame_event ev;
  while (!dev->exit_requested) {
    mlf_frame_event_kind kind = mlf_frame_decoder_next(&dev->rx, &ev);
    if (kind == MLF_FRAME_NONE) break;
    /* Only requests are answered: a reply looped back must not start an endless echo. */
    if (ev.type & MLF_MSG_REPLY) continue;
    if (kind == MLF_FRAME_OK) {
      dispatch(dev, &ev);
    } else {
      reject_frame(dev, &ev);
    }
  }
  return dev->exit_requested;
}

int mlf_device_receive(mlf_device* dev) {
  size_t room;
  uint8_t* space = mlf_frame_decoder_space(&dev->rx, &room);
  uint64_t listening_since = mlf_platform_ticks();
  size_t got = mlf_platform_read(space, room);
  if (got == 0) return -1;
  if (dev->idle_ticks != 0 && mlf_platform_ticks() - listening_since > dev->idle_ticks) {
    /* Senders never pause inside a frame: a frame start held from before the silence that is
     * not whole by now was cut short. Its bytes are rescanned, not dropped, so a request
     * that arrived right behind a truncated one or behind garbage is still answered. */
    mlf_frame_decoder_idle(&dev->rx);
  }
  mlf_frame_decoder_commit(&dev->rx, got);
  return mlf_device_process(dev);
}

int mlf_device_idle(mlf_device* dev) {
  mlf_frame_decoder_idle(&dev->rx);
  return mlf_device_process(dev);
}

int mlf_device_feed(mlf_device* dev, const uint8_t* data, size_t n) {
  while (n > 0 && !dev->exit_requested) {
    size_t taken = mlf_frame_decoder_push(&dev->rx, data, n);
    if (taken == 0) break; /* cannot happen: a held incomplete frame always leaves room */
    data += taken;
    n -= taken;
    mlf_device_process(dev);
  }
  return dev->exit_requested;
}

int32_t mlf_device_exit_status(const mlf_device* dev) { return dev->exit_status; }

int mlf_device_serve(const mlf_device_config* config) {
  mlf_device dev;
  if (mlf_device_init(&dev, config) != 0) return MLF_DEVICE_EXIT_BAD_CONFIG;
  mlf_device_announce(&dev);
  for (;;) {
    int result = mlf_device_receive(&dev);
    if (result < 0) return 0;
    if (result > 0) return (int)dev.exit_status;
  }
}
