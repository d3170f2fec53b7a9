/* tests/ir/test_ir.c — unit tests of the IR text format, the verifier, the
 * statistics, the cleanup passes and the pass manager, on graphs built with
 * the builder API.  (Text-level behaviour is tested by the FileCheck tests in
 * tests/ir/; this file covers what text cannot express: graphs only a buggy
 * pass could build, exact printer bytes, counts.) */
#include "ir_test.h"

#include <math.h>

static Diag D;

/* ---- printer ---- */

static void test_print_basic(void) {
    Graph *g = ir_graph_new("t");
    Value *x = ir_source(g, OP_input, "x", ty(DT_f32, 2, 4, 8), (SrcLoc){"m.model", 3, 5})->out[0];
    Value *w = ir_source(g, OP_param, "w", ty(DT_f32, 1, 8), NOLOC)->out[0];
    Value *y = ir_op2(g, OP_mul, x, w, (SrcLoc){"m.model", 7, 11}, &D);
    Value *c = ir_const(g, 2.0, ty(DT_f32, 0), NOLOC);
    Value *z = ir_op2(g, OP_add, y, c, NOLOC, &D);
    Node *s = ir_new(g, OP_sum, 1, &z, NOLOC);
    ir_set_ints(g, s, "axes", 0, NULL);
    ir_emit(g, s, &D);
    ir_add_output(g, "loss", s->out[0]);
    char *txt = print_str(g, false);
    CHECK_STR(txt, "graph @t {\n"
                   "  %x = input {name=\"x\"} : f32[4,8]\n"
                   "  %w = param {name=\"w\"} : f32[8]\n"
                   "  %0 = mul %x, %w : f32[4,8]\n"
                   "  %1 = constant {value=2.0} : f32[]\n"
                   "  %2 = add %0, %1 : f32[4,8]\n"
                   "  %3 = sum %2 {axes=[], keepdim=0} : f32[4,8]\n"
                   "  output \"loss\" %3\n"
                   "}\n");
    free(txt);
    txt = print_str(g, true);
    /* '#' in column 61 when the line is shorter */
    CHECK_HAS(txt, "  %x = input {name=\"x\"} : f32[4,8]                          # m.model:3:5\n");
    CHECK_HAS(txt, "  %0 = mul %x, %w : f32[4,8]                                # m.model:7:11\n");
    CHECK_HAS(txt, "  %w = param {name=\"w\"} : f32[8]\n"); /* no loc: no comment */
    free(txt);
    ir_graph_free(g);
}

static void test_print_names(void) {
    Graph *g = ir_graph_new("names");
    Value *a = ir_source(g, OP_input, "x", ty(DT_f32, 1, 4), NOLOC)->out[0];
    Value *b = ir_op1(g, OP_neg, a, NOLOC, &D);
    b->name = "x";                       /* taken: x.1 */
    Value *c = ir_op1(g, OP_neg, b, NOLOC, &D);
    c->name = "x.1";                     /* taken by b: x.1.1 */
    Value *d = ir_op1(g, OP_neg, c, NOLOC, &D);
    d->name = "h.0 attn/q";              /* sanitised */
    Value *e = ir_op1(g, OP_neg, d, NOLOC, &D);
    e->name = "42";                      /* all digits: numbered */
    Value *f = ir_op1(g, OP_neg, e, NOLOC, &D);
    f->name = "x";                       /* x.1 is taken: x.2 */
    Value *h = ir_op1(g, OP_neg, f, NOLOC, &D);
    char *txt = print_str(g, false);
    CHECK_STR(txt, "graph @names {\n"
                   "  %x = input {name=\"x\"} : f32[4]\n"
                   "  %x.1 = neg %x : f32[4]\n"
                   "  %x.1.1 = neg %x.1 : f32[4]\n"
                   "  %h.0_attn_q = neg %x.1.1 : f32[4]\n"
                   "  %0 = neg %h.0_attn_q : f32[4]\n"
                   "  %x.2 = neg %0 : f32[4]\n"
                   "  %1 = neg %x.2 : f32[4]\n"
                   "}\n");
    (void)h;
    /* the parser keeps the names: print(parse(print(g))) == print(g) */
    Capture cap;
    cap_init(&cap);
    Graph *p = ir_parse("names.ir", txt, &cap.d);
    CHECK(p != NULL);
    if (p) {
        char *again = print_str(p, false);
        CHECK_STR(again, txt);
        free(again);
        ir_graph_free(p);
    }
    cap_free(&cap);
    free(txt);
    ir_graph_free(g);
}

