/* tests/interp/test_run.c — the interpreter as a machine: the op table is
 * complete, phases and updates, interp_step with accumulation, runtime
 * errors are located diagnostics (not crashes), and interp_init. */
#include "interp_test.h"
#include "philox.h"

static void test_every_op_implemented(void) {
    for (int op = 0; op < OP__COUNT; op++)
        if (!interp_supports((Op)op)) {
            fprintf(stderr, "the interpreter has no entry for op %s\n", op_name(op));
            failures++;
        }
}

static Node *state(Graph *g, const char *name, Type t) { return ir_source(g, OP_state, name, t, TLOC); }

/* A state counter c incremented by an update; reads in the same phase see
 * the old value; updates are committed only after the whole phase. */
static void test_updates(void) {
    Graph *g = ir_graph_new("t");
    Node *c = state(g, "c", ty(DT_f32, 0));
    Value *one = ir_const(g, 1, ty(DT_f32, 0), TLOC);
    Value *c1 = emit1(g, node(g, OP_add, 2, c->out[0], one));
    ir_add_update(g, c, c1);
    Value *ten = ir_const(g, 10, ty(DT_f32, 0), TLOC);
    Value *later = emit1(g, node(g, OP_mul, 2, c->out[0], ten)); /* after c1 in the list: still the old c */
    ir_add_output(g, "later", later);
    Interp *it = interp_new(g, INTERP_F32);
    for (int k = 1; k <= 3; k++) {
        if (!run_micro(it)) break;
        CHECK_VAL("counter", interp_source(it, "c")->data[0], k, 0);
        CHECK_VAL("a read after the update node sees the old value", interp_result(it, "later"), 10 * (k - 1), 0);
    }
    /* running the other phase commits nothing of this one */
    CHECK(interp_run_phase(it, PH_STEP, &D));
    CHECK_VAL("PH_STEP leaves the micro update alone", interp_source(it, "c")->data[0], 3, 0);
    interp_free(it);
    ir_graph_free(g);
}

/* Two updates that read each other's targets swap them. */
static void test_swap(void) {
    Graph *g = ir_graph_new("t");
    Node *a = state(g, "a", ty(DT_f64, 1, 2)), *b = state(g, "b", ty(DT_f64, 1, 2));
    ir_add_update(g, a, b->out[0]);
    ir_add_update(g, b, a->out[0]);
    Interp *it = interp_new(g, INTERP_F64);
    set_source(it, "a", (double[]){1, 2});
    set_source(it, "b", (double[]){3, 4});
    if (run_micro(it)) {
        CHECK_NEAR("swap a", interp_source(it, "a")->data, ((double[]){3, 4}), 2, 0);
        CHECK_NEAR("swap b", interp_source(it, "b")->data, ((double[]){1, 2}), 2, 0);
    }
    interp_free(it);
    ir_graph_free(g);
}

/* interp_step with accum micro-batches: feed before each, the PH_MICRO
 * updates after each, the mean loss, then PH_STEP once. */
typedef struct FeedLog { int calls[8]; int n; } FeedLog;

static void feed(void *ctx, Interp *it, int micro) {
    FeedLog *log = ctx;
    log->calls[log->n++] = micro;
    interp_source(it, "x")->data[0] = micro + 1;
}

