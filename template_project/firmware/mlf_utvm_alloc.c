/*
 * mlf_utvm_alloc.c — the device memory TVM's host allocates (DevAllocData, tvm.nd.empty) in a
 * fixed arena, and the check every pointer from the host goes through.
 *
 * Blocks are kept in a table sorted by offset, apart from the memory they describe, so
 * that a pointer the host sends can be checked against the blocks actually handed out
 * (TVM's device takes any address on trust) and every block keeps TVM's 64-byte alignment
 * with no header in front of it. First fit; freeing leaves a gap the next fit can take.
 */
#include <string.h>

#include "mlf_utvm.h"

#define UNIT 64u
#define MAX_ALIGNMENT 4096u

void mlf_utvm_alloc_init(mlf_utvm* ut, uint8_t* arena, size_t size) {
  size_t skip = (size_t)(-(uintptr_t)arena & (UNIT - 1));
  ut->arena_base = arena + (skip < size ? skip : 0);
  ut->arena_size = skip < size ? size - skip : 0;
  if (ut->arena_size > UINT32_MAX) ut->arena_size = UINT32_MAX & ~(size_t)(UNIT - 1);
  ut->num_blocks = 0;
}

void* mlf_utvm_alloc(mlf_utvm* ut, uint64_t nbytes, uint64_t alignment) {
  if (alignment < UNIT) alignment = UNIT;
  if (alignment > MAX_ALIGNMENT || (alignment & (alignment - 1)) != 0) return NULL;
  if (nbytes > ut->arena_size || ut->num_blocks == MLF_UTVM_MAX_BLOCKS) return NULL;
  uint32_t size = (uint32_t)((nbytes + UNIT - 1) & ~(uint64_t)(UNIT - 1));
  if (size == 0) size = UNIT; /* every allocation has an address of its own */
  uintptr_t base = (uintptr_t)ut->arena_base;
  uint32_t end = 0; /* of the previous block */
  uint32_t i = 0;
  for (;; ++i) {
    uint32_t start =
        (uint32_t)(((base + end + alignment - 1) & ~(uintptr_t)(alignment - 1)) - base);
    uint32_t limit = i < ut->num_blocks ? ut->blocks[i].offset : (uint32_t)ut->arena_size;
    if (start >= end && start <= limit && size <= limit - start) {
      memmove(&ut->blocks[i + 1], &ut->blocks[i], (ut->num_blocks - i) * sizeof(ut->blocks[0]));
      ut->blocks[i].offset = start;
      ut->blocks[i].size = size;
      ++ut->num_blocks;
      return ut->arena_base + start;
    }
    if (i == ut->num_blocks) return NULL;
    end = ut->blocks[i].offset + ut->blocks[i].size;
  }
}

/* The block holding address, or num_blocks. */
static uint32_t block_at(const mlf_utvm* ut, uint64_t address) {
  uint64_t base = (uintptr_t)ut->arena_base;
  if (address < base || address - base >= ut->arena_size) return ut->num_blocks;
  uint32_t offset = (uint32_t)(address - base);
  uint32_t lo = 0, hi = ut->num_blocks;
  while (lo < hi) { /* the last block starting at or before offset */
    uint32_t mid = (lo + hi) / 2;
    if (ut->blocks[mid].offset <= offset) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo == 0) return ut->num_blocks;
  const mlf_utvm_block* b = &ut->blocks[lo - 1];
  return offset - b->offset < b->size ? lo - 1 : ut->num_blocks;
}

int mlf_utvm_free(mlf_utvm* ut, uint64_t address) {
  uint32_t i = block_at(ut, address);
  if (i == ut->num_blocks || (uintptr_t)ut->arena_base + ut->blocks[i].offset != address ||
      mlf_utvm_graph_owns(ut, ut->arena_base + ut->blocks[i].offset)) {
    return -1; /* a live graph executor's blocks go when the executor does */
  }
  --ut->num_blocks;
  memmove(&ut->blocks[i], &ut->blocks[i + 1], (ut->num_blocks - i) * sizeof(ut->blocks[0]));
  return 0;
}

static int inside(uint64_t address, uint64_t nbytes, const void* start, size_t size) {
  uint64_t s = (uintptr_t)start;
  return start != NULL && address >= s && address - s <= size && nbytes <= size - (address - s);
}

int mlf_utvm_executor_io_ok(mlf_executor* ex, uint64_t address, uint64_t nbytes) {
  mlf_tensor_info info;
  for (uint32_t k = 0; mlf_executor_input_info(ex, k, &info) == MLF_OK; ++k) {
    if (inside(address, nbytes, mlf_executor_input_data(ex, k), info.nbytes)) return 1;
  }
  for (uint32_t k = 0; mlf_executor_output_info(ex, k, &info) == MLF_OK; ++k) {
    if (inside(address, nbytes, mlf_executor_output_data(ex, k), info.nbytes)) return 1;
  }
  return 0;
}

int mlf_utvm_memory_ok(const mlf_utvm* ut, uint64_t address, uint64_t nbytes) {
  uint32_t i = block_at(ut, address);
  if (i < ut->num_blocks && !mlf_utvm_graph_owns(ut, ut->arena_base + ut->blocks[i].offset)) {
    const mlf_utvm_block* b = &ut->blocks[i];
    return inside(address, nbytes, ut->arena_base + b->offset, b->size);
  }
  /* An executor's inputs and outputs (the AOT and graph executor modules hand them out). */
  for (uint32_t m = 0; m < ut->config.num_models; ++m) {
    mlf_executor* ex = ut->config.models[m].executor;
    if (ex != NULL && mlf_utvm_executor_io_ok(ex, address, nbytes)) return 1;
  }
  return mlf_utvm_graph_io_ok(ut, address, nbytes);
}

uint64_t mlf_utvm_tensor_bytes(const DLTensor* t) {
  uint64_t count = 1;
  for (int32_t d = 0; d < t->ndim; ++d) {
    int64_t dim = t->shape[d];
    if (dim < 0 || (dim > 0 && count > UINT32_MAX / (uint64_t)dim)) return UINT64_MAX;
    count *= (uint64_t)dim;
  }
  uint64_t element = ((uint64_t)t->dtype.bits * t->dtype.lanes + 7u) / 8u;
  return count * element; /* both below 2^32 */
}

int mlf_utvm_tensor_ok(const mlf_utvm* ut, DLTensor* t) {
  uint64_t address = (uint64_t)(uintptr_t)t->data + t->byte_offset;
  uint64_t nbytes = mlf_utvm_tensor_bytes(t);
  if (address < t->byte_offset || !mlf_utvm_memory_ok(ut, address, nbytes)) return -1;
  t->data = (void*)(uintptr_t)address;
  t->byte_offset = 0;
  return 0;
}
