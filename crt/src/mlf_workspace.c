/*
 * mlf_workspace.c — TVMBackendAllocWorkspace/FreeWorkspace as a LIFO stack.
 *
 * TVM's C code frees workspace blocks in strict reverse order of allocation, so a bump
 * pointer that free() moves back is enough: no headers, no fragmentation, no search.
 */
#include "mlf_internal.h"

/* The workspace TVMBackendAllocWorkspace() draws from. Process-wide because TVM's ABI passes
 * no context to it; bound by the firmware with mlf_workspace_bind(). */
static mlf_workspace* g_workspace;

static size_t align_up(size_t value) { return MLF_ALIGN_UP(value, MLF_STORAGE_ALIGN); }

mlf_status mlf_workspace_init(mlf_workspace* ws, void* mem, size_t size) {
  if (ws == NULL || (mem == NULL && size != 0)) return MLF_ERR_ARGUMENT;
  /* Start at the first 64-byte boundary inside mem; the bytes before it are lost. */
  size_t skip = (size_t)(-(uintptr_t)mem & (MLF_STORAGE_ALIGN - 1));
  ws->base = (uint8_t*)mem + (skip < size ? skip : 0);
  ws->size = skip < size ? size - skip : 0;
  ws->top = 0;
  ws->high_water = 0;
  ws->refused = 0;
  return MLF_OK;
}

void mlf_workspace_bind(mlf_workspace* ws) { g_workspace = ws; }

size_t mlf_workspace_high_water(const mlf_workspace* ws) { return ws ? ws->high_water : 0; }

void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes, int dtype_code_hint,
                               int dtype_bits_hint) {
  (void)device_type;
  (void)device_id;
  (void)dtype_code_hint;
  (void)dtype_bits_hint;
  mlf_workspace* ws = g_workspace;
  if (ws == NULL) {
    TVMAPISetLastError(mlf_why_text(MLF_WHY_NO_WORKSPACE));
    return NULL;
  }
  size_t start = align_up(ws->top);
  if (start > ws->size || nbytes > (uint64_t)(ws->size - start)) {
    ++ws->refused;
    TVMAPISetLastError(mlf_why_text(MLF_WHY_WORKSPACE_EXHAUSTED));
    return NULL; /* the operator returns -1; aborting here would take the device down */
  }
  ws->top = start + (size_t)nbytes;
  if (ws->top > ws->high_water) ws->high_water = ws->top;
  return ws->base + start;
}

int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr) {
  (void)device_type;
  (void)device_id;
  mlf_workspace* ws = g_workspace;
  /* Compare addresses as integers: relational operators on unrelated pointers are UB. */
  uintptr_t at = (uintptr_t)ptr;
  uintptr_t base = ws != NULL ? (uintptr_t)ws->base : 0;
  if (ws == NULL || at < base || at - base > ws->top || ((at - base) & (MLF_STORAGE_ALIGN - 1))) {
    TVMAPISetLastError(mlf_why_text(MLF_WHY_WORKSPACE_FREE));
    return -1;
  }
  ws->top = (size_t)(at - base);
  return 0;
}

mlf_workspace* mlf_workspace_bound(void) { return g_workspace; }

uint32_t mlf_workspace_lend(mlf_workspace* ws, uint8_t* base, size_t size) {
  uint32_t refused = ws->refused;
  ws->base = base;
  ws->size = size;
  ws->top = 0;
  ws->refused = 0;
  return refused;
}

size_t mlf_workspace_mark(void) { return g_workspace != NULL ? g_workspace->top : 0; }

void mlf_workspace_release_to(size_t mark) {
  if (g_workspace != NULL && mark <= g_workspace->top) g_workspace->top = mark;
}
