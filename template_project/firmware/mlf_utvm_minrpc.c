/*
 * mlf_utvm_minrpc.c — TVM's MinRPC server (see mlf_utvm.h, docs/protocol.md).
 *
 * A request: u64 length, i32 code, body. Argument sequences are decoded into ut->args:
 * numbers and handles as TVMValues, strings and bytes in place in the receive buffer
 * (NUL-terminated there afterwards), tensors into DLTensors whose shapes are copied to
 * 8-byte-aligned scratch (operators read them as int64_t). Every request is answered with
 * one Return, CopyAck or Exception, except Shutdown and an empty packet; a malformed one
 * gets an Exception naming what was wrong, where TVM's device would spin forever.
 */
#include <string.h>

#include "mlf_utvm.h"

enum {
  RPC_SHUTDOWN = 1,
  RPC_INIT_SERVER = 2,
  RPC_CALL_FUNC = 3,
  RPC_RETURN = 4,
  RPC_EXCEPTION = 5,
  RPC_COPY_FROM_REMOTE = 6,
  RPC_COPY_TO_REMOTE = 7,
  RPC_COPY_ACK = 8,
  SYS_GET_GLOBAL_FUNC = 9,
  SYS_FREE_HANDLE = 10,
  SYS_SET_DEVICE = 11,
  SYS_GET_ATTR = 12,
  SYS_ALLOC_DATA = 13,
  SYS_FREE_DATA = 14,
  SYS_STREAM_SYNC = 15,
  SYS_COPY_AMONG_REMOTE = 16,
  SYS_ALLOC_DATA_WITH_SCOPE = 17,
  SYS_CREATE_STREAM = 18,
  SYS_FREE_STREAM = 19,
  SYS_SET_STREAM = 20
};

#define MAX_NDIM 32

/* ---- reading --------------------------------------------------------------------------- */

typedef struct {
  uint8_t* at;
  uint32_t left;
  int bad;
} reader;

static uint64_t rd(reader* r, uint32_t n) {
  uint64_t v = 0;
  if (r->bad || r->left < n) {
    r->bad = 1;
    return 0;
  }
  for (uint32_t i = 0; i < n; ++i) v |= (uint64_t)r->at[i] << (8u * i);
  r->at += n;
  r->left -= n;
  return v;
}

static void* to_pointer(uint64_t address) {
  /* An address this device cannot hold becomes one no check accepts. */
  return (void*)(uintptr_t)(address > (uint64_t)UINTPTR_MAX ? UINTPTR_MAX : address);
}

static DLDataType rd_dtype(reader* r) {
  DLDataType t;
  t.code = (uint8_t)rd(r, 1);
  t.bits = (uint8_t)rd(r, 1);
  t.lanes = (uint16_t)rd(r, 2);
  return t;
}

/* A tensor's fields from data to byte_offset (CopyTo/FromRemote use the same layout). */
static const char* rd_tensor(mlf_utvm* ut, reader* r, DLTensor* t) {
  t->data = to_pointer(rd(r, 8));
  t->device.device_type = (DLDeviceType)(int32_t)rd(r, 4);
  t->device.device_id = (int32_t)rd(r, 4);
  uint64_t ndim = rd(r, 4);
  t->dtype = rd_dtype(r);
  if (r->bad) return "truncated tensor";
  if (ndim > MAX_NDIM || ndim > MLF_UTVM_MAX_DIMS - ut->args.num_dims) return "too many dimensions";
  t->ndim = (int32_t)ndim;
  t->shape = ut->args.dims + ut->args.num_dims;
  t->strides = NULL;
  for (uint32_t d = 0; d < ndim; ++d) t->shape[d] = (int64_t)rd(r, 8);
  ut->args.num_dims += (uint32_t)ndim;
  t->byte_offset = rd(r, 8);
  return r->bad ? "truncated tensor" : NULL;
}