static void test_step_accum(void) {
    Graph *g = ir_graph_new("t");
    Value *x = input(g, "x", ty(DT_f32, 0));
    Node *acc = state(g, "acc", ty(DT_f32, 0)), *steps = state(g, "steps", ty(DT_f32, 0)), *seen = state(g, "seen", ty(DT_f32, 0));
    Value *two = ir_const(g, 2, ty(DT_f32, 0), TLOC);
    Value *loss = emit1(g, node(g, OP_mul, 2, x, two)); /* loss = 2x */
    ir_add_output(g, "loss", loss);
    ir_add_update(g, acc, emit1(g, node(g, OP_add, 2, acc->out[0], x))); /* micro: acc += x */
    /* step phase: seen = acc (the sum over the micro-batches), acc = 0, steps += 1 */
    Value *zero = ir_const(g, 0, ty(DT_f32, 0), TLOC);
    Value *one = ir_const(g, 1, ty(DT_f32, 0), TLOC);
    Node *cp = node(g, OP_add, 2, acc->out[0], zero);
    Node *rs = node(g, OP_mul, 2, acc->out[0], zero);
    Node *inc = node(g, OP_add, 2, steps->out[0], one);
    cp->phase = rs->phase = inc->phase = PH_STEP;
    ir_add_update(g, seen, emit1(g, cp));
    ir_add_update(g, acc, emit1(g, rs));
    ir_add_update(g, steps, emit1(g, inc));
    Interp *it = interp_new(g, INTERP_F32);
    FeedLog log = {{0}, 0};
    double mean = interp_step(it, 3, feed, &log, &D);
    CHECK_VAL("mean loss over 3 micro-batches", mean, (2 + 4 + 6) / 3.0, 0);
    CHECK(log.n == 3 && log.calls[0] == 0 && log.calls[1] == 1 && log.calls[2] == 2);
    CHECK_VAL("the step phase saw every micro update", interp_source(it, "seen")->data[0], 6, 0);
    CHECK_VAL("acc reset by the step phase", interp_source(it, "acc")->data[0], 0, 0);
    CHECK_VAL("steps", interp_source(it, "steps")->data[0], 1, 0);
    CHECK_VAL("interp_result is the last micro-batch's loss", interp_result(it, "loss"), 6, 0);
    CHECK(isnan(interp_result(it, "no such output")));
    log.n = 0;
    mean = interp_step(it, 1, feed, &log, &D);
    CHECK_VAL("accum 1", mean, 2, 0);
    CHECK_VAL("seen after accum 1", interp_source(it, "seen")->data[0], 1, 0);
    CHECK_VAL("steps after two steps", interp_source(it, "steps")->data[0], 2, 0);
    interp_free(it);
    ir_graph_free(g);
}

/* Captures what a run writes to its diagnostics. */
typedef struct Capture { FILE *f; Diag d; char text[4096]; } Capture;

static void capture_begin(Capture *c) {
    c->f = tmpfile();
    diag_init(&c->d, c->f);
}

static void capture_end(Capture *c) {
    size_t n = 0;
    if (c->f) {
        rewind(c->f);
        n = fread(c->text, 1, sizeof c->text - 1, c->f);
        fclose(c->f);
    }
    c->text[n] = 0;
    diag_free(&c->d);
}

static void test_located_errors(void) {
    const SrcLoc at = {"model.l", 3, 5};
    /* embedding index out of range */
    Graph *g = ir_graph_new("t");
    Value *tab = input(g, "table", ty(DT_f32, 2, 4, 2)), *idx = input(g, "idx", ty(DT_i32, 1, 3));
    Node *e = node(g, OP_embedding, 2, tab, idx);
    e->loc = at;
    emit(g, e);
    ir_add_update(g, state(g, "s", ty(DT_f32, 2, 3, 2)), e->out[0]);
    Interp *it = interp_new(g, INTERP_F32);
    set_source(it, "idx", (double[]){1, 7, 0});
    Capture c;
    capture_begin(&c);
    CHECK(!interp_run_phase(it, PH_MICRO, &c.d));
    CHECK(c.d.nerrors == 1);
    capture_end(&c);
    CHECK(strstr(c.text, "model.l:3:5: error: embedding: index 7 at position 1 is outside [0, 4)") != NULL);
    if (!strstr(c.text, "model.l:3:5")) fprintf(stderr, "got: %s\n", c.text);
    CHECK(interp_source(it, "s")->data[0] == 0); /* a failed phase commits nothing */
    set_source(it, "idx", (double[]){-1, 0, 0});
    capture_begin(&c);
    CHECK(!interp_run_phase(it, PH_MICRO, &c.d));
    capture_end(&c);
    CHECK(strstr(c.text, "index -1 at position 0") != NULL);
    set_source(it, "idx", (double[]){3, 0, 0});
    CHECK(run_micro(it));
    interp_free(it);
    ir_graph_free(g);

    /* cross_entropy target out of range, and embedding_grad */
    g = ir_graph_new("t");
    Value *lg = input(g, "logits", ty(DT_f32, 2, 2, 3)), *tg = input(g, "t", ty(DT_i32, 1, 2));
    Node *ce = node(g, OP_cross_entropy, 2, lg, tg);
    ce->loc = at;
    emit(g, ce);
    it = interp_new(g, INTERP_F32);
    set_source(it, "t", (double[]){0, 3});
    capture_begin(&c);
    CHECK(!interp_run_phase(it, PH_MICRO, &c.d));
    capture_end(&c);
    CHECK(strstr(c.text, "model.l:3:5: error: cross_entropy: target 3 at position 1 is outside [0, 3)") != NULL);
    interp_free(it);
    ir_graph_free(g);

    /* a micro node reading a value only the step phase computes */
    g = ir_graph_new("t");
    Value *x = input(g, "x", ty(DT_f32, 0));
    Node *s = node(g, OP_neg, 1, x);
    s->phase = PH_STEP;
    Value *sv = emit1(g, s);
    Node *m = node(g, OP_exp, 1, sv);
    m->loc = at;
    Value *mv = emit1(g, m);
    (void)mv;
    it = interp_new(g, INTERP_F32);
    capture_begin(&c);
    CHECK(!interp_run_phase(it, PH_MICRO, &c.d));
    capture_end(&c);
    CHECK(strstr(c.text, "model.l:3:5: error: exp: operand 1") != NULL);
    CHECK(interp_run_phase(it, PH_STEP, &D));
    CHECK(run_micro(it)); /* now the step value exists */
    interp_free(it);
    ir_graph_free(g);

    /* integer division by zero */
    g = ir_graph_new("t");
    Value *a = input(g, "a", ty(DT_i32, 1, 2)), *b = input(g, "b", ty(DT_i32, 1, 2));
    emit1(g, node(g, OP_div, 2, a, b));
    it = interp_new(g, INTERP_F32);
    set_source(it, "a", (double[]){1, 2});
    capture_begin(&c);
    CHECK(!interp_run_phase(it, PH_MICRO, &c.d));
    capture_end(&c);
    CHECK(strstr(c.text, "integer division by zero") != NULL);
    interp_free(it);
    ir_graph_free(g);

    /* adamw with step 0 */
    g = ir_graph_new("t");
    Value *w = input(g, "w", ty(DT_f32, 1, 1)), *lr = input(g, "lr", ty(DT_f32, 0)), *st = input(g, "step", ty(DT_i32, 0));
    emit(g, node(g, OP_adamw, 7, w, w, w, w, lr, st, lr));
    it = interp_new(g, INTERP_F32);
    capture_begin(&c);
    CHECK(!interp_run_phase(it, PH_MICRO, &c.d));
    capture_end(&c);
    CHECK(strstr(c.text, "adamw: step is 0") != NULL);
    interp_free(it);
    ir_graph_free(g);
}

