/* ir/ops.h — the op table.  One row per op; the enum, the name table and the
 * property table are generated from it (see ir.h), and every other column
 * (shape inference in ir/infer.c, the interpreter in ir/interp.c, gradient
 * rules in passes/grad.c, lowering in codegen/) is an array indexed by Op
 * that its module fills with designated initialisers.  tests/unit checks
 * that every op has every column it needs.
 *
 * OP(name, min_in, max_in, nout, flags)
 *   max_in  = -1: variadic
 *   nout        : number of results
 *   flags       : OPF_* (ir.h)
 *
 * Conventions used in the comments: shapes in brackets, "..." any leading
 * dims, B batch, H heads, T sequence, D head dim, V vocabulary, C channels.
 * Every op with OPF_DIFF has a gradient rule.  Results are listed in order.
 */

/* ---- sources: no operands; the node's declared type is its result type ---- */
OP(input,      0, 0, 1, OPF_SOURCE)              /* {name}: fed per micro-batch (tokens, targets) or by the runtime (opt.lr, opt.step, rng.seed) */
OP(param,      0, 0, 1, OPF_SOURCE)              /* {name, init, std|lo,hi|value, frozen}: a model parameter */
OP(state,      0, 0, 1, OPF_SOURCE)              /* {name, init}: non-parameter state carried across steps (optimizer moments, grad accumulators) */
OP(constant,   0, 0, 1, OPF_SOURCE)              /* {value}: every element equals value */
OP(iota,       0, 0, 1, OPF_SOURCE)              /* {axis}: element = its index along axis (positions) */

/* ---- pointwise unary: x -> y, same shape ---- */
OP(neg,        1, 1, 1, OPF_POINTWISE|OPF_DIFF)
OP(exp,        1, 1, 1, OPF_POINTWISE|OPF_DIFF)
OP(log,        1, 1, 1, OPF_POINTWISE|OPF_DIFF)
OP(sqrt,       1, 1, 1, OPF_POINTWISE|OPF_DIFF)
OP(rsqrt,      1, 1, 1, OPF_POINTWISE|OPF_DIFF)
OP(tanh,       1, 1, 1, OPF_POINTWISE|OPF_DIFF)
OP(sigmoid,    1, 1, 1, OPF_POINTWISE|OPF_DIFF)
OP(relu,       1, 1, 1, OPF_POINTWISE|OPF_DIFF)
OP(gelu,       1, 1, 1, OPF_POINTWISE|OPF_DIFF)  /* {approx: 0 = erf (exact), 1 = tanh} */
OP(silu,       1, 1, 1, OPF_POINTWISE|OPF_DIFF)
OP(abs,        1, 1, 1, OPF_POINTWISE|OPF_DIFF)
OP(sign,       1, 1, 1, OPF_POINTWISE)           /* -1, 0, 1; zero gradient */
OP(cast,       1, 1, 1, OPF_POINTWISE|OPF_DIFF)  /* {dtype}: convert (round to nearest even) */

/* ---- pointwise binary, numpy broadcasting: (a, b) -> y ---- */
OP(add,        2, 2, 1, OPF_POINTWISE|OPF_DIFF|OPF_COMMUTE)
OP(sub,        2, 2, 1, OPF_POINTWISE|OPF_DIFF)
OP(mul,        2, 2, 1, OPF_POINTWISE|OPF_DIFF|OPF_COMMUTE)
OP(div,        2, 2, 1, OPF_POINTWISE|OPF_DIFF)
/* maximum and minimum do not commute: of -0.0 and +0.0 each gives its
 * second operand (a > b ? a : b), and CSE must not merge the two orders */
OP(maximum,    2, 2, 1, OPF_POINTWISE|OPF_DIFF)
OP(minimum,    2, 2, 1, OPF_POINTWISE|OPF_DIFF)
OP(ge,         2, 2, 1, OPF_POINTWISE)           /* 1 where a >= b else 0, in a's dtype; zero gradient */