static void test_print_attrs_train_phases(void) {
    Graph *g = ir_graph_new("odd name!");
    char err[256];
    CHECK(train_set(&g->train, g->arena, "grad_accum", "4", err, sizeof err));
    CHECK(train_set(&g->train, g->arena, "optimizer", "sgd", err, sizeof err));
    CHECK(train_set(&g->train, g->arena, "lr", "0.0006", err, sizeof err));
    CHECK(train_set(&g->train, g->arena, "freeze", "wte,h.*", err, sizeof err));
    Node *x = ir_source(g, OP_param, "w\"q\\\n\t\x01", ty(DT_f32, 1, 2), NOLOC);
    ir_set_float(g, x, "std", 1e-5);
    /* values of each kind that print oddly, under keys the verifier knows */
    ir_set_int(g, x, "start", -9007199254740993LL);
    ir_set_ints(g, x, "perm", 3, (int64_t[]){1, -2, 3});
    ir_set_float(g, x, "theta", 1.0 / 0.0);
    ir_set_float(g, x, "wd", -1.0 / 0.0);
    ir_set_float(g, x, "value", -0.0);
    ir_set_str(g, x, "init", "normal");
    Node *st = ir_source(g, OP_state, "m", ty(DT_f32, 1, 2), NOLOC);
    Value *in[2] = {st->out[0], x->out[0]};
    Node *upd = ir_new(g, OP_add, 2, in, NOLOC);
    upd->phase = PH_STEP;
    ir_emit(g, upd, &D);
    ir_add_update(g, st, upd->out[0]);
    char *txt = print_str(g, false);
    CHECK_STR(txt, "graph @odd_name_ {\n"
                   "  train {optimizer=\"sgd\", lr=0.0006, grad_accum=4, freeze=\"wte,h.*\"}\n"
                   "  %w_q____ = param {init=\"normal\", name=\"w\\\"q\\\\\\n\\t\\x01\", perm=[1,-2,3], start=-9007199254740993, "
                   "std=1e-05, theta=inf, value=-0.0, wd=-inf} : f32[2]\n"
                   "  %m = state {name=\"m\"} : f32[2]\n"
                   "step:\n"
                   "  %0 = add %m, %w_q____ : f32[2]\n"
                   "  update %m = %0\n"
                   "}\n");
    Capture cap;
    cap_init(&cap);
    Graph *p = ir_parse("t.ir", txt, &cap.d);
    CHECK(p != NULL);
    if (p) {
        char *again = print_str(p, false);
        CHECK_STR(again, txt);
        CHECK(ir_str(p->nodes[0], "name", "")[6] == '\x01');
        CHECK(p->nodes[2]->phase == PH_STEP);
        CHECK(strcmp(p->train.optimizer, "sgd") == 0 && p->train.grad_accum == 4);
        const Attr *nz = ir_attr(p->nodes[0], "value");
        CHECK(nz && nz->kind == ATTR_FLOAT && nz->f == 0 && 1 / nz->f < 0);
        CHECK(ir_verify(p, &cap.d));
        free(again);
        ir_graph_free(p);
    }
    CHECK_STR(cap_text(&cap), "");
    cap_free(&cap);
    free(txt);
    ir_graph_free(g);
}

static void test_print_node_and_dot(void) {
    Graph *g = ir_graph_new("d");
    Value *x = ir_source(g, OP_input, "x", ty(DT_f32, 2, 2, 3), NOLOC)->out[0];
    Value *w = ir_source(g, OP_param, "w", ty(DT_f32, 1, 3), NOLOC)->out[0];
    Value *b = ir_source(g, OP_param, "b", ty(DT_f32, 1, 3), NOLOC)->out[0];
    Value *in[3] = {x, w, b};
    Node *ln = ir_emit(g, ir_new(g, OP_layer_norm, 3, in, NOLOC), &D);
    ir_add_output(g, "y", ln->out[0]);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ir_print_node(f, g, ln);
    fclose(f);
    CHECK_STR(buf, "%0, %1, %2 = layer_norm %x, %w, %b {eps=1e-05} : f32[2,3], f32[2], f32[2]");
    free(buf);
    f = open_memstream(&buf, &len);
    ir_print_dot(f, g);
    fclose(f);
    CHECK_HAS(buf, "digraph \"d\" {");
    CHECK_HAS(buf, "n3 [label=\"layer_norm\\neps=1e-05\\n%0: f32[2,3], %1: f32[2], %2: f32[2]\"];");
    CHECK_HAS(buf, "n0 -> n3;");
    CHECK_HAS(buf, "fillcolor=\"#fff2cc\""); /* params */
    CHECK_HAS(buf, "out0 [label=\"output y\"");
    CHECK_HAS(buf, "n3 -> out0;");
    char *again = NULL;
    f = open_memstream(&again, &len);
    ir_print_dot(f, g);
    fclose(f);
    CHECK_STR(again, buf); /* deterministic */
    free(again);
    free(buf);
    ir_graph_free(g);
}

