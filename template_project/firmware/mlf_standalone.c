/*
 * mlf_standalone.c — the standalone firmware's run-once loop (see mlf_standalone.h).
 *
 * Text goes out through mlf_text (hand-written number formatting, no printf).
 */
#include "mlf_standalone.h"

#include <string.h>

#include "mlf_frame.h" /* mlf_crc32 */
#include "mlf_platform.h"
#include "mlf_text.h"

static void out_hex32(mlf_text* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) mlf_text_hex_byte(out, (uint8_t)(v >> shift));
}

static void out_field_u64(mlf_text* out, const char* key, uint64_t v) {
  mlf_text_char(out, ' ');
  mlf_text_str(out, key);
  mlf_text_char(out, '=');
  mlf_text_u64(out, v);
}

static void out_end_line(mlf_text* out) {
  mlf_text_char(out, '\n');
  mlf_text_flush(out);
}

static void out_dtype(mlf_text* out, DLDataType t) {
  static const char* const kNames[] = {"int", "uint", "float", "handle", "bfloat"};
  if (t.code == kDLUInt && t.bits == 1 && t.lanes == 1) {
    mlf_text_str(out, "bool");
    return;
  }
  mlf_text_str(out, t.code < 5 ? kNames[t.code] : "code");
  mlf_text_u64(out, t.bits);
  if (t.lanes != 1) {
    mlf_text_char(out, 'x');
    mlf_text_u64(out, t.lanes);
  }
}

/* ---- comparison and argmax ------------------------------------------------------------ */

static int is_float(DLDataType t) {
  return t.lanes == 1 && ((t.code == kDLFloat && (t.bits == 16 || t.bits == 32 || t.bits == 64)) ||
                          (t.code == kDLBfloat && t.bits == 16));
}

static double as_double(const mlf_number* v) {
  if (v->kind == MLF_NUMBER_NAN) return 0.0 / 0.0;
  double d = v->kind == MLF_NUMBER_INF ? 1.0 / 0.0 : (double)v->mantissa;
  for (int32_t e = v->exponent; e > 0; --e) d *= 2.0;
  for (int32_t e = v->exponent; e < 0; ++e) d *= 0.5;
  return v->negative ? -d : d;
}

static double magnitude(double v) { return v < 0 ? -v : v; }

/* |got - want| <= atol + rtol * |want| for every element (NaN matches NaN), in double. */
static int floats_close(const uint8_t* got, const uint8_t* want, const mlf_tensor_info* info,
                        float rtol, float atol) {
  size_t count = info->nbytes / ((info->dtype.bits + 7u) / 8u);
  for (size_t i = 0; i < count; ++i) {
    mlf_number g, w;
    mlf_text_element(got, info->dtype, i, &g);
    mlf_text_element(want, info->dtype, i, &w);
    if (g.kind == MLF_NUMBER_NAN || w.kind == MLF_NUMBER_NAN) {
      if (g.kind != w.kind) return 0;
      continue;
    }
    double gd = as_double(&g), wd = as_double(&w);
    if (magnitude(gd - wd) > (double)atol + (double)rtol * magnitude(wd)) return 0;
  }
  return 1;
}

/* Without float outputs the generator compiles MLF_TEXT_FLOATS=0, and the image then links
 * no floating-point arithmetic (about 2.5 KB of soft-float routines on a Cortex-M without an
 * FPU); a float output there must match bit for bit. */
static int outputs_match(const uint8_t* got, const uint8_t* want, const mlf_tensor_info* info,
                         const mlf_standalone_config* cfg) {
  if (!MLF_TEXT_FLOATS || !is_float(info->dtype)) return mlf_bytes_equal(got, want, info->nbytes);
  return floats_close(got, want, info, cfg->rtol, cfg->atol);
}

