/*
 * mlf_error.c — status names, error records and their one-line description, and TVM's
 * last-error string.
 */
#include <string.h>

#include "mlf_internal.h"

/*
 * The one piece of process-wide state besides the bound workspace: TVM's ABI passes error
 * messages through TVMAPISetLastError()/TVMGetLastError() without any context object.
 * Messages are copied (callers may pass temporaries) and truncated to fit.
 */
static char g_last_error[128];

void TVMAPISetLastError(const char* msg) {
  size_t n = 0;
  if (msg != NULL) {
    while (n + 1 < sizeof(g_last_error) && msg[n] != '\0') ++n;
    memcpy(g_last_error, msg, n);
  }
  g_last_error[n] = '\0';
}

const char* TVMGetLastError(void) { return g_last_error; }

const char* mlf_status_name(mlf_status status) {
  static const char* const names[] = {"ok",
                                      "bad argument",
                                      "out of memory",
                                      "malformed JSON",
                                      "bad graph",
                                      "bad params",
                                      "shape or dtype mismatch",
                                      "missing function",
                                      "no such input",
                                      "operator failed",
                                      "unsupported",
                                      "call out of order"};
  unsigned index = (unsigned)status;
  return index < sizeof(names) / sizeof(names[0]) ? names[index] : "unknown status";
}

void mlf_error_clear(mlf_error* err) {
  err->status = MLF_OK;
  err->node = UINT32_MAX;
  err->offset = UINT32_MAX;
  err->what = NULL;
  err->why = 0;
  err->subject = NULL;
  err->subject_len = 0;
}

size_t mlf_cstr_length(const char* s, size_t limit) {
  size_t n = 0;
  while (n < limit && s[n] != '\0') ++n;
  return n;
}

#ifndef MLF_ERROR_TEXT
#define MLF_ERROR_TEXT 1
#endif
#if MLF_ERROR_TEXT
/* The descriptions of mlf_why, in its order, each NUL-terminated. */
#define MLF_WHY_TEXT(name, text) text "\0"
static const char kWhyTexts[] = MLF_WHY_LIST(MLF_WHY_TEXT);
static const char kWhyJsonTexts[] = MLF_WHY_JSON_LIST(MLF_WHY_TEXT);

/* Text `index` of a catalogue; "" past its end. */
static const char* nth_text(const char* texts, size_t size, int index) {
  const char* text = texts;
  for (int i = 0; i < index && (size_t)(text - texts) < size - 1; ++i)
    text += mlf_cstr_length(text, size) + 1;
  return text;
}

const char* mlf_why_text(mlf_why why) { return nth_text(kWhyTexts, sizeof(kWhyTexts), (int)why); }

const char* mlf_why_json_text(mlf_why why) {
  return nth_text(kWhyJsonTexts, sizeof(kWhyJsonTexts), (int)why - MLF_WHY_JSON_FIRST);
}
#else
/* Without the catalogue every description is "" (the host words the codes). An array, not
 * a literal: one byte of its own rather than a string the linker merges with others. */
static const char kNoText[1] = {'\0'};

const char* mlf_why_text(mlf_why why) {
  (void)why;
  return kNoText;
}

const char* mlf_why_json_text(mlf_why why) { return mlf_why_text(why); }
#endif

mlf_status mlf_fail_about(mlf_error* err, mlf_status status, mlf_why why, const char* subject,
                          size_t subject_len) {
  /* Keep the first failure: later ones are usually consequences of it. */
  if (err != NULL && err->status == MLF_OK) {
    err->status = status;
    err->what = mlf_why_text(why);
    err->why = (uint32_t)why;
    err->subject = subject;
    err->subject_len = subject != NULL ? (uint32_t)subject_len : 0;
  }
  return status;
}

mlf_status mlf_fail(mlf_error* err, mlf_status status, mlf_why why) {
  return mlf_fail_about(err, status, why, NULL, 0);
}

typedef struct {
  char* buf;
  size_t size;
  size_t len;
} text_out;

static void put(text_out* out, const char* s, size_t n) {
  for (size_t i = 0; i < n; ++i, ++out->len) {
    if (out->len + 1 < out->size) out->buf[out->len] = s[i];
  }
}

static void put_str(text_out* out, const char* s) { put(out, s, mlf_cstr_length(s, SIZE_MAX)); }

static void put_u32(text_out* out, uint32_t value) {
  char digits[10];
  size_t n = 0;
  do {
    digits[sizeof(digits) - ++n] = (char)('0' + value % 10);
    value /= 10;
  } while (value != 0);
  put(out, digits + sizeof(digits) - n, n);
}

size_t mlf_error_format(const mlf_error* err, char* buf, size_t size) {
  text_out out = {buf, size, 0};
  if (err == NULL) {
    put_str(&out, "no error record");
  } else {
    put_str(&out, mlf_status_name(err->status));
    if (err->what != NULL && err->what[0] != '\0') {
      put_str(&out, ": ");
      put_str(&out, err->what);
    } else if (err->why != 0) {
      put_str(&out, ": #");
      put_u32(&out, err->why);
    }
    if (err->subject != NULL) {
      put_str(&out, " '");
      put(&out, err->subject, err->subject_len);
      put_str(&out, "'");
    }
    if (err->node != UINT32_MAX) {
      put_str(&out, " at node ");
      put_u32(&out, err->node);
    }
    if (err->offset != UINT32_MAX) {
      put_str(&out, " at byte ");
      put_u32(&out, err->offset);
    }
  }
  if (size > 0) buf[out.len < size ? out.len : size - 1] = '\0';
  return out.len < size ? out.len : (size > 0 ? size - 1 : 0);
}