/* ---- parser ---- */

static void test_parse_locs_and_comments(void) {
    const char *src = "# a comment line\n"
                      "graph @g {   # trailing comment\n"
                      "  %x = input {name=\"x\"} : f32[4]   # m.model:12:3\n"
                      "  %y = neg %x : f32[4]   # not a location\n"
                      "  %z = neg %y : f32[4]   # dir:with:colons/f.model:7:9\n"
                      "  output \"z\" %z  # c\n"
                      "}\n";
    Capture cap;
    cap_init(&cap);
    Graph *g = ir_parse("in.ir", src, &cap.d);
    CHECK(g != NULL);
    if (g) {
        CHECK(g->nnodes == 3);
        CHECK(strcmp(g->nodes[0]->loc.file, "m.model") == 0 && g->nodes[0]->loc.line == 12 && g->nodes[0]->loc.col == 3);
        /* no location comment: the node's place in the .ir text */
        CHECK(strcmp(g->nodes[1]->loc.file, "in.ir") == 0 && g->nodes[1]->loc.line == 4 && g->nodes[1]->loc.col == 8);
        CHECK(strcmp(g->nodes[2]->loc.file, "dir:with:colons/f.model") == 0 && g->nodes[2]->loc.line == 7);
        CHECK(g->noutputs == 1);
        /* with locations printed, a second round trip is the identity */
        char *p1 = print_str(g, true);
        Graph *h = ir_parse("p1.ir", p1, &cap.d);
        CHECK(h != NULL);
        if (h) {
            char *p2 = print_str(h, true);
            CHECK_STR(p2, p1);
            free(p2);
            ir_graph_free(h);
        }
        free(p1);
        /* a file name that would not read back as itself is not printed:
         * a line break in it broke the line, leading spaces were trimmed */
        g->nodes[0]->loc.file = "a\nb.model";
        g->nodes[2]->loc.file = " sp.model";
        p1 = print_str(g, true);
        CHECK(!strstr(p1, "b.model") && !strstr(p1, "sp.model"));
        h = ir_parse("p1.ir", p1, &cap.d);
        CHECK(h != NULL);
        ir_graph_free(h);
        free(p1);
        ir_graph_free(g);
    }
    CHECK_STR(cap_text(&cap), "");
    cap_free(&cap);
}

