/* tools/interp_backend.h — the reference interpreter as a runtime backend.
 *
 * `trainc run` trains with the interpreter through the same runtime as a
 * compiled executable (runtime/trainc_rt.h): the same training loop, data
 * order, learning-rate schedule, checkpoints and metrics.  So the compiled
 * executable and the interpreter can be compared step by step. */
#ifndef TRAINC_INTERP_BACKEND_H
#define TRAINC_INTERP_BACKEND_H

#include "ir.h"
#include "trainc_rt.h"

typedef struct InterpModel InterpModel;

/* Builds the descriptor and backend from the training graph (phases MICRO
 * and STEP), the eval graph and the sampling graph (NULL if none), baked
 * the descriptor's TrnTrainDefaults.baked (train_baked; NULL: none).  The
 * graphs and baked must outlive the result.  NULL (with a message in d)
 * on error. */
InterpModel    *ib_new(Graph *train, Graph *eval, Graph *sample, InterpMode mode, const char *source, const char *baked, Diag *d);
const TrnModel *ib_model(InterpModel *m);
TrnBackend      ib_backend(InterpModel *m);   /* destroy() frees nothing; ib_free does */
void            ib_free(InterpModel *m);

#endif
