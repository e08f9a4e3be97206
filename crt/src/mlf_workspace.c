/*
 * mlf_workspace.c — TVMBackendAllocWorkspace/FreeWorkspace as a LIFO stack.
 *
 * TVM's C code frees workspace blocks in strict reverse order of allocation, so a bump
 * pointer that free() moves back is enough: no headers, no fragmentation, no search. A free
 * is checked against the last live block, whose start the stack keeps; the start of every
 * block below it is kept as a 4-byte link at the workspace's end (MLF_WORKSPACE_LINK_BYTES,
 * the rule the generator sizes windows by), so a free of anything else is refused.
 */
#include <string.h>

#include "mlf_internal.h"

#define LINK ((size_t)MLF_WORKSPACE_LINK_BYTES)

/* The workspace TVMBackendAllocWorkspace() draws from. Process-wide because TVM's ABI passes
 * no context to it; bound by the firmware with mlf_workspace_bind(). */
static mlf_workspace* g_workspace;

static size_t align_up(size_t value) { return MLF_ALIGN_UP(value, MLF_STORAGE_ALIGN); }

/* A size the links can address (offsets are uint32_t), and that ends on a link's boundary. */
static size_t usable(size_t size) {
  if (size > (size_t)UINT32_MAX) size = (size_t)UINT32_MAX;
  return size & ~(LINK - 1u);
}

/* Where the link of live block `index` (0: the first) lies, for every block below the last. */
static uint8_t* link_at(const mlf_workspace* ws, uint32_t index) {
  return ws->base + ws->size - ((size_t)index + 1u) * LINK;
}

static void empty(mlf_workspace* ws) {
  ws->top = 0;
  ws->depth = 0;
  ws->last = 0;
}

/* Takes back the last live block: the top returns to where it began. */
static void pop(mlf_workspace* ws) {
  ws->top = ws->last;
  if (--ws->depth > 0) {
    uint32_t start;
    memcpy(&start, link_at(ws, ws->depth - 1u), LINK);
    ws->last = start;
  }
}

mlf_status mlf_workspace_init(mlf_workspace* ws, void* mem, size_t size) {
  if (ws == NULL || (mem == NULL && size != 0)) return MLF_ERR_ARGUMENT;
  memset(ws, 0, sizeof(*ws));
  /* Start at the first 64-byte boundary inside mem; the bytes before it are lost. */
  size_t skip = (size_t)(-(uintptr_t)mem & (MLF_STORAGE_ALIGN - 1));
  ws->base = (uint8_t*)mem + (skip < size ? skip : 0);
  ws->size = usable(skip < size ? size - skip : 0);
  return MLF_OK;
}

void mlf_workspace_bind(mlf_workspace* ws) { g_workspace = ws; }

void mlf_workspace_reset(mlf_workspace* ws) {
  if (ws != NULL) empty(ws);
}

size_t mlf_workspace_high_water(const mlf_workspace* ws) { return ws ? ws->high_water : 0; }

void mlf_workspace_watch(mlf_workspace* ws, uint32_t* marks, uint32_t count) {
  if (ws == NULL) return;
  ws->marks = marks;
  ws->num_marks = marks != NULL ? count : 0;
}

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
  size_t links = (size_t)ws->depth * LINK; /* every block below the new one has its link */
  if (ws->base == NULL || links > ws->size || start > ws->size - links ||
      nbytes > (uint64_t)(ws->size - links - start)) {
    ++ws->refused;
#if MLF_WORKSPACE_MARKS
    uint64_t ask = (uint64_t)(start + links);
    ask = nbytes > UINT64_MAX - ask ? UINT64_MAX : ask + nbytes;
    if (ask > (uint64_t)ws->peak) ws->peak = ask > (uint64_t)SIZE_MAX ? SIZE_MAX : (size_t)ask;
#endif
    TVMAPISetLastError(mlf_why_text(MLF_WHY_WORKSPACE_EXHAUSTED));
    return NULL; /* the operator returns -1; aborting here would take the device down */
  }
  if (ws->depth > 0) {
    uint32_t below = (uint32_t)ws->last;
    memcpy(link_at(ws, ws->depth - 1u), &below, LINK);
  }
  ++ws->depth;
  ws->last = start;
  ws->top = start + (size_t)nbytes;
  size_t held = ws->top + links;
  if (held > ws->high_water) ws->high_water = held;
#if MLF_WORKSPACE_MARKS
  if (held > ws->peak) ws->peak = held;
#endif
  return ws->base + start;
}

int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr) {
  (void)device_type;
  (void)device_id;
  mlf_workspace* ws = g_workspace;
  /* Only the last live block: anything else would move the top down under live blocks.
   * Compare addresses as integers: relational operators on unrelated pointers are UB. */
  if (ws == NULL || ws->depth == 0 || (uintptr_t)ptr != (uintptr_t)ws->base + ws->last) {
    TVMAPISetLastError(mlf_why_text(MLF_WHY_WORKSPACE_FREE));
    return -1;
  }
  pop(ws);
  return 0;
}

mlf_workspace* mlf_workspace_bound(void) { return g_workspace; }

uint32_t mlf_workspace_lend(mlf_workspace* ws, uint8_t* base, size_t size) {
  uint32_t refused = ws->refused;
  ws->base = base;
  ws->size = usable(size);
  empty(ws);
  ws->refused = 0;
  return refused;
}

size_t mlf_workspace_mark(void) { return g_workspace != NULL ? g_workspace->depth : 0; }

void mlf_workspace_release_to(size_t mark) {
  mlf_workspace* ws = g_workspace;
  while (ws != NULL && ws->depth > mark) pop(ws);
}

#if MLF_WORKSPACE_MARKS
size_t mlf_workspace_watch_begin(void) {
  mlf_workspace* ws = g_workspace;
  if (ws == NULL) return 0;
  ws->peak = ws->top + (ws->depth > 0 ? (size_t)(ws->depth - 1u) * LINK : 0);
  return ws->peak;
}

void mlf_workspace_watch_end(uint32_t index, size_t from) {
  mlf_workspace* ws = g_workspace;
  if (ws == NULL || index >= ws->num_marks) return;
  size_t taken = ws->peak - from;
  ws->marks[index] = taken > UINT32_MAX ? UINT32_MAX : (uint32_t)taken;
}
#endif