/* Bytes that must give errors, never crashes. */
static void test_parse_garbage(void) {
    const char *bad[] = {
        "",
        "graph",
        "graph @",
        "graph @g",
        "graph @g {",
        "graph @g {\n",
        "graph @g {\n}\nextra",
        "graph @g {\n  %x = \n}\n",
        "graph @g {\n  %x = input {name=\"x\"} : f32[1,1,1,1,1,1,1,1,1]\n}\n",
        "graph @g {\n  %x = input {name=\"x\"} : f32[1099511627776,1099511627776]\n}\n",
        "graph @g {\n  %x = input {name=\"x\"} : f32[99999999999999999999]\n}\n",
        "graph @g {\n  %x = input {name=\"unterminated} : f32[4]\n}\n",
        "graph @g {\n  %x = input {name=\"x\"} : f32[4]\n  %y = pad %x {lo=9223372036854775807, hi=9223372036854775807} : f32[4]\n}\n",
        "graph @g {\n  %x = input {name=\"x\"} : f32[4]\n  %y = slice %x {start=1e300, end=-1e300} : f32[4]\n}\n",
        "graph @g {\n  %x = input {name=\"x\"} : f32[4]\n  %y = reshape %x {shape=[-1,-1]} : f32[4]\n}\n",
        "graph @g {\n  %x = input {name=\"x\"} : f32[4]\n  %y = broadcast %x {shape=[-4]} : f32[4]\n}\n",
        "graph @g {\n  %x = input {name=\"x\"} : f32[1]\n  %y = broadcast %x {shape=[4611686018427387904,4]} : f32[4]\n}\n",
        "graph @g {\n  %x = input {name=\"x\"} : f32[4]\n  %y = concat %x, %x {axis=5} : f32[8]\n}\n",
        "graph @g {\n  train {lr=1, lr=2}\n  train {}\n}\n",
        "graph @g {\n  %a, %a = layer_norm : f32[4]\n}\n",
        "graph @g {\n  %x = input {name=\"x\", name=\"y\"} : f32[4]\n}\n",
        "graph @g {\n  %x = input {name=\"x\"} : f32[4]\n  update %x = %x\n}\n",
        "graph @g {\n  %x = input {name=\"x\\x00\"} : f32[4]\n}\n",
        "graph @g {\n  %x = input {name=\"x\"} : f32[4]\n  %y = neg %x : f32[4] # f:1\n  %y = neg %x : f32[4]\n}\n",
        "graph @g {\n  step\n  micro :\n  %1 = constant {value=-} : f32[]\n}\n",
        "\xff\xfe\x01graph",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        Capture cap;
        cap_init(&cap);
        Graph *g = ir_parse("bad.ir", bad[i], &cap.d);
        if (g) fprintf(stderr, "input %zu parsed:\n%s\n", i, bad[i]);
        CHECK(g == NULL);
        CHECK(cap.d.nerrors > 0);
        CHECK_HAS(cap_text(&cap), "bad.ir:");
        ir_graph_free(g);
        cap_free(&cap);
    }
}

static void test_parse_several_errors(void) {
    const char *src = "graph @g {\n"
                      "  %x = input {name=\"x\"} : f32[4]\n"
                      "  %y = nope %x : f32[4]\n"   /* unknown op */
                      "  %z = neg %y : f32[4]\n"    /* %y poisoned: no second error */
                      "  %w = neg %q : f32[4]\n"    /* undefined */
                      "  %v = add %x, %x : f32[5]\n" /* type mismatch */
                      "}\n";
    Capture cap;
    cap_init(&cap);
    CHECK(ir_parse("e.ir", src, &cap.d) == NULL);
    CHECK(cap.d.nerrors == 3);
    const char *t = cap_text(&cap);
    CHECK_HAS(t, "e.ir:3:8: error: unknown op 'nope'\n  %y = nope %x : f32[4]\n       ^\n");
    CHECK_HAS(t, "e.ir:5:12: error: use of undefined value %q\n");
    CHECK_HAS(t, "e.ir:6:21: error: declared type f32[5] of %v differs from the inferred type f32[4]\n");
    cap_free(&cap);
}

/* Output names past the first table's size (64 slots): every one found
 * again when it comes back, and nothing else reported. */
static void test_parse_many_outputs(void) {
    StrBuf b = {0};
    sb_puts(&b, "graph @g {\n  %x = input {name=\"x\"} : f32[4]\n");
    for (int i = 0; i < 300; i++) sb_printf(&b, "  output \"o%d\" %%x\n", i);
    sb_puts(&b, "  output \"o5\" %x\n  output \"o299\" %x\n  output \"o300\" %x\n}\n");
    Capture cap;
    cap_init(&cap);
    CHECK(ir_parse("m.ir", b.s, &cap.d) == NULL);
    CHECK(cap.d.nerrors == 2);
    const char *t = cap_text(&cap);
    CHECK_HAS(t, "m.ir:303:10: error: output name 'o5' is used more than once\n");
    CHECK_HAS(t, "m.ir:304:10: error: output name 'o299' is used more than once\n");
    cap_free(&cap);
    sb_free(&b);
}

/* ---- verifier: graphs that only a buggy pass can build ---- */

typedef struct Small { Graph *g; Node *x, *w, *a, *b; } Small;

