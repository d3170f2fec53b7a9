# tests/cuda/emu/dispatch.awk — from a generated MODEL.cu, a wrapper per
# __global__ function (its pointer arguments from void *a[]) and the table
# emu_fns[]: name, wrapper, number of arguments, __launch_bounds__ (0: none).
# Used by tests/cuda/emu/run.sh and tests/cuda/fake/run.sh.
/^extern "C" __global__ void/ {
    s = $0
    bound = 0
    if (match(s, /__launch_bounds__\([0-9]+/)) bound = substr(s, RSTART + 18, RLENGTH - 18) + 0
    sub(/^extern "C" __global__ void (__launch_bounds__\([^)]*\) )?/, "", s)
    n = index(s, "(")
    fn = substr(s, 1, n - 1)
    ps = substr(s, n + 1)
    sub(/\)[ \t]*$/, "", ps)
    np = split(ps, p, ", ")
    printf "static void w_%s(void **a) { %s(", fn, fn
    for (i = 1; i <= np; i++) {
        t = p[i]
        sub(/\*.*/, "", t)
        sub(/[ \t]+$/, "", t)
        printf "%s(%s *)a[%d]", (i > 1 ? ", " : ""), t, i - 1
    }
    print "); }"
    names[++nf] = fn
    nargs[nf] = np
    bounds[nf] = bound
}
END {
    print "static const EmuFn emu_fns[] = {"
    for (i = 1; i <= nf; i++) printf "    {\"%s\", w_%s, %d, %d},\n", names[i], names[i], nargs[i], bounds[i]
    print "};"
}
