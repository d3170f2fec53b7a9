/* runtime/trainc_rt.h — the one public header of the trainc runtime.
 *
 * The runtime is a small C library linked into every training executable
 * (and into the trainc driver, whose `trainc run` trains through the
 * interpreter).  It knows nothing of the compiler: a model reaches it as a
 * TrnModel descriptor (the tensors of one training step and where they
 * live) plus a TrnBackend (something that can run the step's schedules and
 * move tensors in and out).  Generated C code provides the descriptor and a
 * CPU schedule; the CUDA backend and the interpreter backend provide the
 * same interface, so data loading, the training loop, checkpoints, metrics
 * and sampling are written once.
 *
 * No exit() and no printing inside the library functions except trn_main
 * (the command-line program) and the CUDA backend's warnings on stderr
 * (docs/runtime.md): --device auto finding a GPU that fails (it goes on
 * on the CPU), a cubin that does not load, an epilogue cuBLASLt refuses,
 * a CUDA graph that cannot be captured.  The process-wide state
 * it touches: TrnOptions.threads > 0 sets OpenMP's and OpenBLAS's thread
 * counts; a CPU kernel that cannot allocate its scratch memory (outside
 * the memory plan: per-thread rows) prints why and aborts.
 * Errors are return codes (0 = ok, -1 = error) with a message in the
 * session (trn_error), cleared by the next call that can fail.  Pointers
 * are not NULL unless a comment says so; s is a session trn_create made.
 */
#ifndef TRAINC_RT_H
#define TRAINC_RT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TRN_ABI_VERSION 4
#define TRN_MAX_RANK 8

/* Same order as DTYPES in ir/ir.h. */
typedef enum { TRN_F32, TRN_F64, TRN_BF16, TRN_F16, TRN_I32, TRN_I64, TRN_U8 } TrnDType;
extern const int   trn_dtype_size[7];
extern const char *trn_dtype_name[7];      /* "f32", ... */

typedef enum {
    TRN_PARAM,          /* model parameter: checkpointed, initialised from init */
    TRN_STATE,          /* optimizer / accumulator state: checkpointed with --resume */
    TRN_INPUT,          /* fed per micro-batch (tokens, targets) or by the loop (opt.lr, opt.step, rng.seed) */
    TRN_OUTPUT,         /* read after a run (loss, grad_norm, eval.loss, logits) */
} TrnKind;

typedef struct TrnTensor {
    const char *name;               /* ".model" name: "h.0.attn.c_attn.weight", "adamw.m.wte", "tokens", "loss" */
    TrnKind     kind;
    TrnDType    dtype;
    int         rank;
    int64_t     shape[TRN_MAX_RANK];
    int64_t     numel;
    int64_t     offset;             /* byte offset in the arena (compiled backends); -1 if not placed */
    /* Parameters and states: element i = rng_init_value(init, init_a, init_b, seed, rng_name_stream(name), i). */
    const char *init;               /* "zeros" "ones" "normal" "uniform" "constant" */
    double      init_a, init_b;
    int         trainable;          /* params: 0 when frozen */
    /* Checkpoint view (pad-tiles): the tensor is saved and loaded as its leading
     * ckpt_shape sub-block; equal to shape when nothing is padded. */
    int64_t     ckpt_shape[TRN_MAX_RANK];
    /* Inputs read as indices (embedding rows, cross_entropy classes): every
     * element is in [0, index_end), or equals index_ignore when
     * index_ignores (cross_entropy's ignore_index); trn_set refuses other
     * values.  index_end 0: not an index input. */
    int64_t     index_end, index_ignore;
    int         index_ignores;
} TrnTensor;
/* A state named "amp.bf16.P" or "amp.f16.P" is mixed precision's
 * half-precision copy of param P (only the compiler makes states).  The
 * training graph refreshes it after each update; the runtime after
 * initialising or loading (TRN_RUN_REFRESH when the model has it), or
 * trn_set of P (on the host); it is not checkpointed.  A state named
 * "grad_acc.P" is gradient accumulation's sum of P's gradient over a
 * step's micro-batches (grad_accum > 1): TRN_RUN_MICRO adds into it,
 * TRN_RUN_UPDATE reads and zeroes it, and a trn_step that fails before
 * its update zeroes it too. */

