/* runtime/tokens.h — token files in llm.c's .bin format.
 *
 * Used by the compiler (trainc run, trainc-tokenize) and by the runtime of
 * every training executable, so it depends on nothing but C11 and stdio.
 *
 * Format (all little-endian):
 *   header  int32[256]: [0] = 20240520 (magic), [1] = 1 (version),
 *                       [2] = number of tokens n, the rest 0
 *   tokens  uint16[n]
 * The file is exactly 1024 + 2n bytes.
 */
#ifndef TRAINC_TOKENS_H
#define TRAINC_TOKENS_H

#include <stddef.h>
#include <stdint.h>

#define TOK_MAGIC       20240520
#define TOK_VERSION     1
#define TOK_HEADER_INTS 256
#define TOK_HEADER_SIZE (TOK_HEADER_INTS * 4)

typedef struct TokFile { uint16_t *tokens; int64_t n; } TokFile;

/* Reads a whole token file.  0 on success; -1 with a message naming the
 * file in err (a missing or unreadable file, a file shorter than the header,
 * a bad magic number, an unsupported version, a negative count, fewer or
 * more token bytes than the header announces).  *out is left empty on error. */
int  tok_read(const char *path, TokFile *out, char *err, size_t errn);
void tok_free(TokFile *f);

/* Writes n tokens to a new file beside path, "PATH.PID.tmp" (PID the
 * process's id; created with O_EXCL, so no existing file is opened for
 * writing: where the name is taken, "PATH.PID.1.tmp", ...), flushed and
 * fsynced.  0 with its malloc'd name in *tmp, for the caller to rename over
 * path or remove; -1 with a message, nothing left on disk and *tmp NULL. */
int  tok_write_tmp(const char *path, const uint16_t *tokens, int64_t n, char **tmp, char *err, size_t errn);

/* tok_write_tmp, then the file renamed over path: a reader never sees half
 * a file, and a failure leaves an existing path as it was.  A symbolic link
 * at path is replaced, as a checkpoint's is.  0 on success; -1 with a
 * message. */
int  tok_write(const char *path, const uint16_t *tokens, int64_t n, char *err, size_t errn);

/* The byte-level vocabulary: token i = byte i of text (0..255).  *out is a
 * malloc'd array of len tokens (free with free()).  0 on success, -1 when
 * out of memory. */
int  tok_from_text_bytes(const char *text, size_t len, uint16_t **out, int64_t *n);

#endif /* TRAINC_TOKENS_H */
