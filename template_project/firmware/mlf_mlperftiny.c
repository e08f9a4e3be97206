/*
 * mlf_mlperftiny.c — the MLPerf Tiny benchmark protocol (see mlf_mlperftiny.h and
 * docs/mlperftiny.md). Written from the protocol's description; robust to any bytes: a line
 * longer than the limit, unknown words, bad numbers or hex, data beyond what `db load`
 * declared, and commands out of order are each answered with one e-[...] line, then m-ready,
 * and the state is left as it was.
 */
#include "mlf_mlperftiny.h"

#include <string.h>

#include "mlf_platform.h"

#define MAX_WORDS 8      /* words in one command (db with several hex words) */
#define QUOTE_MAX 40u    /* characters of a bad word quoted back */
#define BYTES_PER_LINE 8 /* db print */

#define TEXT_OF_(x) #x
#define TEXT_OF(x) TEXT_OF_(x) /* a number macro as its digits, for messages */

typedef struct {
  const char* text;
  size_t len;
} word;

/* ---- output --------------------------------------------------------------------------- */

static void end_line(mlf_mlperftiny* dev) {
  mlf_text_str(&dev->out, "\r\n");
  mlf_text_flush(&dev->out);
}

static void message(mlf_mlperftiny* dev, const char* text) {
  mlf_text_str(&dev->out, text);
  end_line(dev);
}

/* Text inside [...], as mlf_text_field() shows it: a line's own brackets stay unambiguous
 * for the host's parser. */
static void quoted_str(mlf_mlperftiny* dev, const char* s) {
  mlf_text_field(&dev->out, s, mlf_text_length(s, sizeof(dev->out.line)));
}

static void error_start(mlf_mlperftiny* dev, const char* what) {
  mlf_text_str(&dev->out, "e-[");
  quoted_str(dev, what);
}

static void error_end(mlf_mlperftiny* dev) {
  mlf_text_char(&dev->out, ']');
  end_line(dev);
}

static void fail(mlf_mlperftiny* dev, const char* text) {
  error_start(dev, text);
  error_end(dev);
}

/* "e-[<what><number><rest>]" */
static void error_number(mlf_mlperftiny* dev, const char* what, uint64_t number, const char* rest) {
  error_start(dev, what);
  mlf_text_u64(&dev->out, number);
  quoted_str(dev, rest);
  error_end(dev);
}

/* The runtime's failure, as numbers the host words. */
static void status_text(mlf_mlperftiny* dev, mlf_status status) {
  const mlf_executor* ex = dev->config->executor;
  mlf_text_error(&dev->out, status, ex != NULL ? mlf_executor_error(ex) : NULL);
}

static const char kInitFailed[] = "the model failed to initialise";
static const char kInputMismatch[] = "the input buffer does not match the model's inputs";

/* "e-[<what>[: <context>]: <the runtime's failure>]" */
static void model_error(mlf_mlperftiny* dev, const char* what, const char* context,
                        mlf_status status) {
  error_start(dev, what);
  if (context != NULL) {
    quoted_str(dev, ": ");
    quoted_str(dev, context);
  }
  quoted_str(dev, ": ");
  status_text(dev, status);
  error_end(dev);
}

/* ---- words and numbers ---------------------------------------------------------------- */

static int word_is(const word* w, const char* s) {
  size_t i = 0;
  while (i < w->len && s[i] != '\0' && s[i] == w->text[i]) ++i;
  return i == w->len && s[i] == '\0';
}