/* The schedules a backend can run. */
typedef enum {
    TRN_RUN_MICRO,      /* one micro-batch of a training step (forward, backward, accumulate; the update too when grad_accum == 1) */
    TRN_RUN_UPDATE,     /* the once-per-step part (empty when grad_accum == 1) */
    TRN_RUN_EVAL,       /* forward only: writes the "eval.loss" output; changes no param or state */
    TRN_RUN_SAMPLE,     /* forward only: writes the "logits" output; changes no param or state */
    TRN_RUN_REFRESH,    /* every half-precision copy amp.<dt>.P := P cast, as the update casts it */
    TRN_RUN__COUNT
} TrnRun;

enum { TRN_FLAG_POISON = 1 };

/* Training defaults from the model's train section (command-line flags override). */
typedef struct TrnTrainDefaults {
    const char *optimizer;          /* "adamw" | "sgd" */
    const char *schedule;           /* "constant" | "cosine" | "linear" */
    double      lr, min_lr, grad_clip, loss_scale;
    int64_t     warmup, steps, grad_accum, seed, eval_every, eval_steps, save_every, loss_scale_window;
    const char *precision;          /* "fp32" | "tf32" | "bf16" | "fp16" */
    /* What the compiled step holds that no flag changes (the optimizer's
     * constants, LoRA's, what is frozen: "beta2=0.95", one a line, then
     * each -D "-D dropout=0.1"), recorded in checkpoints: a load into a
     * step compiled with other settings says which (trn_load_note); NULL:
     * not known, not checked. */
    const char *baked;
} TrnTrainDefaults;

/* A memory-plan line for --report: category and bytes. */
typedef struct TrnMemLine { const char *what; int64_t bytes; } TrnMemLine;

typedef struct TrnModel {
    int               abi;          /* TRN_ABI_VERSION */
    const char       *name;         /* "gpt2" */
    const char       *source;       /* the .model path it was compiled from */
    int               ntensors;
    const TrnTensor  *tensors;
    /* Indices into tensors, -1 when absent. */
    int               t_tokens, t_targets;         /* i32 [B,T] language-model inputs */
    int               t_lr, t_step, t_seed;        /* scalar inputs "opt.lr" f32, "opt.step" i32, "rng.seed" i32 */
    int               t_loss, t_grad_norm;         /* outputs of TRN_RUN_MICRO / TRN_RUN_UPDATE */
    int               t_eval_loss, t_logits;       /* outputs of TRN_RUN_EVAL / TRN_RUN_SAMPLE */
    int64_t           vocab;                       /* logits' last dimension (unpadded), 0 if not a language model */
    int               refresh;                     /* TRN_RUN_REFRESH refreshes every copy (else the runtime converts on the host) */
    TrnTrainDefaults  train;
    int64_t           arena_bytes;                 /* compiled backends: the whole memory plan */
    int               nmem;                        /* the memory report */
    const TrnMemLine *mem;
    /* Compiled CPU schedules (NULL for other backends): each runs on the
     * arena; flags: TRN_FLAG_POISON fills every buffer with NaN when it dies. */
    void            (*cpu_run[TRN_RUN__COUNT])(unsigned char *arena, int flags);
    /* Compiled CUDA module (NULL when not compiled for CUDA): opaque, read by the CUDA backend. */
    const void       *cuda;
} TrnModel;

/* A backend runs schedules and moves tensors between host and its memory.
 * Host data is in the tensor's dtype, row-major, numel elements. */
/* How a parameter or state starts: element k < n (of the checkpoint view,
 * a prefix of the tensor) is rng_init_value(init, a, b, seed, stream, k)
 * of philox.h, the rest zero. */
typedef struct TrnInitSpec {
    const char *init;                                   /* "zeros", "ones", "constant", "normal", "uniform" */
    double      a, b;
    uint64_t    seed, stream;
    int64_t     n;
} TrnInitSpec;

