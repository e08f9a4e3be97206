/*
 * mlf_params.c — TVM's params blob (a little-endian, packed name→tensor dict).
 *
 * Every field is read byte by byte: the blob's fields sit at arbitrary offsets, so casting
 * its pointer to wider types would fault on Cortex-M0 and is undefined behaviour anywhere.
 */
#include "mlf_internal.h"

#define LIST_MAGIC 0xF7E58D4F05049CB7ull
#define TENSOR_MAGIC 0xDD5E40F096B4A13Full

uint64_t mlf_read_u64(const uint8_t* p) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = value << 8 | p[i];
  return value;
}

int64_t mlf_read_i64(const uint8_t* p) { return (int64_t)mlf_read_u64(p); }

static uint32_t read_u32(const uint8_t* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

typedef struct {
  const uint8_t* pos;
  const uint8_t* end;
} reader;

/* Takes n bytes, or returns NULL when fewer remain. */
static const uint8_t* take(reader* r, uint64_t n) {
  if (n > (uint64_t)(r->end - r->pos)) return NULL;
  const uint8_t* at = r->pos;
  r->pos += n;
  return at;
}

static int take_u64(reader* r, uint64_t* value) {
  const uint8_t* at = take(r, 8);
  if (at != NULL) *value = mlf_read_u64(at);
  return at != NULL;
}

/* Reads one tensor record; out->name is left alone. Returns a static reason or NULL. */
static const char* read_tensor(reader* r, mlf_param* out) {
  uint64_t magic, reserved;
  const uint8_t* head;
  if (!take_u64(r, &magic) || !take_u64(r, &reserved) || (head = take(r, 16)) == NULL) {
    return MLF_TEXT("truncated tensor header");
  }
  if (magic != TENSOR_MAGIC) return MLF_TEXT("bad tensor magic");
  if (read_u32(head) != kDLCPU) return MLF_TEXT("tensor not on the CPU");
  out->ndim = (int32_t)read_u32(head + 8);
  out->dtype.code = head[12];
  out->dtype.bits = head[13];
  out->dtype.lanes = (uint16_t)(head[14] | head[15] << 8);
  if (out->ndim < 0 || out->dtype.bits == 0 || out->dtype.lanes == 0)
    return MLF_TEXT("bad ndim or dtype");
  if ((out->shape = take(r, (uint64_t)out->ndim * 8)) == NULL) return MLF_TEXT("truncated shape");
  /* Elements * element bytes; like graph tensors, params stay below 4 GiB (which also keeps
   * the product from overflowing without a 64-bit division). */
  uint64_t expected = mlf_dtype_bytes(out->dtype);
  for (int32_t d = 0; d < out->ndim; ++d) {
    uint64_t dim = mlf_read_u64(out->shape + 8 * d); /* negative: huge, refused */
    if (dim > UINT32_MAX || (expected *= dim) > UINT32_MAX) return MLF_TEXT("bad shape or size");
  }
  if (!take_u64(r, &out->nbytes)) return MLF_TEXT("truncated tensor size");
  if (out->nbytes != expected) return MLF_TEXT("data size disagrees with shape and dtype");
  if ((out->data = take(r, out->nbytes)) == NULL) return MLF_TEXT("truncated tensor data");
  return NULL;
}

static mlf_status bad_params(mlf_error* err, const reader* r, const uint8_t* blob,
                             const char* what) {
  mlf_fail(err, MLF_ERR_PARAMS, what, NULL, 0);
  if (err != NULL && err->status == MLF_ERR_PARAMS) err->offset = (uint32_t)(r->pos - blob);
  return MLF_ERR_PARAMS;
}

mlf_status mlf_params_open(const void* blob, size_t len, mlf_params_iter* it, mlf_error* err) {
  const uint8_t* base = (const uint8_t*)blob;
  reader r = {base, base + len};
  uint64_t magic, reserved, count, tensor_count;
  if (blob == NULL || it == NULL)
    return mlf_fail(err, MLF_ERR_ARGUMENT, MLF_TEXT("no params"), NULL, 0);
  if (!take_u64(&r, &magic) || !take_u64(&r, &reserved) || !take_u64(&r, &count)) {
    return bad_params(err, &r, base, MLF_TEXT("truncated header"));
  }
  if (magic != LIST_MAGIC) return bad_params(err, &r, base, MLF_TEXT("bad magic"));
  it->names = r.pos;
  /* Each record consumes at least 8 bytes, so a huge count fails on truncation quickly. */
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t name_len;
    if (!take_u64(&r, &name_len) || name_len > UINT32_MAX || take(&r, name_len) == NULL) {
      return bad_params(err, &r, base, MLF_TEXT("truncated name"));
    }
  }
  if (!take_u64(&r, &tensor_count))
    return bad_params(err, &r, base, MLF_TEXT("truncated tensor count"));
  if (tensor_count != count)
    return bad_params(err, &r, base, MLF_TEXT("name and tensor counts differ"));
  it->tensors = r.pos;
  for (uint64_t i = 0; i < count; ++i) {
    mlf_param param;
    const char* problem = read_tensor(&r, &param);
    if (problem != NULL) return bad_params(err, &r, base, problem);
  }
  it->end = r.pos;
  it->remaining = count;
  return MLF_OK;
}

int mlf_params_next(mlf_params_iter* it, mlf_param* out) {
  if (it->remaining == 0) return 0;
  --it->remaining;
  out->name.len = (uint32_t)mlf_read_u64(it->names);
  out->name.str = (const char*)it->names + 8;
  it->names += 8 + out->name.len;
  /* Validated by mlf_params_open(): the record is complete and consistent. */
  reader r = {it->tensors, it->end};
  read_tensor(&r, out);
  it->tensors = r.pos;
  return 1;
}
