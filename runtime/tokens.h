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

/* Writes n tokens to path: first to "path.tmp", then renamed over path, so a
 * reader never sees half a file.  0 on success; -1 with a message. */
int  tok_write(const char *path, const uint16_t *tokens, int64_t n, char *err, size_t errn);

/* The byte-level vocabulary: token i = byte i of text (0..255).  *out is a
 * malloc'd array of len tokens (free with free()).  0 on success, -1 when
 * out of memory. */
int  tok_from_text_bytes(const char *text, size_t len, uint16_t **out, int64_t *n);

#endif /* TRAINC_TOKENS_H */
