/*
 * mlf_params.c — TVM's params blob (a little-endian, packed name→tensor dict).
 *
 * The blob's fields sit at arbitrary offsets, so they are read with memcpy (or byte by byte
 * on big-endian targets): casting the blob's pointer to wider types would fault on
 * Cortex-M0 and is undefined behaviour anywhere.
 */
#include <string.h>

#include "mlf_internal.h"

#define LIST_MAGIC 0xF7E58D4F05049CB7ull
#define TENSOR_MAGIC 0xDD5E40F096B4A13Full

uint64_t mlf_read_u64(const uint8_t* p) {
  uint64_t value = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  memcpy(&value, p, sizeof(value));
#else
  for (int i = 7; i >= 0; --i) value = value << 8 | p[i];
#endif
  return value;
}

int64_t mlf_read_i64(const uint8_t* p) { return (int64_t)mlf_read_u64(p); }

typedef struct {
  const uint8_t* pos;
  const uint8_t* end;
} reader;

/* Takes n bytes, or returns NULL (and takes nothing) when fewer remain. */
static const uint8_t* take(reader* r, size_t n) {
  const uint8_t* at = r->pos;
  if (n > (size_t)(r->end - at)) return NULL;
  r->pos += n;
  return at;
}

/* Takes a little-endian uint64 into *value; 0 when truncated. */
static int take_u64(reader* r, uint64_t* value) {
  const uint8_t* at = take(r, 8);
  if (at != NULL) *value = mlf_read_u64(at);
  return at != NULL;
}

/* Reads one tensor record; out->name is left alone. Returns why it is bad, or MLF_WHY_NONE. */
static mlf_why read_tensor(reader* r, mlf_param* out) {
  /* magic, reserved, device type and id, ndim, dtype (code, bits, lanes) */
  const uint8_t* head = take(r, 32);
  if (head == NULL) return MLF_WHY_TENSOR_TRUNCATED;
  uint64_t desc = mlf_read_u64(head + 24);
  out->ndim = (int32_t)(uint32_t)desc;
  out->dtype = (DLDataType){(uint8_t)(desc >> 32), (uint8_t)(desc >> 40), (uint16_t)(desc >> 48)};
  if (mlf_read_u64(head) != TENSOR_MAGIC || (uint32_t)mlf_read_u64(head + 16) != kDLCPU ||
      out->ndim < 0 || out->dtype.bits == 0 || out->dtype.lanes == 0) {
    return MLF_WHY_TENSOR_HEADER;
  }
  /* ndim * 8 is only computed when it fits the remaining bytes */
  if ((uint32_t)out->ndim > (size_t)(r->end - r->pos) / 8 ||
      (out->shape = take(r, (size_t)out->ndim * 8)) == NULL) {
    return MLF_WHY_TENSOR_TRUNCATED;
  }
  /* Elements * element bytes; like graph tensors, params stay below 4 GiB (which also keeps
   * the product from overflowing without a 64-bit division). */
  uint64_t expected = mlf_dtype_bytes(out->dtype);
  for (int32_t d = 0; d < out->ndim; ++d) {
    uint64_t dim = mlf_read_u64(out->shape + 8 * d); /* negative: huge, refused */
    if (dim > UINT32_MAX || (expected *= dim) > UINT32_MAX) return MLF_WHY_TENSOR_SHAPE;
  }
  if (!take_u64(r, &out->nbytes) || out->nbytes != expected ||
      (out->data = take(r, (size_t)expected)) == NULL) {
    return MLF_WHY_TENSOR_DATA;
  }
  return MLF_WHY_NONE;
}

mlf_status mlf_params_open(const void* blob, size_t len, mlf_params_iter* it, mlf_error* err) {
  const uint8_t* base = (const uint8_t*)blob;
  reader r = {base, base + len};
  size_t count, i;
  mlf_param param;
  mlf_why problem = MLF_WHY_PARAMS_HEADER;
  if (blob == NULL || it == NULL) {
    return mlf_fail(err, MLF_ERR_ARGUMENT, MLF_WHY_NO_PARAMS);
  }
  /* magic, reserved, count; the names; the tensor count; the tensors */
  const uint8_t* head = take(&r, 24);
  if (head == NULL || mlf_read_u64(head) != LIST_MAGIC) goto bad;
  /* Each name record takes at least 8 bytes: a larger count cannot be right. */
  if (mlf_read_u64(head + 16) > len / 8) goto bad;
  count = (size_t)mlf_read_u64(head + 16);
  it->names = r.pos;
  for (i = 0; i <= count; ++i) {
    uint64_t value;
    if (!take_u64(&r, &value)) goto bad;
    if (i == count ? value != count : value > len || take(&r, (size_t)value) == NULL) goto bad;
  }
  it->tensors = r.pos;
  for (i = 0; i < count; ++i) {
    if ((problem = read_tensor(&r, &param)) != MLF_WHY_NONE) goto bad;
  }
  it->end = r.pos;
  it->remaining = count;
  return MLF_OK;
bad:
  mlf_fail(err, MLF_ERR_PARAMS, problem);
  if (err != NULL && err->status == MLF_ERR_PARAMS) err->offset = (uint32_t)(r.pos - base);
  return MLF_ERR_PARAMS;
}

int mlf_params_next(mlf_params_iter* it, mlf_param* out) {
  if (it->remaining == 0) return 0;
  --it->remaining;
  /* Validated by mlf_params_open(): the records are complete and consistent. */
  out->name.len = (uint32_t)mlf_read_u64(it->names);
  out->name.str = (const char*)it->names + 8;
  it->names += 8 + out->name.len;
  reader r = {it->tensors, it->end};
  read_tensor(&r, out);
  it->tensors = r.pos;
  return 1;
}