/* %x input f32[4]; %w param f32[4]; %a = add %x, %w; %b = neg %a; output "b" */
static Small small(void) {
    Small s;
    s.g = ir_graph_new("s");
    s.x = ir_source(s.g, OP_input, "x", ty(DT_f32, 1, 4), (SrcLoc){"s.model", 1, 1});
    s.w = ir_source(s.g, OP_param, "w", ty(DT_f32, 1, 4), (SrcLoc){"s.model", 2, 1});
    s.a = ir_op2(s.g, OP_add, s.x->out[0], s.w->out[0], (SrcLoc){"s.model", 3, 1}, &D)->def;
    s.b = ir_op1(s.g, OP_neg, s.a->out[0], (SrcLoc){"s.model", 4, 1}, &D)->def;
    ir_add_output(s.g, "b", s.b->out[0]);
    return s;
}

/* Runs the verifier; it must fail with a message containing want. */
static void expect_invalid(Graph *g, const char *want, int line) {
    Capture cap;
    cap_init(&cap);
    bool ok = ir_verify(g, &cap.d);
    if (ok || !strstr(cap_text(&cap), want)) {
        fprintf(stderr, "test_ir.c:%d: expected the verifier to report \"%s\"; it said:\n%s\n", line, want, cap_text(&cap));
        failures++;
    }
    cap_free(&cap);
}
#define EXPECT_INVALID(g, want) expect_invalid((g), (want), __LINE__)

static void test_verify(void) {
    Capture cap;
    cap_init(&cap);
    Small s = small();
    CHECK(ir_verify(s.g, &cap.d));
    CHECK_STR(cap_text(&cap), "");
    cap_free(&cap);
    ir_graph_free(s.g);

    s = small(); /* use before definition */
    s.g->nodes[2] = s.b, s.g->nodes[3] = s.a;
    EXPECT_INVALID(s.g, "s.model:4:1: error: '%0 = neg %1 : f32[4]': operand 1 is used before its definition");
    ir_graph_free(s.g);

    s = small(); /* operand defined by a node no longer in the graph */
    s.g->nodes[2] = s.b, s.g->nnodes = 3;
    EXPECT_INVALID(s.g, "operand 1 is defined by a node that is not in the graph");
    ir_graph_free(s.g);

    s = small(); /* output of a removed node */
    s.g->nnodes = 3;
    EXPECT_INVALID(s.g, "output 'b' refers to a value that is not defined in the graph");
    ir_graph_free(s.g);

    s = small(); /* result type differs from re-inference */
    s.b->out[0]->ty = ty(DT_f32, 1, 5);
    EXPECT_INVALID(s.g, "result 1 has type f32[5], but shape inference gives f32[4]");
    ir_graph_free(s.g);

    s = small(); /* operands whose types no longer infer (w changed under two nodes that read it): each node's own message */
    ir_add_output(s.g, "c", ir_op2(s.g, OP_mul, s.a->out[0], s.w->out[0], (SrcLoc){"s.model", 5, 1}, &D));
    s.w->out[0]->ty = ty(DT_f32, 1, 3);
    EXPECT_INVALID(s.g, "s.model:3:1: error: '%0 = add %x, %w : f32[4]': does not pass shape inference: add: shapes do not broadcast: f32[4] vs f32[3]\n");
    EXPECT_INVALID(s.g, "s.model:5:1: error: '%2 = mul %0, %w : f32[4]': does not pass shape inference: mul: shapes do not broadcast: f32[4] vs f32[3]\n");
    ir_graph_free(s.g);

    s = small(); /* operand count */
    s.b->nin = 2;
    s.b->in = arena_alloc(s.g->arena, 2 * sizeof(Value *));
    s.b->in[0] = s.b->in[1] = s.a->out[0];
    EXPECT_INVALID(s.g, "neg takes 1 operand, not 2");
    ir_graph_free(s.g);

    s = small(); /* def/res mismatch */
    s.b->out[0]->res = 1;
    EXPECT_INVALID(s.g, "result 1 does not point back at its node");
    ir_graph_free(s.g);

    s = small(); /* a value defined twice */
    s.b->out[0] = s.a->out[0];
    EXPECT_INVALID(s.g, "is also defined by another node");
    ir_graph_free(s.g);

    s = small(); /* a node listed twice */
    ir_append(s.g, s.b);
    EXPECT_INVALID(s.g, "appears twice in the node list");
    ir_graph_free(s.g);

    s = small(); /* phases */
    s.a->phase = PH_STEP;
    EXPECT_INVALID(s.g, "a micro-batch node follows step nodes");
    ir_graph_free(s.g);

    s = small(); /* a step node reading a micro-batch value */
    s.b->phase = PH_STEP;
    EXPECT_INVALID(s.g, "a step node reads operand 1, a micro-batch value");
    ir_graph_free(s.g);

    s = small(); /* ...but reading a source is fine */
    s.a->phase = s.b->phase = PH_STEP;
    cap_init(&cap);
    CHECK(ir_verify(s.g, &cap.d));
    cap_free(&cap);
    ir_graph_free(s.g);

    s = small(); /* source names */
    ir_set_str(s.g, s.w, "name", "x");
    ir_source(s.g, OP_param, "x", ty(DT_f32, 1, 4), NOLOC);
    EXPECT_INVALID(s.g, "param name 'x' is already used by another param");
    ir_graph_free(s.g);

    s = small(); /* unsorted attributes */
    ir_set_str(s.g, s.w, "init", "ones");
    Attr t = s.w->attrs[0];
    s.w->attrs[0] = s.w->attrs[1];
    s.w->attrs[1] = t;
    EXPECT_INVALID(s.g, "attributes are not sorted");
    ir_graph_free(s.g);

    s = small(); /* updates */
    ir_add_update(s.g, s.x, s.b->out[0]);
    EXPECT_INVALID(s.g, "is the target of an update but is not a param or state");
    ir_graph_free(s.g);

    s = small();
    ir_add_update(s.g, s.w, s.b->out[0]);
    ir_add_update(s.g, s.w, s.a->out[0]);
    EXPECT_INVALID(s.g, "is updated twice in the micro-batch phase");
    ir_graph_free(s.g);

    s = small();
    Value *sum = ir_op1(s.g, OP_sum, s.b->out[0], NOLOC, &D);
    ir_add_update(s.g, s.w, sum);
    EXPECT_INVALID(s.g, "the update of 'w' gives a value of type f32[], but the param is f32[4]");
    ir_graph_free(s.g);

    s = small();
    ir_add_output(s.g, "b", s.a->out[0]);
    EXPECT_INVALID(s.g, "output name 'b' is used more than once");
    ir_graph_free(s.g);

    s = small(); /* a malformed type */
    s.x->out[0]->ty.shape.d[0] = 0;
    EXPECT_INVALID(s.g, "malformed type");
    ir_graph_free(s.g);
}

