/*
 * mlf_json.c — an in-place JSON scanner: cursors over the text, no copies, no allocation,
 * no recursion.
 */
#include <string.h>

#include "mlf_internal.h"

int mlf_json_fail_as(mlf_json* j, mlf_status status, mlf_why why, const mlf_name* subject) {
  if (j->err->status == MLF_OK) {
    mlf_fail_about(j->err, status, MLF_WHY_NONE, subject != NULL ? subject->str : NULL,
                   subject != NULL ? subject->len : 0);
    j->err->what = mlf_why_json_text(why);
    j->err->why = (uint32_t)why;
    j->err->offset = (uint32_t)(j->pos - j->begin);
  }
  return 0;
}

int mlf_json_fail(mlf_json* j, mlf_why why) { return mlf_json_fail_as(j, MLF_ERR_JSON, why, NULL); }

static int is_digit(int c) { return (unsigned)(c - '0') < 10; }

/* Characters of numbers and of true/false/null. */
static int is_scalar_char(int c) {
  return is_digit(c) || (unsigned)(c - 'a') < 26 || c == '-' || c == '+' || c == '.' || c == 'E';
}

/* "Expected something else here": a graph error when another value (or at least a token of
 * one) starts at the cursor, a syntax error when nothing that can start a value does. */
static int type_error(mlf_json* j, mlf_why why) {
  int c = mlf_json_peek(j);
  int value_here = c == '"' || c == '[' || c == '{' || is_scalar_char(c);
  return mlf_json_fail_as(j, value_here ? MLF_ERR_GRAPH : MLF_ERR_JSON, why, NULL);
}

int mlf_json_peek(mlf_json* j) {
  if (j->err->status != MLF_OK) return -1;
  /* Any control character counts as blank: stricter JSON would only reject more input. */
  while (j->pos < j->end && (unsigned char)*j->pos <= ' ') ++j->pos;
  return j->pos < j->end ? (unsigned char)*j->pos : -1;
}

int mlf_json_open(mlf_json* j, char open) {
  if (mlf_json_peek(j) != open) return type_error(j, MLF_WHY_EXPECTED_CONTAINER);
  ++j->pos;
  return 1;
}

int mlf_json_more(mlf_json* j, uint32_t* count) {
  int c = mlf_json_peek(j);
  /* Either bracket closes: like mlf_json_skip(), brackets are counted, not matched by kind. */
  if (c == ']' || c == '}') {
    ++j->pos;
    return 0;
  }
  if (*count > 0) {
    if (c != ',') return mlf_json_fail(j, MLF_WHY_MISSING_COMMA);
    ++j->pos;
  } else if (c < 0) {
    return mlf_json_fail(j, MLF_WHY_UNEXPECTED_END);
  }
  ++*count;
  return 1;
}

int mlf_json_string(mlf_json* j, mlf_name* out) {
  if (mlf_json_peek(j) != '"') return type_error(j, MLF_WHY_EXPECTED_STRING);
  const char* start = ++j->pos;
  for (;;) {
    if (j->pos >= j->end) return mlf_json_fail(j, MLF_WHY_UNTERMINATED);
    unsigned char c = (unsigned char)*j->pos++;
    if (c == '"') break;
    if (c < 0x20) return mlf_json_fail(j, MLF_WHY_CONTROL_CHARACTER);
    /* Escapes stay as written (names are raw slices); only step over the escaped char. */
    if (c == '\\' && j->pos < j->end) ++j->pos;
  }
  out->str = start;
  out->len = (uint32_t)(j->pos - 1 - start);
  return 1;
}

int mlf_json_u32(mlf_json* j, uint32_t* out) {
  uint32_t value = 0;
  int c = mlf_json_peek(j);
  const char *start = j->pos, *at = start;
  /* Up to 9 digits: below 10^9, far above any count, index or dimension a graph can use. */
  while (is_digit(c) && value < 100000000u) {
    value = value * 10 + (unsigned)(c - '0');
    c = ++at < j->end ? *at : 0;
  }
  /* No leading zeros (as in JSON), so equal numbers are equal text: shapes compare as text. */
  if (at == start || is_digit(c) || c == '.' || (c | 0x20) == 'e' ||
      (*start == '0' && at - start > 1)) {
    return type_error(j, MLF_WHY_EXPECTED_NUMBER);
  }
  j->pos = at;
  *out = value;
  return 1;
}

int mlf_json_skip(mlf_json* j) {
  uint32_t depth = 0;
  mlf_name ignored;
  do {
    int c = mlf_json_peek(j);
    if (c == '"') {
      mlf_json_string(j, &ignored);
      continue;
    }
    if (c == '[' || c == '{') {
      ++depth;
    } else if (depth > 0 && (c == ']' || c == '}')) {
      --depth;
    } else if (!(depth > 0 && (c == ',' || c == ':'))) {
      if (!is_scalar_char(c)) return mlf_json_fail(j, MLF_WHY_UNEXPECTED);
      while (j->pos + 1 < j->end && is_scalar_char(j->pos[1])) ++j->pos;
    }
    ++j->pos;
  } while (depth > 0 && j->err->status == MLF_OK);
  return j->err->status == MLF_OK;
}

int mlf_name_is(mlf_name name, const char* literal) {
  return mlf_name_equal(name, (mlf_name){literal, (uint32_t)mlf_cstr_length(literal, UINT32_MAX)});
}