/* Index of the largest element, or -1 when the dtype cannot be read. */
static int64_t argmax(const uint8_t* data, const mlf_tensor_info* info) {
  size_t width = (info->dtype.bits + 7u) / 8u;
  if (info->dtype.lanes != 1 || width == 0 || info->nbytes == 0) return -1;
  size_t count = info->nbytes / width;
  mlf_number best = {0, 0, 0, MLF_NUMBER_INTEGER};
  int64_t best_index = -1;
  for (size_t i = 0; i < count; ++i) {
    mlf_number v;
    if (!mlf_text_element(data, info->dtype, i, &v)) return -1;
    if (v.kind != MLF_NUMBER_NAN && (best_index < 0 || mlf_number_compare(&v, &best) > 0)) {
      best = v;
      best_index = (int64_t)i;
    }
  }
  return best_index;
}

/* ---- the run ------------------------------------------------------------------------ */

typedef struct {
  const mlf_standalone_config* config;
  mlf_text out;
  uint32_t runs;
  uint32_t mismatches;
  uint32_t errors;
} standalone;

static void report_error(standalone* st, uint32_t model, int64_t sample, mlf_status status,
                         const mlf_executor* ex) {
  const mlf_error* err = ex != NULL ? mlf_executor_error(ex) : NULL;
  mlf_text* out = &st->out;
  mlf_text_str(out, "error");
  out_field_u64(out, "model", model);
  if (sample >= 0) out_field_u64(out, "sample", (uint64_t)sample);
  out_field_u64(out, "code", (uint64_t)status);
  if (err != NULL && err->status == status && err->node != UINT32_MAX) {
    out_field_u64(out, "node", err->node);
  }
  mlf_text_str(out, " message=");
  mlf_text_error(out, status, err);
  out_end_line(out);
  st->errors++;
}

static void report_output(standalone* st, uint32_t model, uint32_t sample, uint32_t index,
                          const mlf_tensor_info* info, const uint8_t* data, const void* expected) {
  mlf_text* out = &st->out;
  mlf_text_str(out, "output");
  out_field_u64(out, "model", model);
  out_field_u64(out, "sample", sample);
  out_field_u64(out, "index", index);
  mlf_text_str(out, " dtype=");
  out_dtype(out, info->dtype);
  mlf_text_str(out, " shape=");
  if (info->ndim == 0) mlf_text_str(out, "scalar");
  for (int32_t d = 0; d < info->ndim; ++d) {
    if (d > 0) mlf_text_char(out, 'x');
    mlf_text_i64(out, info->shape[d]);
  }
  out_field_u64(out, "nbytes", info->nbytes);
  mlf_text_str(out, " crc32=");
  out_hex32(out, mlf_crc32(0, data, info->nbytes));
  int64_t best = argmax(data, info);
  if (best >= 0) out_field_u64(out, "argmax", (uint64_t)best);
  mlf_text_str(out, " check=");
  if (expected == NULL) {
    mlf_text_str(out, "none");
  } else if (outputs_match(data, (const uint8_t*)expected, info, st->config)) {
    mlf_text_str(out, "pass");
  } else {
    mlf_text_str(out, "fail");
    st->mismatches++;
  }
  out_end_line(out);
  if (info->nbytes > st->config->max_print_bytes) return;
  for (size_t offset = 0; offset < info->nbytes; offset += 32) {
    mlf_text_str(out, "data");
    out_field_u64(out, "model", model);
    out_field_u64(out, "sample", sample);
    out_field_u64(out, "index", index);
    out_field_u64(out, "offset", offset);
    mlf_text_str(out, " hex=");
    size_t end = offset + 32 < info->nbytes ? offset + 32 : info->nbytes;
    for (size_t i = offset; i < end; ++i) mlf_text_hex_byte(out, data[i]);
    out_end_line(out);
  }
}