/* ---- statistics ---- */

static void test_stats(void) {
    Graph *g = ir_graph_new("st");
    Value *a = ir_source(g, OP_input, "a", ty(DT_f32, 3, 2, 8, 16), NOLOC)->out[0];
    Value *b = ir_source(g, OP_param, "b", ty(DT_f32, 2, 16, 4), NOLOC)->out[0];
    Node *frozen = ir_source(g, OP_param, "c", ty(DT_bf16, 1, 10), NOLOC);
    ir_set_int(g, frozen, "frozen", 1);
    Value *m = ir_op2(g, OP_matmul, a, b, NOLOC, &D); /* [2,8,4], K = 16 */
    CHECK(ir_node_flops(g, m->def) == 2LL * 2 * 8 * 4 * 16);
    CHECK(ir_node_bytes(g, m->def) == 4LL * (2 * 8 * 16 + 16 * 4 + 2 * 8 * 4));
    Value *sq = ir_op2(g, OP_mul, m, m, NOLOC, &D);
    CHECK(ir_node_flops(g, sq->def) == 64);
    CHECK(ir_node_bytes(g, sq->def) == 4 * 64 * 2); /* x read once */
    Value *q = ir_source(g, OP_input, "q", ty(DT_f32, 4, 2, 4, 8, 16), NOLOC)->out[0];
    Value *kv = ir_source(g, OP_input, "kv", ty(DT_f32, 4, 2, 2, 8, 16), NOLOC)->out[0];
    Value *in[3] = {q, kv, kv};
    Node *att = ir_emit(g, ir_new(g, OP_attention, 3, in, NOLOC), &D);
    CHECK(ir_node_flops(g, att) == 4LL * 2 * 4 * 16 * (8 * 9 / 2));
    ir_set_int(g, att, "causal", 0);
    CHECK(ir_node_flops(g, att) == 4LL * 2 * 4 * 16 * 8 * 8);
    GraphStats s;
    ir_stats(g, &s);
    CHECK(s.nodes == 8);
    CHECK(s.params == 16 * 4 + 10 && s.param_bytes == 16 * 4 * 4 + 20 && s.trainable_params == 64);
    CHECK(s.flops == s.fwd_flops && s.flops == 2LL * 2 * 8 * 4 * 16 + 64 + 4LL * 2 * 4 * 16 * 64);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ir_print_stats(f, g);
    fclose(f);
    CHECK_HAS(buf, "graph @st: 8 nodes, 9 values, 0 outputs\n");
    CHECK_HAS(buf, "nodes by family: source 5, pointwise 1, matmul 1, attention 1\n");
    CHECK_HAS(buf, "params: 74 (276 B mixed)\n");
    CHECK_HAS(buf, "trainable: 64\n");
    CHECK_HAS(buf, "forward: 34.88 KFLOP\n");
    free(buf);
    ir_graph_free(g);
}

