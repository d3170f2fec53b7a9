/* codegen/view.c — strided views: how view ops (permute, slice, broadcast,
 * reshape) become index arithmetic instead of copies. */
#include "cg.h"

#include <string.h>

void view_contig(View *v, int buf, const Shape *s) {
    memset(v, 0, sizeof *v);
    v->buf = buf;
    v->rank = s->rank;
    int64_t st = 1;
    for (int i = s->rank - 1; i >= 0; i--) {
        v->shape[i] = s->d[i];
        v->stride[i] = st;
        st *= s->d[i];
    }
}

bool view_is_contig(const View *v) {
    if (v->off != 0) return false;
    int64_t st = 1;
    for (int i = v->rank - 1; i >= 0; i--) {
        if (v->shape[i] != 1 && v->stride[i] != st) return false;
        st *= v->shape[i];
    }
    return true;
}

bool view_permute(View *v, const int64_t *perm) {
    View r = *v;
    for (int i = 0; i < v->rank; i++) {
        r.shape[i] = v->shape[perm[i]];
        r.stride[i] = v->stride[perm[i]];
    }
    *v = r;
    return true;
}

bool view_slice(View *v, int axis, int64_t start, int64_t end) {
    v->off += start * v->stride[axis];
    v->shape[axis] = end - start;
    return true;
}

/* numpy broadcasting: align right, size-1 and missing dims get stride 0. */
bool view_broadcast(View *v, const Shape *to) {
    if (to->rank < v->rank) return false;
    View r = *v;
    r.rank = to->rank;
    for (int i = 0; i < to->rank; i++) {
        int j = v->rank - to->rank + i;
        r.shape[i] = to->d[i];
        if (j < 0) {
            r.stride[i] = 0;
        } else if (v->shape[j] == to->d[i]) {
            r.stride[i] = v->stride[j];
        } else if (v->shape[j] == 1) {
            r.stride[i] = 0;
        } else {
            return false;
        }
    }
    *v = r;
    return true;
}

/* Reshape without copying, when the view's memory order allows it (the
 * algorithm of numpy's attempt_nocopy_reshape): groups of old dims that
 * multiply to groups of new dims must each be contiguous among themselves. */
bool view_reshape(View *v, const Shape *to) {
    /* drop size-1 dims of the old view: they carry no stride information */
    int64_t os[IR_MAX_RANK], ost[IR_MAX_RANK];
    int on = 0;
    for (int i = 0; i < v->rank; i++)
        if (v->shape[i] != 1) {
            os[on] = v->shape[i];
            ost[on++] = v->stride[i];
        }
    View r = *v;
    r.rank = to->rank;
    for (int i = 0; i < to->rank; i++) r.shape[i] = to->d[i];
    int oi = 0, ni = 0;
    while (ni < to->rank || oi < on) {
        if (ni < to->rank && to->d[ni] == 1) {
            r.stride[ni++] = 0;
            continue;
        }
        if (oi >= on || ni >= to->rank) return false;
        int oj = oi, nj = ni;
        int64_t op = os[oi], np = to->d[ni];
        while (op != np) {
            if (op < np) {
                if (++oj >= on) return false;
                op *= os[oj];
            } else {
                if (++nj >= to->rank) return false;
                np *= to->d[nj];
            }
        }
        /* old dims oi..oj must be contiguous among themselves */
        for (int k = oi; k < oj; k++)
            if (ost[k] != ost[k + 1] * os[k + 1]) return false;
        /* new dims ni..nj get strides from the innermost old stride */
        int64_t st = ost[oj];
        for (int k = nj; k >= ni; k--) {
            r.stride[k] = to->d[k] == 1 ? 0 : st;
            st *= to->d[k];
        }
        oi = oj + 1;
        ni = nj + 1;
    }
    *v = r;
    return true;
}