/* ---- pointwise gradients: (dy, saved) -> dx ---- */
OP(tanh_grad,    2, 2, 1, OPF_POINTWISE)         /* (dy, y): dy * (1 - y^2) */
OP(sigmoid_grad, 2, 2, 1, OPF_POINTWISE)         /* (dy, y): dy * y * (1 - y) */
OP(relu_grad,    2, 2, 1, OPF_POINTWISE)         /* (dy, x): x > 0 ? dy : 0 */
OP(gelu_grad,    2, 2, 1, OPF_POINTWISE)         /* (dy, x) {approx} */
OP(silu_grad,    2, 2, 1, OPF_POINTWISE)         /* (dy, x): dy * s * (1 + x (1 - s)), s = sigmoid(x) */

/* ---- reductions {axes: ints, sorted, non-negative; keepdim: 0|1} ---- */
OP(sum,        1, 1, 1, OPF_REDUCE|OPF_DIFF)
OP(mean,       1, 1, 1, OPF_REDUCE|OPF_DIFF)
OP(max,        1, 1, 1, OPF_REDUCE|OPF_DIFF)
OP(max_grad,   3, 3, 1, 0)                       /* (dy, x, y) {axes, keepdim}: dy where x == y (every tie gets it) */

/* ---- shape ---- */
OP(reshape,    1, 1, 1, OPF_VIEW|OPF_DIFF)       /* {shape} */
OP(permute,    1, 1, 1, OPF_DIFF)                /* {perm}: y.shape[i] = x.shape[perm[i]] */
OP(broadcast,  1, 1, 1, OPF_DIFF)                /* {shape}: numpy broadcast of x to shape */
OP(slice,      1, 1, 1, OPF_DIFF)                /* {axis, start, end}: x[..., start:end, ...] */
OP(pad,        1, 1, 1, OPF_DIFF)                /* {axis, lo, hi}: zeros before and after along axis */
OP(concat,     1, -1, 1, OPF_DIFF)               /* {axis} */

/* ---- linear algebra ---- */
OP(matmul,     2, 2, 1, OPF_DIFF)                /* (a [...,M,K], b [...,K,N]) {ta, tb, [dtype]}: batch dims broadcast; ta/tb read a/b transposed; dtype f32: half operands summed into an f32 result (rounded once) */

/* ---- neural-network ops ---- */
OP(embedding,       2, 2, 1, OPF_DIFF)           /* (table [V,C], idx i32[...]) -> [...,C] */
OP(embedding_grad,  2, 2, 1, 0)                  /* (dy [...,C], idx [...]) {rows=V} -> [V,C], scatter-add */
OP(softmax,         1, 1, 1, OPF_DIFF)           /* {axis} */
OP(softmax_grad,    2, 2, 1, 0)                  /* (dy, y) {axis} */
OP(layer_norm,      3, 3, 3, OPF_DIFF)           /* (x [...,C], w [C], b [C]) {eps} -> (y [...,C], mean [...], rstd [...]) */
OP(layer_norm_grad, 5, 5, 3, 0)                  /* (dy, x, w, mean, rstd) -> (dx, dw, db) */
OP(rms_norm,        2, 2, 2, OPF_DIFF)           /* (x [...,C], w [C]) {eps} -> (y, rstd [...]) */
OP(rms_norm_grad,   4, 4, 2, 0)                  /* (dy, x, w, rstd) -> (dx, dw) */
OP(rope,            1, 1, 1, OPF_DIFF)           /* (x [...,T,D]) {theta, inverse}: rotate-half RoPE, position = index along T; inverse=1 rotates back (its own gradient) */
OP(attention,       3, 3, 2, OPF_DIFF)           /* (q [B,H,T,D], k [B,Hkv,T,D], v [B,Hkv,T,D]) {causal, scale} -> (o [B,H,T,D], lse f32[B,H,T]); H % Hkv == 0 */
OP(attention_grad,  6, 6, 3, 0)                  /* (do, q, k, v, o, lse) {causal, scale} -> (dq, dk, dv) */
OP(dropout,         2, 2, 1, OPF_DIFF|OPF_RANDOM)/* (x, seed i32[]) {p, stream}: mask from Philox(seed, stream, element index); the gradient is the same dropout applied to dy */
OP(cross_entropy,   2, 2, 2, OPF_DIFF)           /* (logits [...,V], targets i32[...]) {ignore_index, classes} -> (loss f32[] mean over kept rows, lse f32[...]); only the first `classes` logits of a row count (pad-tiles' padding) */
OP(cross_entropy_grad, 4, 4, 1, 0)               /* (dloss f32[], logits, targets, lse) {ignore_index, classes} -> dlogits */

