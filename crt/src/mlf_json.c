/*
 * mlf_json.c — an in-place JSON scanner: cursors over the text, no copies, no allocation,
 * no recursion.
 */
#include <string.h>

#include "mlf_internal.h"

void mlf_json_init(mlf_json* j, const char* text, size_t len, mlf_error* err) {
  j->pos = text;
  j->end = text + len;
  j->begin = text;
  j->err = err;
}

static int fail_as(mlf_json* j, mlf_status status, const char* what) {
  if (j->err->status == MLF_OK) {
    mlf_fail(j->err, status, what, NULL, 0);
    j->err->offset = (uint32_t)(j->pos - j->begin);
  }
  return 0;
}

int mlf_json_fail(mlf_json* j, const char* what) { return fail_as(j, MLF_ERR_JSON, what); }

int mlf_json_type_error(mlf_json* j, const char* what) {
  int value_here = j->pos < j->end && *j->pos != '\0' && strchr("{[\"-0123456789tfn", *j->pos);
  return fail_as(j, value_here ? MLF_ERR_GRAPH : MLF_ERR_JSON, what);
}

int mlf_json_peek(mlf_json* j) {
  if (j->err->status != MLF_OK) return -1;
  /* Any control character counts as blank: stricter JSON would only reject more input. */
  while (j->pos < j->end && (unsigned char)*j->pos <= ' ') ++j->pos;
  return j->pos < j->end ? (unsigned char)*j->pos : -1;
}

int mlf_json_open(mlf_json* j, char open) {
  if (mlf_json_peek(j) != open)
    return mlf_json_type_error(j, open == '[' ? MLF_TEXT("expected [") : MLF_TEXT("expected {"));
  ++j->pos;
  return 1;
}

int mlf_json_more(mlf_json* j, char close, uint32_t* count) {
  int c = mlf_json_peek(j);
  if (c == close) {
    ++j->pos;
    return 0;
  }
  if (*count > 0) {
    if (c != ',') return mlf_json_fail(j, MLF_TEXT("missing , or bracket"));
    ++j->pos;
  }
  if (c < 0) return mlf_json_fail(j, MLF_TEXT("unexpected end"));
  ++*count;
  return 1;
}

int mlf_json_string(mlf_json* j, mlf_name* out) {
  if (mlf_json_peek(j) != '"') return mlf_json_type_error(j, MLF_TEXT("expected string"));
  const char* start = ++j->pos;
  for (;;) {
    if (j->pos >= j->end) return mlf_json_fail(j, MLF_TEXT("unterminated string"));
    unsigned char c = (unsigned char)*j->pos++;
    if (c == '"') break;
    if (c < 0x20) return mlf_json_fail(j, MLF_TEXT("control character in string"));
    /* Escapes stay as written (names are raw slices); only step over the escaped char. */
    if (c == '\\' && j->pos < j->end) ++j->pos;
  }
  if (out != NULL) {
    out->str = start;
    out->len = (uint32_t)(j->pos - 1 - start);
  }
  return 1;
}

int mlf_json_key(mlf_json* j, mlf_name* key) {
  if (!mlf_json_string(j, key)) return 0;
  if (mlf_json_peek(j) != ':') return mlf_json_fail(j, MLF_TEXT("missing :"));
  ++j->pos;
  return 1;
}

static int is_digit(int c) { return c >= '0' && c <= '9'; }

int mlf_json_u32(mlf_json* j, uint32_t* out) {
  uint64_t value = 0;
  if (!is_digit(mlf_json_peek(j)))
    return mlf_json_type_error(j, MLF_TEXT("expected unsigned integer"));
  const char* start = j->pos;
  while (j->pos < j->end && is_digit(*j->pos) && value <= UINT32_MAX) {
    value = value * 10 + (unsigned)(*j->pos++ - '0');
  }
  if (value > UINT32_MAX || (j->pos < j->end && strchr(".eE", *j->pos) && *j->pos != '\0')) {
    j->pos = start; /* report the number itself: valid JSON, wrong kind of value */
    return mlf_json_type_error(j, MLF_TEXT("expected unsigned integer below 2^32"));
  }
  *out = (uint32_t)value;
  return 1;
}

/* Characters of numbers and of true/false/null. */
static int is_scalar_char(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || c == '-' || c == '+' || c == '.' || c == 'E';
}

int mlf_json_skip(mlf_json* j) {
  uint32_t depth = 0;
  do {
    int c = mlf_json_peek(j);
    if (c == '"') {
      if (!mlf_json_string(j, NULL)) return 0;
    } else if (c == '[' || c == '{') {
      ++depth;
      ++j->pos;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
      ++j->pos;
    } else if ((c == ',' || c == ':') && depth > 0) {
      ++j->pos;
    } else if (c >= 0 && is_scalar_char((char)c)) {
      while (j->pos < j->end && is_scalar_char(*j->pos)) ++j->pos;
    } else {
      return mlf_json_fail(j,
                           c < 0 ? MLF_TEXT("unexpected end") : MLF_TEXT("unexpected character"));
    }
  } while (depth > 0);
  return 1;
}

int mlf_name_is(mlf_name name, const char* literal) {
  return strlen(literal) == name.len && memcmp(name.str, literal, name.len) == 0;
}

int mlf_name_to_u32(mlf_name name, uint32_t* out) {
  mlf_error err;
  mlf_json j;
  mlf_error_clear(&err);
  mlf_json_init(&j, name.str, name.len, &err);
  return mlf_json_u32(&j, out) && j.pos == j.end;
}