/* A count written in decimal digits only, at most 4294967295. */
static int parse_count(const word* w, uint32_t* value) {
  if (w->len == 0) return 0;
  uint32_t v = 0;
  for (size_t i = 0; i < w->len; ++i) {
    const uint32_t digit = (uint32_t)(w->text[i] - '0');
    if (digit > 9u || v > (0xFFFFFFFFu - digit) / 10u) return 0;
    v = v * 10u + digit;
  }
  *value = v;
  return 1;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* ---- the model -------------------------------------------------------------------------- */

static int inputs_match(const mlf_mlperftiny_config* c) {
  if (c->init_status != MLF_OK || c->executor == NULL) return 0;
  size_t total = 0;
  uint32_t count = mlf_executor_num_inputs(c->executor);
  for (uint32_t i = 0; i < count; ++i) {
    mlf_tensor_info info;
    if (mlf_executor_input_info(c->executor, i, &info) != MLF_OK) return 0;
    total += info.nbytes;
  }
  return total == c->buffer_size && (total == 0 || c->buffer != NULL);
}

/* Whether `what` may use the model; says why not. */
static int model_ready(mlf_mlperftiny* dev, const char* what) {
  const mlf_mlperftiny_config* c = dev->config;
  if (c->init_status != MLF_OK || c->executor == NULL) {
    model_error(dev, what, kInitFailed, c->init_status != MLF_OK ? c->init_status : MLF_ERR_STATE);
    return 0;
  }
  if (!dev->input_ok) {
    error_start(dev, what);
    quoted_str(dev, ": ");
    quoted_str(dev, kInputMismatch);
    error_end(dev);
    return 0;
  }
  return 1;
}

static mlf_status load_inputs(mlf_mlperftiny* dev) {
  const mlf_mlperftiny_config* c = dev->config;
  size_t offset = 0;
  uint32_t count = mlf_executor_num_inputs(c->executor);
  for (uint32_t i = 0; i < count; ++i) {
    mlf_tensor_info info;
    mlf_status status = mlf_executor_input_info(c->executor, i, &info);
    if (status == MLF_OK) {
      status = mlf_executor_set_input(c->executor, i, c->buffer + offset, info.nbytes);
    }
    if (status != MLF_OK) return status;
    offset += info.nbytes;
  }
  return MLF_OK;
}

static mlf_status run_once(const mlf_mlperftiny_config* c) {
  if (c->workspace != NULL) {
    mlf_workspace_reset(c->workspace); /* a failed run may have left blocks allocated */
    mlf_workspace_bind(c->workspace);
  }
  mlf_status status = mlf_executor_run(c->executor);
  if (c->workspace != NULL) mlf_workspace_bind(NULL);
  return status;
}

/* ---- timestamps --------------------------------------------------------------------------- */

static void lap(mlf_mlperftiny* dev, uint64_t ticks) {
  /* Tick rates fit 32 bits (4 GHz); a rate beyond is shown as 0 µs rather than wrong. */
  uint64_t hz = mlf_platform_tick_hz();
  uint64_t us = 0;
  uint32_t rest;
  if (hz != 0 && hz >> 32 == 0) {
    us = mlf_text_divide(ticks, (uint32_t)hz, &rest) * 1000000u;
    us += mlf_text_divide((uint64_t)rest * 1000000u, (uint32_t)hz, &rest);
  }
  mlf_text_str(&dev->out, "m-lap-us-");
  mlf_text_u64(&dev->out, us);
  end_line(dev);
  if (dev->tick_lines) {
    mlf_text_str(&dev->out, "m-lap-ticks-");
    mlf_text_u64(&dev->out, ticks);
    end_line(dev);
  }
}

static void pulse(mlf_mlperftiny* dev) {
  if (!mlf_platform_timestamp_pulse()) fail(dev, "timestamp: this board has no timestamp pin");
}

/* ---- results ------------------------------------------------------------------------------ */

/* Every output's elements, one list. The generator refuses outputs whose dtype has no
 * reading as numbers; an element without one (a broken executor) shows as nan. */
static void print_results(mlf_mlperftiny* dev) {
  const mlf_mlperftiny_config* c = dev->config;
  uint32_t outputs = mlf_executor_num_outputs(c->executor);
  mlf_text* out = &dev->out;
  mlf_text_str(out, "m-results-[");
  const char* separator = "";
  for (uint32_t o = 0; o < outputs; ++o) {
    mlf_tensor_info info;
    const uint8_t* data = (const uint8_t*)mlf_executor_output_data(c->executor, o);
    if (data == NULL || mlf_executor_output_info(c->executor, o, &info) != MLF_OK) continue;
    const size_t width = (info.dtype.bits + 7u) / 8u;
    for (size_t i = 0; width != 0 && i < info.nbytes / width; ++i) {
      mlf_number v;
      if (!mlf_text_element(data, info.dtype, i, &v)) {
        v.kind = MLF_NUMBER_NAN;
      } else if (MLF_TEXT_FLOATS && v.kind == MLF_NUMBER_INTEGER && c->dequantize) {
        v = mlf_number_dequantized(&v, c->output_zero_point, c->output_scale);
      }
      mlf_text_str(out, separator);
      separator = ",";
      mlf_text_number(out, &v);
    }
  }
  mlf_text_char(out, ']');
  end_line(dev);
}

/* ---- commands ------------------------------------------------------------------------------ */

/* "<prefix>[<text>]" */
static void bracketed(mlf_mlperftiny* dev, const char* prefix, const char* text) {
  mlf_text_str(&dev->out, prefix);
  mlf_text_char(&dev->out, '[');
  quoted_str(dev, text != NULL ? text : "");
  mlf_text_char(&dev->out, ']');
  end_line(dev);
}

static void cmd_name(mlf_mlperftiny* dev, const word* args, size_t nargs) {
  (void)args, (void)nargs;
  bracketed(dev, "m-name-dut-", dev->config->name);
}

static void cmd_profile(mlf_mlperftiny* dev, const word* args, size_t nargs) {
  (void)args, (void)nargs;
  bracketed(dev, "m-profile-", dev->config->profile);
  bracketed(dev, "m-model-", dev->config->model);
}

static void cmd_timestamp(mlf_mlperftiny* dev, const word* args, size_t nargs) {
  (void)args, (void)nargs;
  if (dev->config->energy_mode) {
    pulse(dev);
  } else {
    lap(dev, mlf_platform_ticks());
  }
}

static void db_load(mlf_mlperftiny* dev, const word* args, size_t nargs) {
  uint32_t n = 0;
  if (nargs != 2 || !parse_count(&args[1], &n) || n == 0) {
    fail(dev, "db load: needs N, 1 or more");
    return;
  }
  if (!model_ready(dev, "db load")) return;
  if (n != dev->config->buffer_size) {
    error_start(dev, "db load: the model's input is ");
    mlf_text_u64(&dev->out, dev->config->buffer_size);
    quoted_str(dev, " bytes, not ");
    mlf_text_u64(&dev->out, n);
    error_end(dev);
    return;
  }
  dev->expected = n;
  dev->loaded = 0;
  mlf_text_str(&dev->out, "m-[Expecting ");
  mlf_text_u64(&dev->out, n);
  mlf_text_str(&dev->out, " bytes]");
  end_line(dev);
}

static void db_print(mlf_mlperftiny* dev) {
  if (dev->expected == 0) {
    fail(dev, "db print: nothing loaded");
    return;
  }
  for (size_t i = 0; i < dev->loaded; ++i) {
    mlf_text_str(&dev->out, i % BYTES_PER_LINE == 0 ? "m-buffer-" : "-");
    mlf_text_hex_byte(&dev->out, dev->config->buffer[i]);
    if (i % BYTES_PER_LINE == BYTES_PER_LINE - 1 || i + 1 == dev->loaded) end_line(dev);
  }
}

/* Hex words, decoded where they belong but counted as loaded only when all of them are good:
 * a bad command changes nothing loaded. */
static void db_data(mlf_mlperftiny* dev, const word* args, size_t nargs) {
  if (dev->expected == 0) {
    fail(dev, "db: no db load N before the data");
    return;
  }
  size_t total = 0;
  for (size_t a = 0; a < nargs; ++a) {
    if (args[a].len % 2u != 0) {
      fail(dev, "db: odd number of hex digits");
      return;
    }
    total += args[a].len / 2u;
  }
  if (total > dev->expected - dev->loaded) {
    error_start(dev, "db: ");
    mlf_text_u64(&dev->out, total);
    quoted_str(dev, " bytes beyond the end: db load declared ");
    mlf_text_u64(&dev->out, dev->expected);
    quoted_str(dev, ", ");
    mlf_text_u64(&dev->out, dev->loaded);
    quoted_str(dev, " loaded");
    error_end(dev);
    return;
  }
  uint8_t* at = dev->config->buffer + dev->loaded;
  for (size_t a = 0; a < nargs; ++a) {
    for (size_t i = 0; i < args[a].len; ++i) {
      int digit = hex_value(args[a].text[i]);
      if (digit < 0) {
        error_start(dev, "db: bad hex digit '");
        mlf_text_field(&dev->out, &args[a].text[i], 1);
        quoted_str(dev, "'");
        error_end(dev);
        return;
      }
      *at = (uint8_t)(i % 2u == 0 ? digit << 4 : *at | digit);
      at += i % 2u;
    }
  }
  dev->loaded += total;
  if (total > 0 && dev->loaded == dev->expected) message(dev, "m-load-done");
}

static void cmd_db(mlf_mlperftiny* dev, const word* args, size_t nargs) {
  if (nargs == 0) {
    fail(dev, "db: needs load N, print, or hex bytes");
  } else if (word_is(&args[0], "load")) {
    db_load(dev, args, nargs);
  } else if (word_is(&args[0], "print")) {
    db_print(dev);
  } else {
    db_data(dev, args, nargs);
  }
}

static void cmd_infer(mlf_mlperftiny* dev, const word* args, size_t nargs) {
  const mlf_mlperftiny_config* c = dev->config;
  uint32_t n = 1, warmups = 10;
  if (nargs > 2 || (nargs >= 1 && (!parse_count(&args[0], &n) || n == 0)) ||
      (nargs == 2 && !parse_count(&args[1], &warmups))) {
    fail(dev, "infer: usage: infer N (W), N >= 1 runs, W >= 0 warm-ups");
    return;
  }
  if (!model_ready(dev, "infer")) return;
  if (dev->expected == 0 || dev->loaded != dev->expected) {
    error_number(dev, "infer: input not loaded (", dev->loaded, " bytes so far)");
    return;
  }
  dev->have_results = 0;
  mlf_status status = load_inputs(dev);
  if (status != MLF_OK) {
    model_error(dev, "infer", NULL, status);
    return;
  }
  mlf_text_str(&dev->out, "m-warmup-start-");
  mlf_text_u64(&dev->out, warmups);
  end_line(dev);
  for (uint32_t i = 0; i < warmups && status == MLF_OK; ++i) status = run_once(c);
  if (status != MLF_OK) {
    model_error(dev, "infer", NULL, status);
    return;
  }
  message(dev, "m-warmup-done");
  mlf_text_str(&dev->out, "m-infer-start-");
  mlf_text_u64(&dev->out, n);
  end_line(dev);
  /* Performance mode reads the clock around the runs alone and prints afterwards, so the
   * time the console takes is not measured; energy mode pulses at the instants. */
  if (c->energy_mode) pulse(dev);
  uint64_t start = mlf_platform_ticks();
  for (uint32_t i = 0; i < n && status == MLF_OK; ++i) status = run_once(c);
  uint64_t end = mlf_platform_ticks();
  if (c->energy_mode) pulse(dev);
  if (status != MLF_OK) {
    model_error(dev, "infer", NULL, status);
    return;
  }
  if (!c->energy_mode) {
    lap(dev, start);
    lap(dev, end);
  }
  message(dev, "m-infer-done");
  dev->have_results = 1;
  print_results(dev);
}

static void cmd_results(mlf_mlperftiny* dev, const word* args, size_t nargs) {
  (void)args, (void)nargs;
  if (!dev->have_results) {
    fail(dev, "results: no inference has run yet");
    return;
  }
  print_results(dev);
}

static void cmd_help(mlf_mlperftiny* dev, const word* args, size_t nargs) {
  (void)args, (void)nargs;
  message(dev, "m-help-[name profile timestamp db infer results mlf-ticks]");
}

static void cmd_ticks(mlf_mlperftiny* dev, const word* args, size_t nargs) {
  if (nargs == 1 && word_is(&args[0], "on")) {
    dev->tick_lines = 1;
    mlf_text_str(&dev->out, "m-ticks-hz-");
    mlf_text_u64(&dev->out, mlf_platform_tick_hz());
    end_line(dev);
  } else if (nargs == 1 && word_is(&args[0], "off")) {
    dev->tick_lines = 0;
    message(dev, "m-ticks-off");
  } else {
    fail(dev, "mlf-ticks: on or off");
  }
}

typedef void (*command_fn)(mlf_mlperftiny* dev, const word* args, size_t nargs);

static const struct {
  const char* name;
  command_fn run;
} kCommands[] = {
    {"name", cmd_name}, {"profile", cmd_profile}, {"timestamp", cmd_timestamp},
    {"db", cmd_db},     {"infer", cmd_infer},     {"results", cmd_results},
    {"help", cmd_help}, {"mlf-ticks", cmd_ticks},
};

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static void execute(mlf_mlperftiny* dev) {
  word words[MAX_WORDS + 1];
  size_t count = 0;
  for (size_t i = 0; i < dev->fill && count <= MAX_WORDS;) {
    while (i < dev->fill && is_space(dev->line[i])) ++i;
    if (i == dev->fill) break;
    size_t begin = i;
    while (i < dev->fill && !is_space(dev->line[i])) ++i;
    words[count].text = &dev->line[begin];
    words[count].len = i - begin;
    ++count;
  }
  if (dev->overlong) {
    fail(dev, "Command too long: more than " TEXT_OF(MLF_MLPERFTINY_LINE_MAX) " characters");
  } else if (count > MAX_WORDS) {
    fail(dev, "Too many words: more than " TEXT_OF(MAX_WORDS));
  } else if (count > 0) {
    size_t c = 0;
    while (c < sizeof(kCommands) / sizeof(kCommands[0]) && !word_is(&words[0], kCommands[c].name)) {
      ++c;
    }
    if (c < sizeof(kCommands) / sizeof(kCommands[0])) {
      kCommands[c].run(dev, words + 1, count - 1);
    } else {
      error_start(dev, "Unknown command: ");
      mlf_text_field(&dev->out, words[0].text, words[0].len < QUOTE_MAX ? words[0].len : QUOTE_MAX);
      error_end(dev);
    }
  }
  message(dev, "m-ready");
  dev->fill = 0;
  dev->overlong = 0;
}

/* ---- entry points ------------------------------------------------------------------------- */

void mlf_mlperftiny_start(mlf_mlperftiny* dev, const mlf_mlperftiny_config* config) {
  memset(dev, 0, sizeof(*dev));
  dev->config = config;
  dev->input_ok = inputs_match(config);
  message(dev, config->energy_mode ? "m-timestamp-mode-energy" : "m-timestamp-mode-performance");
  if (config->init_status != MLF_OK || config->executor == NULL) {
    model_error(dev, kInitFailed, NULL,
                config->init_status != MLF_OK ? config->init_status : MLF_ERR_STATE);
  } else if (!dev->input_ok) {
    fail(dev, kInputMismatch);
  }
  message(dev, "m-init-done");
  message(dev, "m-ready");
}

void mlf_mlperftiny_feed(mlf_mlperftiny* dev, const uint8_t* data, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    char c = (char)data[i];
    if (c == MLF_MLPERFTINY_TERMINATOR) {
      execute(dev);
    } else if (dev->fill < MLF_MLPERFTINY_LINE_MAX) {
      dev->line[dev->fill++] = c;
    } else {
      dev->overlong = 1;
    }
  }
}

int mlf_mlperftiny_serve(const mlf_mlperftiny_config* config) {
  mlf_mlperftiny dev;
  uint8_t chunk[64];
  mlf_mlperftiny_start(&dev, config);
  for (;;) {
    size_t n = mlf_platform_read(chunk, sizeof(chunk));
    if (n == 0) return 0; /* the link is gone for good */
    mlf_mlperftiny_feed(&dev, chunk, n);
  }
}