typedef struct TrnBackend {
    const char *name;                                   /* "cpu", "cuda", "interp" */
    void       *self;
    int  (*run)(void *self, TrnRun which, char *err, size_t errn);
    int  (*read)(void *self, int tensor, void *dst, char *err, size_t errn);
    int  (*write)(void *self, int tensor, const void *src, char *err, size_t errn);
    void (*destroy)(void *self);
    int64_t     device_bytes;                           /* bytes it allocated for the arena */
    /* optional: initialises an f32 tensor where it lives, bit for bit as
     * the host would: 0 done, 1 not here (the session computes it on the
     * host and writes it), -1 error */
    int  (*init)(void *self, int tensor, const TrnInitSpec *spec, char *err, size_t errn);
    /* optional: reads elements [first, first + count) of a tensor (a range
     * past it is an error), so that a row of a large tensor does not cost
     * a copy of all of it (the sampler's row of logits) */
    int  (*read_part)(void *self, int tensor, int64_t first, int64_t count, void *dst, char *err, size_t errn);
} TrnBackend;

/* Backends the runtime provides. */
int trn_cpu_backend(const TrnModel *m, TrnBackend *out, char *err, size_t errn);   /* needs m->cpu_run */
int trn_cuda_backend(const TrnModel *m, TrnBackend *out, char *err, size_t errn);  /* -2 with a clear message when there is no GPU, no driver, or no CUDA module; -1 when a GPU is there and fails */

/* ---- sessions: the embedding API ---- */

typedef struct TrnOptions {
    const char *device;             /* "auto" (default), "cpu", "cuda" */
    int         threads;            /* host threads, OpenMP and initialisation (0 = default; < 0 an error) */
    int64_t     seed;               /* -1 = the model's default (< -1 an error) */
    int         poison;             /* fill dead buffers with NaN (memory-plan checking) */
} TrnOptions;

typedef struct TrnSession TrnSession;

/* Creates a session on the device asked for, with freshly initialised
 * parameters and zeroed states.  NULL on failure with the reason in err. */
TrnSession *trn_create(const TrnModel *m, const TrnOptions *opt, char *err, size_t errn);
/* Same with a backend made by the caller (the interpreter backend).  The
 * session owns be from then on: trn_destroy destroys it, and so does a
 * failed trn_create_with_backend. */
TrnSession *trn_create_with_backend(const TrnModel *m, TrnBackend be, const TrnOptions *opt, char *err, size_t errn);
void        trn_destroy(TrnSession *s);
const char *trn_error(const TrnSession *s);             /* the last error message */
const TrnModel *trn_model(const TrnSession *s);
/* The backend the session runs on: "cpu", "cuda" (what device "auto"
 * chose), or the name of a backend made by the caller ("interp").  NULL
 * for a NULL session. */
const char *trn_device(const TrnSession *s);
int         trn_find(const TrnSession *s, const char *name);   /* tensor index, -1 if none */

/* Copies host data (tensor dtype, numel elements) into an input or any
 * tensor, or out of one.  An index input (TrnTensor index_end) takes only
 * values in range: tokens below the vocabulary, say. */
int trn_set(TrnSession *s, const char *name, const void *data, size_t bytes);
int trn_get(TrnSession *s, const char *name, void *data, size_t bytes);

/* One optimizer step of grad_accum micro-batches.  feed(ctx, s, micro) sets
 * the inputs of each micro-batch (trn_set); it may be NULL when the inputs
 * are already set and grad_accum == 1.  lr < 0 uses the schedule; NaN and
 * infinities are errors.  The mean
 * loss over the micro-batches is available from trn_loss afterwards.  A
 * step that fails before its update ran (a feed that fails, a refused
 * value) changes no parameter or state and is not counted: the next
 * trn_step is the step again.  One whose update ran is counted, also when
 * reading its loss or gradient norm fails after it; one whose update
 * fails may have applied part of it.  Each step counts grad_accum
 * micro-batches into a checkpoint's data.pos. */