/* ---- fused ops (passes/liger.c makes them; docs/passes.md) ---- */
OP(add_layer_norm,      4, 4, 4, OPF_DIFF|OPF_FUSED) /* (x [...,C], r [...,C], w [C], b [C]) {eps} -> (y, s = x + r, mean [...], rstd [...]): layer_norm of the residual sum s, which is a result too */
OP(add_layer_norm_grad, 6, 6, 3, OPF_FUSED)      /* (dy, ds, s, w, mean, rstd) -> (dx, dw, db): dx = ds + layer_norm's input gradient (x and r both get dx) */
OP(add_rms_norm,        3, 3, 3, OPF_DIFF|OPF_FUSED) /* (x [...,C], r [...,C], w [C]) {eps} -> (y, s = x + r, rstd [...]) */
OP(add_rms_norm_grad,   5, 5, 2, OPF_FUSED)      /* (dy, ds, s, w, rstd) -> (dx, dw): dx = ds + rms_norm's input gradient */
OP(rope_qk,         2, 4, 2, OPF_DIFF|OPF_FUSED) /* (q [...,T,D], k [...,T,D] [, cos [T,D], sin [T,D]]) {theta, inverse} -> (q', k'): rope of q and k in one kernel; with tables y = x cos + rotate_half(x) sin; inverse=1 applies the transpose (its own gradient) */
OP(swiglu,     2, 2, 1, OPF_POINTWISE|OPF_DIFF|OPF_FUSED) /* (a, b): silu(a) * b; the gradient recomputes silu(a) */
OP(geglu,      2, 2, 1, OPF_POINTWISE|OPF_DIFF|OPF_FUSED) /* (a, b) {approx}: gelu(a) * b; the gradient recomputes gelu(a) */
OP(linear_cross_entropy, 3, 3, 3, OPF_DIFF|OPF_FUSED) /* (x [...,C], w [V,C], targets i32[...]) {ignore_index, classes, chunk} -> (loss f32[], dx f32[...,C], dw f32[V,C]): cross_entropy(x w^T) and its gradients (for dloss = 1), chunk rows at a time; the logits never exist; they and softmax - onehot are rounded to x's dtype */

/* ---- optimizer ---- */
OP(global_norm, 1, -1, 1, OPF_OPT)               /* (g...) -> f32[] sqrt(sum of squares of every element of every operand) */
OP(clip_coef,   1, 1, 1, OPF_OPT)                /* (norm f32[]) {max_norm} -> f32[] min(1, max_norm / (norm + 1e-6)) */
OP(adamw,       7, 8, 3, OPF_OPT)                /* (w, g, m, v, lr f32[], step i32[], gscale f32[] [, skip f32[]]) {beta1, beta2, eps, wd} -> (w', m', v'); g is multiplied by gscale first; step counts from 1; skip != 0: every result equals its operand */
OP(sgd,         5, 6, 2, OPF_OPT)                /* (w, g, buf, lr f32[], gscale f32[] [, skip f32[]]) {momentum, wd, nesterov} -> (w', buf'); skip != 0: w' = w, buf' = buf */
OP(loss_scale_update, 4, 4, 4, OPF_OPT)          /* (scale, good, skipped, norm: f32[]) {window} -> (scale', good', skipped', skip): fp16 dynamic loss scaling (docs/passes.md) */