static void run_sample(standalone* st, uint32_t m, uint32_t s) {
  const mlf_standalone_model* model = &st->config->models[m];
  const mlf_standalone_sample* sample = &model->samples[s];
  mlf_executor* ex = model->executor;
  mlf_tensor_info info;
  uint32_t num_inputs = mlf_executor_num_inputs(ex);
  for (uint32_t i = 0; i < num_inputs; ++i) {
    if (sample->inputs == NULL || sample->inputs[i] == NULL) continue;
    mlf_status status = mlf_executor_input_info(ex, i, &info);
    if (status == MLF_OK) status = mlf_executor_set_input(ex, i, sample->inputs[i], info.nbytes);
    if (status != MLF_OK) {
      report_error(st, m, s, status, ex);
      return;
    }
  }
  if (model->workspace != NULL) {
    mlf_workspace_reset(model->workspace); /* a failed run may have left blocks allocated */
    mlf_workspace_bind(model->workspace);
  }
  uint64_t start = mlf_platform_ticks();
  mlf_status status = mlf_executor_run(ex);
  uint64_t ticks = mlf_platform_ticks() - start;
  if (model->workspace != NULL) mlf_workspace_bind(NULL);
  st->runs++;
  mlf_text* out = &st->out;
  mlf_text_str(out, "run");
  out_field_u64(out, "model", m);
  out_field_u64(out, "sample", s);
  out_field_u64(out, "status", (uint64_t)status);
  out_field_u64(out, "ticks", ticks);
  out_field_u64(out, "tick_hz", mlf_platform_tick_hz());
  out_field_u64(out, "workspace",
                model->workspace != NULL ? mlf_workspace_high_water(model->workspace) : 0);
  out_end_line(out);
  if (status != MLF_OK) {
    report_error(st, m, s, status, ex);
    return;
  }
  uint32_t num_outputs = mlf_executor_num_outputs(ex);
  for (uint32_t o = 0; o < num_outputs; ++o) {
    const uint8_t* data = (const uint8_t*)mlf_executor_output_data(ex, o);
    status = mlf_executor_output_info(ex, o, &info);
    if (status != MLF_OK || data == NULL) {
      report_error(st, m, s, status != MLF_OK ? status : MLF_ERR_STATE, ex);
      return;
    }
    const void* expected = sample->expected != NULL ? sample->expected[o] : NULL;
    report_output(st, m, s, o, &info, data, expected);
  }
}

int mlf_standalone_run(const mlf_standalone_config* config) {
  standalone st;
  memset(&st, 0, sizeof(st));
  st.config = config;
  mlf_text* out = &st.out;
  mlf_text_str(out, "mlf-standalone ");
  mlf_text_u64(out, MLF_STANDALONE_VERSION);
  mlf_text_str(out, " board=");
  mlf_text_safe(out, config->board != NULL ? config->board : "");
  out_field_u64(out, "models", config->num_models);
  out_end_line(out);
  for (uint32_t m = 0; m < config->num_models; ++m) {
    const mlf_standalone_model* model = &config->models[m];
    mlf_text_str(out, "model");
    out_field_u64(out, "index", m);
    out_field_u64(out, "samples", model->num_samples);
    mlf_text_str(out, " name=");
    mlf_text_safe(out, model->name != NULL ? model->name : "");
    out_end_line(out);
    if (model->init_status != MLF_OK || model->executor == NULL) {
      report_error(&st, m, -1, model->init_status != MLF_OK ? model->init_status : MLF_ERR_STATE,
                   model->executor);
      continue;
    }
    for (uint32_t s = 0; s < model->num_samples; ++s) run_sample(&st, m, s);
  }
  int status = st.errors > 0       ? MLF_STANDALONE_ERROR
               : st.mismatches > 0 ? MLF_STANDALONE_MISMATCH
                                   : MLF_STANDALONE_PASS;
  mlf_text_str(out, "result status=");
  mlf_text_str(out, status == MLF_STANDALONE_PASS       ? "pass"
                    : status == MLF_STANDALONE_MISMATCH ? "mismatch"
                                                        : "error");
  out_field_u64(out, "runs", st.runs);
  out_field_u64(out, "mismatches", st.mismatches);
  out_field_u64(out, "errors", st.errors);
  out_end_line(out);
  return status;
}
