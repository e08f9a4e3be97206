/*
 * frame_tool.c — mlf_frame.c for the Python tests.
 *   frame_tool decode MAX_PAYLOAD CHUNK [GAP...] < stream   one line per event:
 *       OK <type> <seq> <length> <payload hex> | BAD_CRC <type> <seq> <length> |
 *       TOO_LONG <type> <seq> <length> | TRUNCATED <type> <seq> <length>, then
 *       DISCARDED <n>. Bytes are fed CHUNK at a time; the line goes silent
 *       (mlf_frame_decoder_idle(), then the events it releases) before stream offset GAP.
 *   frame_tool encode TYPE SEQ < payload            the frame on stdout
 *   frame_tool crc < data                           the CRC-32 in hex
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlf_frame.h"

static uint8_t input[1u << 24];
static uint8_t buffer[MLF_FRAME_BUFFER_BYTES(MLF_FRAME_MAX_PAYLOAD)];

static size_t read_all(void) { return fread(input, 1, sizeof(input), stdin); }

static const char* kind_name(mlf_frame_event_kind kind) {
  switch (kind) {
    case MLF_FRAME_BAD_CRC:
      return "BAD_CRC";
    case MLF_FRAME_TOO_LONG:
      return "TOO_LONG";
    case MLF_FRAME_TRUNCATED:
      return "TRUNCATED";
    default:
      return "?";
  }
}

static void print_events(mlf_frame_decoder* dec) {
  mlf_frame_event ev;
  for (;;) {
    mlf_frame_event_kind kind = mlf_frame_decoder_next(dec, &ev);
    if (kind == MLF_FRAME_NONE) return;
    if (kind == MLF_FRAME_OK) {
      printf("OK %u %u %u ", ev.type, ev.seq, ev.length);
      for (size_t i = 0; i < ev.length; ++i) printf("%02x", ev.payload[i]);
      printf("\n");
    } else {
      printf("%s %u %u %u\n", kind_name(kind), ev.type, ev.seq, ev.length);
    }
  }
}

int main(int argc, char** argv) {
  if (argc >= 4 && !strcmp(argv[1], "decode")) {
    size_t max_payload = strtoul(argv[2], NULL, 0);
    size_t chunk = strtoul(argv[3], NULL, 0);
    mlf_frame_decoder dec;
    if (mlf_frame_decoder_init(&dec, buffer, MLF_FRAME_BUFFER_BYTES(max_payload), max_payload)) {
      return 2;
    }
    size_t n = read_all();
    size_t pos = 0;
    int next_gap = 4;
    while (pos < n) {
      size_t gap = next_gap < argc ? strtoul(argv[next_gap], NULL, 0) : n;
      if (gap <= pos && next_gap < argc) {
        mlf_frame_decoder_idle(&dec);
        print_events(&dec);
        ++next_gap;
        continue;
      }
      /* One chunk, as FrameDecoder.feed() takes it: in as many pieces as the room allows. */
      size_t end = n - pos < chunk ? n : pos + chunk;
      if (end > gap) end = gap;
      while (pos < end) {
        size_t room;
        uint8_t* space = mlf_frame_decoder_space(&dec, &room);
        size_t want = end - pos < room ? end - pos : room;
        memcpy(space, input + pos, want);
        mlf_frame_decoder_commit(&dec, want);
        pos += want;
        print_events(&dec);
      }
    }
    if (next_gap < argc) { /* silences at the very end */
      mlf_frame_decoder_idle(&dec);
      print_events(&dec);
    }
    printf("DISCARDED %llu\n", (unsigned long long)dec.discarded);
    return 0;
  }
  if (argc == 4 && !strcmp(argv[1], "encode")) {
    size_t n = read_all();
    static uint8_t out[MLF_FRAME_BUFFER_BYTES(MLF_FRAME_MAX_PAYLOAD)];
    size_t size = mlf_frame_encode(out, sizeof(out), (uint8_t)strtoul(argv[2], NULL, 0),
                                   (uint8_t)strtoul(argv[3], NULL, 0), input, n);
    if (size == 0) return 1;
    fwrite(out, 1, size, stdout);
    return 0;
  }
  if (argc == 2 && !strcmp(argv[1], "crc")) {
    size_t n = read_all();
    printf("%08lx\n", (unsigned long)mlf_crc32(0, input, n));
    return 0;
  }
  fprintf(stderr, "usage: frame_tool decode MAX CHUNK [GAP...] | encode TYPE SEQ | crc\n");
  return 2;
}