/* The argument sequence that ends the request. NULL, or what is wrong. */
static const char* rd_args(mlf_utvm* ut, reader* r) {
  mlf_utvm_args* a = &ut->args;
  a->num = 0;
  a->num_dims = 0;
  uint64_t num = rd(r, 4);
  if (r->bad) return "truncated arguments";
  if (num > MLF_UTVM_MAX_ARGS) return "too many arguments";
  for (uint32_t i = 0; i < num; ++i) a->codes[i] = (int)(int32_t)rd(r, 4);
  if (r->bad) return "truncated arguments";
  a->num = (uint32_t)num;
  for (uint32_t i = 0; i < num; ++i) {
    TVMValue* v = &a->values[i];
    a->lens[i] = 0;
    switch (a->codes[i]) {
      case kDLInt:
      case kDLUInt:
      case kDLFloat:
      case kTVMOpaqueHandle:
      case kTVMModuleHandle:
      case kTVMPackedFuncHandle: {
        uint64_t bits = rd(r, 8);
        memcpy(&v->v_int64, &bits, sizeof(bits)); /* a handle's low half is v_handle (LE) */
        break;
      }
      case kTVMNullptr:
        v->v_int64 = 0;
        break;
      case kTVMDataType:
        v->v_type = rd_dtype(r);
        (void)rd(r, 4); /* padding */
        break;
      case kDLDevice:
        v->v_device.device_type = (DLDeviceType)(int32_t)rd(r, 4);
        v->v_device.device_id = (int32_t)rd(r, 4);
        break;
      case kTVMDLTensorHandle: {
        const char* why = rd_tensor(ut, r, &a->tensors[i]);
        if (why != NULL) return why;
        v->v_handle = &a->tensors[i];
        break;
      }
      case kTVMStr:
      case kTVMBytes: {
        uint64_t len = rd(r, 8);
        if (r->bad || len > r->left) return "truncated string";
        v->v_str = (const char*)r->at;
        a->lens[i] = (uint32_t)len;
        r->at += len;
        r->left -= (uint32_t)len;
        break;
      }
      default:
        return "unsupported argument type code";
    }
    if (r->bad) return "truncated arguments";
  }
  if (r->left != 0) return "bytes after the arguments";
  /* Strings end with a NUL now (the byte after each is already decoded; the receive
   * buffer has one spare byte after the packet). */
  for (uint32_t i = 0; i < num; ++i) {
    if (a->codes[i] == kTVMStr || a->codes[i] == kTVMBytes)
      ((char*)a->values[i].v_str)[a->lens[i]] = 0;
  }
  return NULL;
}

/* ---- replies --------------------------------------------------------------------------- */

static void put(mlf_utvm* ut, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i, v >>= 8) {
    if (ut->reply_len < sizeof(ut->reply)) ut->reply[ut->reply_len] = (uint8_t)v;
    ++ut->reply_len;
  }
}

static void start(mlf_utvm* ut, int32_t code) {
  ut->reply_len = 8; /* the length, filled in by finish() */
  put(ut, (uint32_t)code, 4);
}

/* A Return (4) with these value type codes; the values follow. */
static void start_return(mlf_utvm* ut, uint32_t num, int c0, int c1, int c2) {
  const int codes[3] = {c0, c1, c2};
  start(ut, RPC_RETURN);
  put(ut, num, 4);
  for (uint32_t i = 0; i < num; ++i) put(ut, (uint32_t)codes[i], 4);
}

static int finish(mlf_utvm* ut, const void* tail, size_t tail_len) {
  size_t head = ut->reply_len;
  if (head > sizeof(ut->reply) || 3 + head + tail_len > MLF_UTVM_HOST_MAX_PAYLOAD) return -1;
  uint64_t length = head - 8 + tail_len;
  for (int i = 0; i < 8; ++i) ut->reply[i] = (uint8_t)(length >> (8 * i));
  mlf_utvm_session_send(ut, ut->reply, head, (const uint8_t*)tail, tail_len);
  return 0;
}

void mlf_utvm_exception(mlf_utvm* ut, const char* message) {
  size_t len = message != NULL ? strlen(message) : 0;
  if (len > 1024) len = 1024;
  start(ut, RPC_EXCEPTION);
  put(ut, 1, 4);
  put(ut, kTVMStr, 4);
  put(ut, len, 8);
  (void)finish(ut, message, len);
}

void mlf_utvm_return(mlf_utvm* ut, int type_code, int wire_code, uint64_t bits) {
  start_return(ut, 2, kDLInt, wire_code, 0);
  put(ut, (uint64_t)(int64_t)type_code, 8);
  if (wire_code != kTVMNullptr) put(ut, bits, 8);
  (void)finish(ut, NULL, 0);
}

int mlf_utvm_return_blob(mlf_utvm* ut, int type_code, const void* data, size_t len) {
  start_return(ut, 2, kDLInt, type_code, 0);
  put(ut, (uint64_t)type_code, 8);
  put(ut, len, 8);
  return finish(ut, data, len);
}

