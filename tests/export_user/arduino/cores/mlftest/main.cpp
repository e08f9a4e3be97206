// The test platform's core: the Serial object and main(), which runs setup() and loop()
// once and exits (the start-up, startup.c beside it, calls main and exits with its status).
#include "Arduino.h"

TestSerial Serial;

int main(void) {
  setup();
  loop();
  return 0;
}