/* ---- passes ---- */

static void test_cse_dce_fold(void) {
    Graph *g = ir_graph_new("p");
    Value *x = ir_source(g, OP_input, "x", ty(DT_f32, 1, 4), NOLOC)->out[0];
    Value *w = ir_source(g, OP_param, "w", ty(DT_f32, 1, 4), NOLOC)->out[0];
    ir_source(g, OP_param, "unused", ty(DT_f32, 1, 4), (SrcLoc){"p.model", 9, 2});
    Value *a1 = ir_op2(g, OP_add, x, w, NOLOC, &D);
    Value *a2 = ir_op2(g, OP_add, w, x, NOLOC, &D);   /* commutes: merges with a1 */
    Value *s1 = ir_op2(g, OP_sub, x, w, NOLOC, &D);
    Value *s2 = ir_op2(g, OP_sub, w, x, NOLOC, &D);   /* does not */
    Value *c1 = ir_const(g, 0.0, ty(DT_f32, 0), NOLOC);
    Value *c2 = ir_const(g, -0.0, ty(DT_f32, 0), NOLOC); /* not the same bits */
    Value *m1 = ir_op2(g, OP_mul, a1, a2, NOLOC, &D);
    Value *m2 = ir_op2(g, OP_mul, s1, s2, NOLOC, &D);
    Value *t = ir_op2(g, OP_mul, m1, m2, NOLOC, &D);
    t = ir_op2(g, OP_add, t, c1, NOLOC, &D);
    t = ir_op2(g, OP_add, t, c2, NOLOC, &D);
    ir_op1(g, OP_exp, t, NOLOC, &D); /* dead */
    ir_add_output(g, "t", t);
    Capture cap;
    cap_init(&cap);
    PassOptions po = {0};
    CHECK(pass_cse(g, &po, &cap.d));
    CHECK(ir_verify(g, &cap.d));
    char *txt = print_str(g, false);
    CHECK_STR(txt, "graph @p {\n"
                   "  %x = input {name=\"x\"} : f32[4]\n"
                   "  %w = param {name=\"w\"} : f32[4]\n"
                   "  %unused = param {name=\"unused\"} : f32[4]\n"
                   "  %0 = add %x, %w : f32[4]\n"
                   "  %1 = sub %x, %w : f32[4]\n"
                   "  %2 = sub %w, %x : f32[4]\n"
                   "  %3 = constant {value=0.0} : f32[]\n"
                   "  %4 = constant {value=-0.0} : f32[]\n"
                   "  %5 = mul %0, %0 : f32[4]\n"
                   "  %6 = mul %1, %2 : f32[4]\n"
                   "  %7 = mul %5, %6 : f32[4]\n"
                   "  %8 = add %7, %3 : f32[4]\n"
                   "  %9 = add %8, %4 : f32[4]\n"
                   "  %10 = exp %9 : f32[4]\n"
                   "  output \"t\" %9\n"
                   "}\n");
    free(txt);
    CHECK(pass_fold(g, &po, &cap.d));
    CHECK(ir_verify(g, &cap.d));
    txt = print_str(g, false);
    CHECK_HAS(txt, "  %6 = exp %5 : f32[4]\n  output \"t\" %5\n"); /* x+0 and x+(-0) folded, constants gone */
    CHECK(!strstr(txt, "constant"));
    free(txt);
    CHECK(pass_dce(g, &po, &cap.d));
    CHECK(ir_verify(g, &cap.d));
    txt = print_str(g, false);
    CHECK(!strstr(txt, "exp"));
    CHECK_HAS(txt, "%unused = param"); /* params stay */
    free(txt);
    CHECK(cap.d.nwarnings == 1);
    CHECK_HAS(cap_text(&cap), "p.model:9:2: warning: parameter 'unused' does not contribute to any output");
    CHECK(cap.d.nerrors == 0);
    cap_free(&cap);
    ir_graph_free(g);
}

