/* The test platform's Arduino.h: setup()/loop() and a Serial that writes through
 * semihosting — just what the exported library's sketches use. */
#ifndef ARDUINO_H_
#define ARDUINO_H_
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define HEX 16
#define DEC 10

#ifdef __cplusplus
extern "C" {
#endif
void setup(void);
void loop(void);
void user_write(const char* text);
#ifdef __cplusplus
}

class TestSerial {
 public:
  void begin(unsigned long) {}
  void print(const char* text) { user_write(text); }
  void print(char c) {
    char s[2] = {c, 0};
    user_write(s);
  }
  void print(unsigned long value, int base = DEC) {
    char s[34];
    int at = 33;
    s[at] = 0;
    do {
      s[--at] = "0123456789abcdef"[value % (unsigned)base];
      value /= (unsigned)base;
    } while (value != 0);
    user_write(s + at);
  }
  void print(int value, int base = DEC) { print((unsigned long)(unsigned)value, base); }
  void print(unsigned value, int base = DEC) { print((unsigned long)value, base); }
  void print(uint8_t value, int base = DEC) { print((unsigned long)value, base); }
  void println() { user_write("\n"); }
  template <typename T>
  void println(T value) {
    print(value);
    println();
  }
};
extern TestSerial Serial;
#endif
#endif