static Node *param_init(Graph *g, const char *name, Type t, const char *init) {
    Node *p = ir_source(g, OP_param, name, t, TLOC);
    ir_set_str(g, p, "init", init);
    return p;
}

static void test_init(void) {
    enum { N = 100000 };
    Graph *g = ir_graph_new("t");
    ir_set_float(g, param_init(g, "h.0.w", ty(DT_f32, 1, N), "normal"), "std", 0.02);
    Node *u = param_init(g, "u", ty(DT_f32, 2, 100, 10), "uniform");
    ir_set_float(g, u, "lo", -0.5);
    ir_set_float(g, u, "hi", 1.5);
    ir_set_float(g, param_init(g, "c", ty(DT_bf16, 1, 3), "constant"), "value", 0.1);
    param_init(g, "o", ty(DT_f32, 1, 3), "ones");
    Node *z = ir_source(g, OP_state, "z", ty(DT_f32, 1, 3), TLOC); /* zeros by default */
    (void)z;

    Interp *a = interp_new(g, INTERP_F32), *b = interp_new(g, INTERP_F32), *c = interp_new(g, INTERP_F32), *f64 = interp_new(g, INTERP_F64);
    interp_init(a, 42);
    interp_init(b, 42);
    interp_init(c, 43);
    interp_init(f64, 42);
    const double *wa = interp_source(a, "h.0.w")->data, *wb = interp_source(b, "h.0.w")->data, *wc = interp_source(c, "h.0.w")->data;
    const double *w64 = interp_source(f64, "h.0.w")->data;
    CHECK(memcmp(wa, wb, sizeof(double) * N) == 0);
    int same = 0;
    double sum = 0, sq = 0;
    for (int i = 0; i < N; i++) {
        same += wa[i] == wc[i];
        sum += wa[i];
        sq += wa[i] * wa[i];
    }
    CHECK(same < 10);
    double mean = sum / N, sd = sqrt(sq / N - mean * mean);
    CHECK(fabs(mean) < 5 * 0.02 / sqrt(N));
    CHECK(fabs(sd - 0.02) < 0.02 * 0.01);
    /* element i is rng_init_value of (seed, stream of the name, i), rounded to f32 */
    uint64_t stream = rng_name_stream("h.0.w");
    int bad = 0;
    for (int i = 0; i < N; i += 997) {
        double v = rng_init_value("normal", 0.02, 0, 42, stream, (uint64_t)i);
        bad += w64[i] != v || wa[i] != (double)(float)v;
    }
    CHECK(bad == 0);
    const double *uv = interp_source(a, "u")->data;
    double umean = 0;
    int out = 0;
    for (int i = 0; i < 1000; i++) {
        out += !(uv[i] >= -0.5 && uv[i] < 1.5);
        umean += uv[i] / 1000;
    }
    CHECK(out == 0);
    CHECK(fabs(umean - 0.5) < 0.1);
    CHECK_NEAR("constant init, bf16", interp_source(a, "c")->data, ((double[]){0.10009765625, 0.10009765625, 0.10009765625}), 3, 0);
    CHECK_NEAR("constant init, f64 mode", interp_source(f64, "c")->data, ((double[]){0.1, 0.1, 0.1}), 3, 0);
    CHECK_NEAR("ones", interp_source(a, "o")->data, ((double[]){1, 1, 1}), 3, 0);
    CHECK_NEAR("zeros", interp_source(a, "z")->data, ((double[]){0, 0, 0}), 3, 0);
    CHECK(interp_source(a, "nothing") == NULL);
    interp_free(a);
    interp_free(b);
    interp_free(c);
    interp_free(f64);
    ir_graph_free(g);
}

