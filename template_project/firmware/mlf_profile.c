/*
 * mlf_profile.c — the hooks of -finstrument-functions (see mlf_profile.h).
 *
 * Entry ticks are read last and exit ticks first, so a call's figure holds as little of the
 * hooks' own work as possible; what remains shows in the host's "sum of calls vs whole
 * inference" line.
 */
#include "mlf_profile.h"

#include "mlf_platform.h"

#define MLF_NO_PROFILE __attribute__((no_instrument_function))

typedef struct {
  uint32_t record; /* index in records, or UINT32_MAX when not recorded */
  size_t top;      /* workspace held at entry (blocks and links, as the high-water counts) */
  size_t high;     /* the workspace's high-water mark at entry */
} open_call;

/* What the workspace holds: its blocks up to the top and the links of those below the last. */
static size_t held(const mlf_workspace* ws) MLF_NO_PROFILE;
static size_t held(const mlf_workspace* ws) {
  return ws->top + (ws->depth > 0 ? (size_t)(ws->depth - 1u) * MLF_WORKSPACE_LINK_BYTES : 0);
}

static mlf_profile_record records[MLF_PROFILE_MAX_RECORDS];
static open_call open_calls[MLF_PROFILE_MAX_DEPTH];
static uint32_t record_count;
static uint32_t dropped;
static uint32_t depth;
static int recording;
static mlf_workspace* watched;

void __cyg_profile_func_enter(void* function, void* call_site) MLF_NO_PROFILE;
void __cyg_profile_func_exit(void* function, void* call_site) MLF_NO_PROFILE;

void mlf_profile_start(mlf_workspace* ws) {
  record_count = 0;
  dropped = 0;
  depth = 0;
  watched = ws;
  recording = 1;
}

void mlf_profile_stop(void) { recording = 0; }

uint32_t mlf_profile_count(void) { return record_count; }

uint32_t mlf_profile_dropped(void) { return dropped; }

const mlf_profile_record* mlf_profile_records(void) { return records; }

uintptr_t mlf_profile_anchor(void) { return (uintptr_t)&mlf_profile_start; }

void __cyg_profile_func_enter(void* function, void* call_site) {
  (void)call_site;
  ++depth;
  if (!recording || depth > MLF_PROFILE_MAX_DEPTH) return;
  open_call* call = &open_calls[depth - 1u];
  call->record = UINT32_MAX;
  if (watched != NULL) {
    /* The call's own peak: the mark starts at what is in use now, and the outer call's
     * peak is restored on exit. */
    call->top = held(watched);
    call->high = watched->high_water;
    watched->high_water = call->top;
  }
  if (record_count >= MLF_PROFILE_MAX_RECORDS) {
    ++dropped;
    return;
  }
  mlf_profile_record* r = &records[record_count];
  call->record = record_count++;
  r->function = (uintptr_t)function;
  r->depth = (uint16_t)depth;
  r->workspace_bytes = 0;
  r->exit_ticks = 0;
  r->enter_ticks = mlf_platform_ticks();
}

void __cyg_profile_func_exit(void* function, void* call_site) {
  uint64_t now = mlf_platform_ticks();
  (void)function;
  (void)call_site;
  if (depth == 0) return; /* recording started inside a call */
  if (recording && depth <= MLF_PROFILE_MAX_DEPTH) {
    open_call* call = &open_calls[depth - 1u];
    size_t taken = 0;
    if (watched != NULL) {
      taken = watched->high_water > call->top ? watched->high_water - call->top : 0;
      if (call->high > watched->high_water) watched->high_water = call->high;
    }
    if (call->record != UINT32_MAX) {
      records[call->record].exit_ticks = now;
      records[call->record].workspace_bytes = taken > UINT32_MAX ? UINT32_MAX : (uint32_t)taken;
    }
  }
  --depth;
}
