/* tests/runtime/bigram.h — hand-written TrnModels for the runtime's tests:
 * a bigram language model (logits = w[token] + b, softmax cross-entropy)
 * with its gradient and update written in plain C as the CPU schedules,
 * the way generated code would provide them.
 *
 *   bigram_adam   V=256 bytes, B=4, T=16; w is [256, 264], padded by 8
 *                 columns (ckpt_shape [256, 256]); AdamW inside
 *                 TRN_RUN_MICRO (grad_accum 1); dropout (p=0.1, rng.seed)
 *                 on the logits' gradient, so resuming must restore seeds.
 *   bigram_accum  the same without padding (ckpt_shape left 0), SGD with
 *                 grad_accum 2: TRN_RUN_MICRO accumulates into states,
 *                 TRN_RUN_UPDATE applies and clears them.
 *   bigram_tiny   V=8, B=2, T=4, AdamW: small checkpoints for the
 *                 corrupt-file tests and the fuzzer.
 */
#ifndef TRAINC_TEST_BIGRAM_H
#define TRAINC_TEST_BIGRAM_H

#include "trainc_rt.h"

extern const TrnModel bigram_adam, bigram_accum, bigram_tiny;

/* Writes n tokens of deterministic English-like byte text (an llm.c .bin
 * file made with the runtime's tok_write).  0 on success. */
int bigram_write_text_tokens(const char *path, int64_t n, unsigned seed);

#endif