/* Inputs exist (zeros) before any feed; interp_value is NULL before a run. */
static void test_fresh_interp(void) {
    Graph *g = ir_graph_new("t");
    Value *x = input(g, "x", ty(DT_f32, 1, 4));
    Value *y = emit1(g, node(g, OP_exp, 1, x));
    Interp *it = interp_new(g, INTERP_F32);
    Tensor *t = interp_source(it, "x");
    CHECK(t && t->n == 4 && t->data[0] == 0 && t->data[3] == 0);
    CHECK(interp_value(it, y) == NULL);
    CHECK(interp_value(it, x) == t);
    if (run_micro(it)) CHECK_NEAR("exp(0)", val(it, y), ((double[]){1, 1, 1, 1}), 4, 0);
    interp_free(it);
    ir_graph_free(g);
}

/* ASan ends the program on an allocation larger than it supports, where
 * malloc returns NULL: test_out_of_memory needs the NULL. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

/* Tensors too large for memory (2^48 doubles, more than an address space
 * holds): interp_new and interp_init leave them unallocated (they used to
 * abort: "internal error ... out of memory"), and a run fails with an
 * error naming the tensor and its size. */
static void test_out_of_memory(void) {
    const SrcLoc at = {"model.l", 7, 3};
    Graph *g = ir_graph_new("t");
    Node *big = ir_source(g, OP_param, "big", ty(DT_f32, 3, 1 << 20, 1 << 20, 1 << 8), at);
    ir_set_str(g, big, "init", "normal");
    ir_add_output(g, "loss", emit1(g, node(g, OP_sum, 1, big->out[0])));
    Interp *it = interp_new(g, INTERP_F32);
    interp_init(it, 1);
    CHECK(interp_source(it, "big") == NULL);
    Capture c;
    capture_begin(&c);
    CHECK(!interp_run_phase(it, PH_MICRO, &c.d));
    capture_end(&c);
    CHECK(strstr(c.text, "model.l:7:3: error: out of memory for param 'big' (%0, f32[1048576,1048576,256]): 281474976710656 elements, "
                         "2.097e+06 GiB as the interpreter's doubles") != NULL);
    if (!strstr(c.text, "out of memory for param 'big'")) fprintf(stderr, "got: %s\n", c.text);
    interp_free(it);
    ir_graph_free(g);

    /* a computed value: a small input broadcast to the large shape */
    g = ir_graph_new("t");
    Value *x = input(g, "x", ty(DT_f32, 1, 4));
    Node *b = node(g, OP_broadcast, 1, x);
    ir_set_ints(g, b, "shape", 3, (int64_t[]){1 << 20, 1 << 26, 4});
    b->loc = at;
    emit1(g, b);
    it = interp_new(g, INTERP_F32);
    capture_begin(&c);
    CHECK(!interp_run_phase(it, PH_MICRO, &c.d));
    capture_end(&c);
    CHECK(strstr(c.text, "model.l:7:3: error: out of memory for the result of broadcast (%1, f32[1048576,67108864,4])") != NULL);
    if (!strstr(c.text, "the result of broadcast")) fprintf(stderr, "got: %s\n", c.text);
    interp_free(it);
    ir_graph_free(g);
}

int main(void) {
    diag_init(&D, stderr);
    test_every_op_implemented();
    test_updates();
    test_swap();
    test_step_accum();
    test_located_errors();
    test_init();
    test_fresh_interp();
    test_out_of_memory();
    diag_free(&D);
    return finish("interp_run");
}
