/*
 * fuzz_utvm.h — the input format of fuzz_utvm (the microTVM RPC server's fuzzer), shared with
 * the seed writer (utvm_seeds.c).
 *
 * Byte 0 picks the mode. Bit 0 set: the rest is raw link bytes (framing, session, MinRPC all
 * reached only through whole well-formed packets). Bit 0 clear: a session is opened first and
 * the rest is records, u16 length + a MinRPC body from its code on, each sent as one Normal
 * message with the length field in front (bit 1 set: the record's own length field is used
 * instead, so wrong lengths get tried too; bit 2 set: every other record goes with the wrong
 * session id). In records, FUZZ_ADDRESS_MAGIC followed by a byte k becomes the address
 * arena + 64 * k, so the fuzzer can name device memory without knowing where it is.
 */
#ifndef MLF_FUZZ_UTVM_H_
#define MLF_FUZZ_UTVM_H_

#define FUZZ_ADDRESS_MAGIC "\xA5\xA5\xA5\xA5\xA5\xA5\xA5"
#define FUZZ_ADDRESS_MAGIC_LEN 7u

/* Writes the seeds into DIR/utvm (created); 0 on success. */
int utvm_write_seeds(const char* dir);

#endif /* MLF_FUZZ_UTVM_H_ */