static void put_tensor(mlf_utvm* ut, const DLTensor* t) {
  put(ut, (uintptr_t)t->data, 8);
  put(ut, (uint32_t)t->device.device_type, 4);
  put(ut, (uint32_t)t->device.device_id, 4);
  put(ut, (uint32_t)t->ndim, 4);
  put(ut, t->dtype.code, 1);
  put(ut, t->dtype.bits, 1);
  put(ut, t->dtype.lanes, 2);
  for (int32_t d = 0; d < t->ndim; ++d) put(ut, (uint64_t)t->shape[d], 8);
  put(ut, t->byte_offset, 8);
}

void mlf_utvm_return_array(mlf_utvm* ut, const DLTensor* t, uint64_t handle) {
  start_return(ut, 3, kDLInt, kTVMDLTensorHandle, kTVMOpaqueHandle);
  put(ut, kTVMNDArrayHandle, 8);
  put_tensor(ut, t);
  put(ut, handle, 8);
  if (finish(ut, NULL, 0) != 0) mlf_utvm_exception(ut, "array too large to describe");
}

/* Syscall replies: one value, a handle, or nothing. */
static void reply_void(mlf_utvm* ut) {
  start_return(ut, 1, kTVMNullptr, 0, 0);
  (void)finish(ut, NULL, 0);
}

static void reply_handle(mlf_utvm* ut, uint64_t handle) {
  start_return(ut, 1, kTVMOpaqueHandle, 0, 0);
  put(ut, handle, 8);
  (void)finish(ut, NULL, 0);
}

/* ---- copies ---------------------------------------------------------------------------- */

static void copy(mlf_utvm* ut, reader* r, int to_remote) {
  DLTensor t;
  ut->args.num_dims = 0;
  const char* why = rd_tensor(ut, r, &t);
  uint64_t nbytes = rd(r, 8);
  if (why != NULL || r->bad) {
    mlf_utvm_exception(ut, "truncated copy request");
    return;
  }
  uint64_t address = (uint64_t)(uintptr_t)t.data + t.byte_offset;
  if (address < t.byte_offset || !mlf_utvm_memory_ok(ut, address, nbytes)) {
    mlf_utvm_exception(ut, "copy outside device memory");
    return;
  }
  uint8_t* memory = (uint8_t*)(uintptr_t)address;
  if (to_remote) {
    if (nbytes != r->left) {
      mlf_utvm_exception(ut, "copy size differs from the data sent");
      return;
    }
    memcpy(memory, r->at, (size_t)nbytes);
    reply_void(ut);
    return;
  }
  if (r->left != 0 || 3 + 12 + nbytes > MLF_UTVM_HOST_MAX_PAYLOAD) {
    mlf_utvm_exception(ut, r->left != 0 ? "bytes after the copy request" : "copy too large");
    return;
  }
  start(ut, RPC_COPY_ACK);
  (void)finish(ut, memory, (size_t)nbytes);
}

/* ---- syscalls -------------------------------------------------------------------------- */

/* Whether the arguments have these type codes, one letter each ('i' int/uint, 'h' handle
 * or null, 'd' device, 't' tensor, 's' string, 'y' dtype, 'n' null or string). */
static int args_are(const mlf_utvm_args* a, const char* kinds) {
  static const struct {
    char kind;
    int8_t code, other; /* -1: no other */
  } kKinds[] = {{'i', kDLInt, kDLUInt},     {'h', kTVMOpaqueHandle, kTVMNullptr},
                {'d', kDLDevice, -1},       {'t', kTVMDLTensorHandle, -1},
                {'s', kTVMStr, -1},         {'y', kTVMDataType, -1},
                {'n', kTVMNullptr, kTVMStr}};
  uint32_t n = 0;
  for (; kinds[n] != '\0'; ++n) {
    if (n >= a->num) return 0;
    int ok = 0;
    for (size_t k = 0; k < sizeof(kKinds) / sizeof(kKinds[0]); ++k) {
      ok |= kKinds[k].kind == kinds[n] &&
            (a->codes[n] == kKinds[k].code || a->codes[n] == kKinds[k].other);
    }
    if (!ok) return 0;
  }
  return n == a->num;
}

static void alloc_reply(mlf_utvm* ut, uint64_t nbytes, uint64_t alignment) {
  void* p = mlf_utvm_alloc(ut, nbytes, alignment);
  if (p == NULL) {
    mlf_utvm_exception(
        ut, "device memory exhausted (project option device_memory_bytes) or bad alignment");
  } else {
    reply_handle(ut, (uint64_t)(uintptr_t)p);
  }
}

