/*
 * mlf_mlperftiny.h — the `mlperftiny` firmware: the MLPerf Tiny / EEMBC benchmark protocol
 * on the console link (docs/mlperftiny.md), so the EEMBC EnergyRunner, the runner of
 * mlcommons/tiny (benchmark/runner) or `mlf-project mlperf` can drive a model.
 *
 * Commands are text ending with '%', split on spaces, at most MLF_MLPERFTINY_LINE_MAX
 * characters. Every command, good or bad, is answered by zero or more lines and then
 * "m-ready"; lines end with "\r\n"; "m-" lines are messages, "e-[...]" lines errors.
 *
 *   name                  m-name-dut-[<name>]
 *   profile               m-profile-[<profile>]  m-model-[<model>]
 *   timestamp             m-lap-us-<microseconds>  (energy mode: a pulse on the timestamp pin)
 *   db load N             m-[Expecting N bytes]    (N: the model's input size in bytes)
 *   db HHHH...            m-load-done once N bytes have arrived (hex, several per command)
 *   db print              m-buffer-xx-xx-... (8 bytes per line)
 *   infer [N [W]]         m-warmup-start-W, W runs, m-warmup-done, m-infer-start-N,
 *                         timestamp, N runs, timestamp, m-infer-done, m-results-[...]
 *                         (defaults N = 1, W = 10)
 *   results               m-results-[a,b,...] of the last inference
 *   help                  m-help-[...] lines
 *   mlf-ticks on|off      m-ticks-hz-<tick_hz>; while on, every m-lap-us- line is followed by
 *                         m-lap-ticks-<ticks> (exact instruction counts under QEMU -icount)
 *   anything else         e-[Unknown command: <word>]
 *
 * Results are every output of the model, in order, element by element: integers as integers,
 * or, when the config asks for it, integer outputs dequantized as scale * (q - zero_point);
 * floats with 9 significant digits and always a decimal point or exponent (0.0, -3.5,
 * 1.17549435e-38).
 *
 * Nothing is allocated: the loaded input lives in the caller's buffer, the command line and
 * the output text in the state struct on mlf_mlperftiny_serve()'s stack.
 */
#ifndef MLF_MLPERFTINY_H_
#define MLF_MLPERFTINY_H_

#include <stddef.h>
#include <stdint.h>

#include "mlf_runtime.h"
#include "mlf_text.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MLF_MLPERFTINY_LINE_MAX 80 /* characters of one command, '%' excluded */
#define MLF_MLPERFTINY_TERMINATOR '%'

typedef struct {
  const char* name;    /* m-name-dut-[name] */
  const char* profile; /* m-profile-[profile] */
  const char* model;   /* m-model-[model]: kws01, vww01, ad01, ic01, ... */
  mlf_executor* executor;
  mlf_workspace* workspace; /* bound around every run; NULL when the model needs none */
  mlf_status init_status;   /* what the model's initialisation returned */
  uint8_t* buffer;          /* what `db` loads: the model's inputs, concatenated in order */
  size_t buffer_size;       /* must equal the sum of the inputs' sizes */
  int dequantize;           /* print integer outputs as output_scale * (q - zero_point) */
  float output_scale;
  int32_t output_zero_point;
  int energy_mode; /* timestamps are pulses on the board's timestamp pin */
} mlf_mlperftiny_config;

/* The interpreter's state; fields are private. */
typedef struct {
  const mlf_mlperftiny_config* config;
  char line[MLF_MLPERFTINY_LINE_MAX + 1];
  size_t fill;
  int overlong;
  size_t expected; /* bytes declared by `db load`; 0: none */
  size_t loaded;
  int input_ok;     /* buffer_size matches the model's inputs */
  int have_results; /* the last inference succeeded */
  int tick_lines;
  mlf_text out;
} mlf_mlperftiny;

/* Sets the interpreter up and prints the start-up lines (timestamp mode, m-init-done,
 * m-ready). */
void mlf_mlperftiny_start(mlf_mlperftiny* dev, const mlf_mlperftiny_config* config);

/* Interprets received bytes: each complete command is answered at once. */
void mlf_mlperftiny_feed(mlf_mlperftiny* dev, const uint8_t* data, size_t n);

/* Starts, then reads the console link and interprets it until the link closes; returns 0
 * (the exit status). */
int mlf_mlperftiny_serve(const mlf_mlperftiny_config* config);

#ifdef __cplusplus
}
#endif

#endif /* MLF_MLPERFTINY_H_ */