static void test_fold_constants(void) {
    Graph *g = ir_graph_new("f");
    Value *a = ir_const(g, 0.1, ty(DT_f32, 1, 3), NOLOC);
    Value *b = ir_const(g, 3.0, ty(DT_f32, 0), NOLOC);
    Value *c = ir_op2(g, OP_mul, a, b, NOLOC, &D);
    c->name = "c";
    Value *e = ir_op1(g, OP_exp, c, NOLOC, &D);
    Value *d64 = ir_const(g, 0.1, ty(DT_f64, 0), NOLOC);
    Value *e64 = ir_op2(g, OP_add, d64, d64, NOLOC, &D);
    ir_add_output(g, "e", e);
    ir_add_output(g, "e64", e64);
    Capture cap;
    cap_init(&cap);
    PassOptions po = {0};
    CHECK(pass_fold(g, &po, &cap.d));
    CHECK(ir_verify(g, &cap.d));
    CHECK(g->nnodes == 2);
    double want = (double)(float)exp((double)(float)((double)(float)0.1 * 3.0));
    CHECK(g->nodes[0]->op == OP_constant && ir_float(g->nodes[0], "value", 0) == want);
    CHECK(type_eq(&g->nodes[0]->out[0]->ty, &(Type){DT_f32, {1, {3}}}));
    CHECK(ir_float(g->nodes[1], "value", 0) == 0.2);
    CHECK(ir_output(g, "e") == g->nodes[0]->out[0]);
    cap_free(&cap);
    ir_graph_free(g);
}

/* ---- pass manager ---- */

static void test_pm(void) {
    CHECK(pass_lookup("dce") && pass_lookup("verify") && pass_lookup("autodiff") && !pass_lookup("nope"));
    const char *names[16];
    int n = pm_training_pipeline(NULL, NULL, names, 16);
    CHECK(n == 7 && strcmp(names[0], "fold") == 0 && strcmp(names[3], "autodiff") == 0 && strcmp(names[6], "dce") == 0);

    Small s = small();
    Capture cap, dumps;
    cap_init(&cap);
    cap_init(&dumps);
    const char *after[] = {"dce"}, *before[] = {"cse"};
    PMOptions pm = {after, 1, before, 1, false, false, true, {false}, dumps.f, NULL};
    const char *passes[] = {"cse", "dce"};
    CHECK(pm_run(s.g, passes, 2, NULL, &pm, &cap.d));
    CHECK_STR(cap_text(&cap), "");
    const char *t = cap_text(&dumps);
    CHECK(strncmp(t, "*** IR Dump Before cse ***\ngraph @s {\n", 38) == 0);
    CHECK_HAS(t, "}\n*** IR Dump After dce ***\ngraph @s {\n");
    CHECK(!strstr(t, "After cse"));

    const char *unknown[] = {"dce", "frobnicate"};
    CHECK(!pm_run(s.g, unknown, 2, NULL, &pm, &cap.d));
    CHECK_HAS(cap_text(&cap), "unknown pass 'frobnicate' (available: verify, dce, cse, fold, autodiff, optimizer");

    /* an invalid graph is caught before the first pass runs */
    s.g->nodes[3]->out[0]->ty = ty(DT_f32, 1, 7);
    CHECK(!pm_run(s.g, passes, 2, NULL, &pm, &cap.d));
    CHECK_HAS(cap_text(&cap), "trainc: error: before pass 'cse': the IR is invalid\ns.model:4:1: error: ");
    cap_free(&dumps);
    cap_free(&cap);
    ir_graph_free(s.g);
}

int main(void) {
    diag_init(&D, stderr);
    test_print_basic();
    test_print_names();
    test_print_attrs_train_phases();
    test_print_node_and_dot();
    test_parse_locs_and_comments();
    test_parse_garbage();
    test_parse_several_errors();
    test_parse_many_outputs();
    test_verify();
    test_stats();
    test_cse_dce_fold();
    test_fold_constants();
    test_pm();
    CHECK(D.nerrors == 0);
    diag_free(&D);
    if (failures) {
        fprintf(stderr, "test_ir: %d check(s) failed\n", failures);
        return 1;
    }
    printf("test_ir: ok\n");
    return 0;
}