static void syscall(mlf_utvm* ut, int32_t code) {
  mlf_utvm_args* a = &ut->args;
  TVMValue* v = a->values;
  switch (code) {
    case SYS_GET_GLOBAL_FUNC:
      if (!args_are(a, "s")) break;
      reply_handle(ut, mlf_utvm_global_lookup(v[0].v_str, a->lens[0]));
      return;
    case SYS_FREE_HANDLE:
      if (!args_are(a, "hi")) break;
      if (mlf_utvm_free_handle(ut, (uint64_t)v[0].v_int64, v[1].v_int64) != 0) {
        mlf_utvm_exception(ut, "handle already freed");
      } else {
        reply_void(ut);
      }
      return;
    case SYS_SET_DEVICE:
      mlf_utvm_exception(ut, "SetDevice not supported");
      return;
    case SYS_GET_ATTR:
      mlf_utvm_exception(ut, "GetAttr not supported");
      return;
    case SYS_ALLOC_DATA:
      if (!args_are(a, "diiy")) break;
      alloc_reply(ut, (uint64_t)v[1].v_int64, (uint64_t)v[2].v_int64);
      return;
    case SYS_ALLOC_DATA_WITH_SCOPE: {
      if (!args_are(a, "tn")) break;
      const DLTensor* t = &a->tensors[0];
      uint64_t lane = ((uint64_t)t->dtype.bits * t->dtype.lanes + 7u) / 8u;
      alloc_reply(ut, mlf_utvm_tensor_bytes(t), lane > 64 ? lane : 64);
      return;
    }
    case SYS_FREE_DATA:
      if (!args_are(a, "dh")) break;
      if (mlf_utvm_free(ut, (uint64_t)v[1].v_int64) != 0) {
        mlf_utvm_exception(ut, "not a device allocation");
      } else {
        reply_void(ut);
      }
      return;
    case SYS_COPY_AMONG_REMOTE: {
      if (!args_are(a, "tth")) break;
      DLTensor* from = &a->tensors[0];
      DLTensor* to = &a->tensors[1];
      uint64_t nbytes = mlf_utvm_tensor_bytes(from);
      if (mlf_utvm_tensor_ok(ut, from) != 0 || mlf_utvm_tensor_ok(ut, to) != 0 ||
          nbytes != mlf_utvm_tensor_bytes(to)) {
        mlf_utvm_exception(ut, "copy outside device memory");
        return;
      }
      memmove(to->data, from->data, (size_t)nbytes);
      reply_void(ut);
      return;
    }
    case SYS_CREATE_STREAM:
      reply_handle(ut, 0); /* one stream: the default */
      return;
    case SYS_STREAM_SYNC:
    case SYS_FREE_STREAM:
    case SYS_SET_STREAM:
      reply_void(ut); /* everything is synchronous */
      return;
    default:
      mlf_utvm_exception(ut, "Syscall not recognized");
      return;
  }
  mlf_utvm_exception(ut, "bad arguments");
}

/* ---- requests -------------------------------------------------------------------------- */

void mlf_utvm_minrpc_request(mlf_utvm* ut, uint8_t* body, uint32_t len) {
  reader r = {body, len, 0};
  uint64_t length = rd(&r, 8);
  if (r.bad || length == 0) return; /* nothing asked */
  if (length != r.left || length < 4) {
    mlf_utvm_exception(ut, "packet length disagrees with the message");
    return;
  }
  int32_t code = (int32_t)rd(&r, 4);
  uint64_t fn = 0;
  switch (code) {
    case RPC_SHUTDOWN:
      ut->shutdown = 1;
      return;
    case RPC_INIT_SERVER:
      reply_void(ut); /* the version string is not compared (MinRPC does not either) */
      return;
    case RPC_COPY_FROM_REMOTE:
    case RPC_COPY_TO_REMOTE:
      copy(ut, &r, code == RPC_COPY_TO_REMOTE);
      return;
    case RPC_CALL_FUNC:
      fn = rd(&r, 8);
      break;
    case RPC_RETURN:
    case RPC_EXCEPTION:
    case RPC_COPY_ACK:
      mlf_utvm_exception(ut, "a reply code is not a request");
      return;
    default:
      if (code < SYS_GET_GLOBAL_FUNC) {
        mlf_utvm_exception(ut, "unknown RPC code");
        return;
      }
      break;
  }
  const char* why = r.bad ? "truncated call" : rd_args(ut, &r);
  if (why != NULL) {
    mlf_utvm_exception(ut, why);
  } else if (code == RPC_CALL_FUNC) {
    mlf_utvm_call(ut, fn);
  } else {
    syscall(ut, code);
  }
}
