/* codegen/compile.h — the entry point of `trainc compile` for the driver. */
#ifndef TRAINC_COMPILE_H
#define TRAINC_COMPILE_H

#include "ir.h"

typedef struct Program Program;

typedef struct CompileOptions {
    const char   *model;        /* the .model file */
    const Define *defs;         /* -D overrides */
    int           ndefs;
    const char   *out;          /* -o: executable, or prefix of NAME.c / NAME.h */
    const char   *symbol;       /* --symbol: trn_model_ID (a C identifier); NULL: from the model's name */
    const char   *emit;         /* NULL (executable), "kernels", "c", "lib", "cuda" (the .cu and its resource report) */
    const char   *target;       /* "cpu" (default) or "cuda" */
    const char   *archs;        /* --arch (cuda target): "sm_80,sm_90" (the default) */
    bool          keep;         /* keep the generated C next to the executable */
    bool          report;       /* print the memory plan */
    bool          stats;        /* print the model graph's statistics (trainc ir --stats) on stderr, before the passes */
    bool          fuse;         /* generic fusion (--no-fuse turns it off) */
    bool          no_tc_attention; /* cuda target: half attention on the CUDA cores (--no-tc-attention) */
    int           tc_attention_rows; /* cuda target: row tiles a warp in the tensor-core attention forward and dq (--tc-attention-rows; 0: chosen from D) */
    bool          blas;         /* GEMMs through OpenBLAS (default on) */
    bool          native;       /* -march=native: the output then depends on this machine */
    bool          verbose;      /* print the C compiler's command line */
    const char   *cc;           /* C compiler (default: $CC or cc) */
    const char   *opt;          /* optimisation flag (default -O2) */
    const char *const *sets;    /* train-section overrides "key=value" (--set), NULL-terminated */
    PassOptions   po;
    PMOptions     pm;
} CompileOptions;

/* Compiles as asked; returns the exit status (0 ok, 1 error, 2 usage). */
int         cg_compile(const CompileOptions *o, Diag *d);
/* Loads the model and makes its three graphs: training (after the
 * training pipeline), eval (forward, dropout off) and sampling (forward to
 * the logits; NULL when the loss is not a cross-entropy of logits). */
bool        cg_prepare(const CompileOptions *o, Graph **train, Graph **eval, Graph **sample, Diag *d);
/* Loads the model and lowers it (used by cg_compile and by tests). */
Program    *cg_build(const CompileOptions *o, Graph **train, Graph **fwd, Graph **sample, Diag *d);
/* checkpoint = budget: how many of the last repeated blocks keep their
 * activations with the arena within budget (memory_budget), into o->po
 * (ckpt_keep, ckpt_chosen); cg_prepare calls it, trainc ir --train too.
 * False, with an error, when even recomputing every block is over. */
bool        cg_choose_checkpoint(CompileOptions *o, const TrainConfig *tc, Diag *d);
/* Applies "key=value" train-section overrides to g->train. */
bool        cg_apply_sets(Graph *g, const char *const *sets, Diag *d);
/* The runtime generated code is built with: its headers' folder and its
 * static library ($TRAINC_RUNTIME_DIR, $TRAINC_RT_LIB; else an installed
 * trainc's, PREFIX/share/trainc/runtime and PREFIX/lib/trainc; else the
 * trees trainc was built in).  `trainc --version` prints both. */
const char *cg_runtime_dir(void);
/* The C compiler's flags for generated C besides the optimisation level,
 * NULL-terminated: C11, OpenMP, _GNU_SOURCE, and -fno-trapping-math, which
 * lets the float selects of trn_expf become vector blends (no value
 * changes).  `compile` uses them, and so do the tests that build generated
 * C themselves. */
extern const char *const cg_cflags[];
/* The folder of the OpenBLAS generated code links ("" = the default one). */
const char *cg_openblas_dir(void);
const char *cg_runtime_lib(void);

#endif