typedef int (*TrnFeed)(void *ctx, TrnSession *s, int micro);
int    trn_step(TrnSession *s, TrnFeed feed, void *ctx, double lr);
double trn_loss(const TrnSession *s);                    /* mean loss of the last step */
double trn_grad_norm(const TrnSession *s);               /* NAN when the model has none */
int64_t trn_step_count(const TrnSession *s);             /* steps taken so far */
double trn_lr_at(const TrnSession *s, int64_t step);     /* the schedule */
/* Replaces the schedule (defaults: the model's train section; trn_load with
 * state restores the saved one).  schedule NULL keeps the current one;
 * total is the run's step count that cosine and linear decay over. */
int    trn_set_schedule(TrnSession *s, const char *schedule, double lr, double min_lr, int64_t warmup, int64_t total);
/* Forward-only loss of the inputs currently set (TRN_RUN_EVAL). */
int    trn_eval(TrnSession *s, double *loss);
/* Forward-only logits of the inputs currently set (TRN_RUN_SAMPLE): the
 * "logits" output, f32 in every precision (the compiler casts bf16/f16
 * logits), in the model's unpadded shape; bytes must be 4 x its element
 * count.  A classifier gives [B, classes].  A language model (tokens
 * [B, T]) gives the next-token logits of each sequence, [B, V]: after
 * position T-1 (trn_predict) or after position pos[b] of sequence b
 * (trn_predict_at, 0 <= pos[b] < T; pos NULL: T-1, as trn_predict); when
 * the compiler did not recognise its head (docs/codegen.md) it gives every
 * position's, [B, T, V], and trn_predict_at with a pos fails, as it does
 * for a classifier. */
int    trn_predict(TrnSession *s, void *logits, size_t bytes);
int    trn_predict_at(TrnSession *s, const int64_t *pos, void *logits, size_t bytes);

/* Checkpoints (safetensors): parameters by name; with_state adds the
 * optimizer/accumulator states and the step, data position and seed in the
 * metadata.  Written to a new file beside PATH (PATH.PID.tmp, made with
 * O_EXCL: no existing file is opened) and renamed: a crash never leaves a
 * broken checkpoint.  trn_load with params_only checks names and shapes strictly
 * (missing, extra or mis-shaped tensors are errors naming them). */
int trn_save(TrnSession *s, const char *path, int with_state);
/* (params_only: a LoRA model's adapters, params named "….lora_A…" and
 * "….lora_B…", may all be missing from the file, a base model's
 * checkpoint: they keep their initial values.) */
int trn_load(TrnSession *s, const char *path, int params_only);
/* After a trn_load that succeeded: "" when the file's step was compiled
 * with this one's settings (TrnTrainDefaults.baked; or either does not
 * say), else which differ, one line ("lora_alpha is 16 in the
 * checkpoint, 32 here; -D dropout=0.1 only here").  A resume compares
 * them all, an --init (params_only) LoRA's alone: the others do not
 * change what the parameters mean. */
const char *trn_load_note(const TrnSession *s);
/* After a trn_load that succeeded: "" when every float it loaded is
 * finite, else the first tensor holding NaNs or infinities, how many,
 * and how many other tensors hold some ("'h0.w' holds 3 NaNs or
 * infinities of 4096 values, and 2 more tensors hold some"): a run that
 * diverged, or a broken conversion.  They are loaded as they are. */
const char *trn_load_nonfinite(const TrnSession *s);
/* After a resume (trn_load, not params_only) that succeeded: "" when the
 * file names no model or this one (metadata "model"), else the model it
 * names: another model's run, whose tensors all fit this one's. */
const char *trn_load_model(const TrnSession *s);

/* ---- the command-line program every executable gets ---- */

/* Parses argv (--data, --val, --steps, --lr, ... see docs/runtime.md), trains,
 * prints the progress line, writes metrics and checkpoints.  Returns the
 * process exit status.  be may be NULL (then --device picks a backend);
 * otherwise trn_main owns it (it is destroyed before trn_main returns). */
int trn_main(int argc, char **argv, const TrnModel *m, const TrnBackend *be);

#ifdef __cplusplus
}
#endif
#endif /* TRAINC_RT_H */
