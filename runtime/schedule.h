/* runtime/schedule.h — the learning-rate schedule, shared by the
 * interpreter's trainer (trainc run) and the runtime of every compiled
 * executable, so both see the same learning rate at every step.
 *
 * step counts from 1.  Linear warm-up from lr/warmup to lr over `warmup`
 * steps, then:
 *   constant: lr
 *   cosine:   min_lr + (lr - min_lr) * (1 + cos(pi * p)) / 2
 *   linear:   lr + (min_lr - lr) * p
 * with p = (step - 1 - warmup) / (total - warmup) clamped to [0, 1]: the
 * first step after the warm-up takes lr itself, and the last one is a step
 * short of min_lr, as llm.c's schedule and PyTorch's schedulers (stepped
 * after each optimizer step) have it.
 */
#ifndef TRAINC_SCHEDULE_H
#define TRAINC_SCHEDULE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline double sched_lr_at(const char *schedule, double lr, double min_lr, int64_t warmup, int64_t total, int64_t step) {
    if (step < 1) step = 1;
    if (warmup > 0 && step <= warmup) return lr * (double)step / (double)warmup;
    if (strcmp(schedule, "constant") == 0) return lr;
    double span = (double)(total - warmup);
    double p = span > 0 ? (double)(step - 1 - warmup) / span : 1.0;
    if (p < 0) p = 0;
    if (p > 1) p = 1;
    if (strcmp(schedule, "cosine") == 0) return min_lr + (lr - min_lr) * 0.5 * (1.0 + cos(3.14159265358979323846 * p));
    if (strcmp(schedule, "linear") == 0) return lr + (min_lr - lr) * p;
    return lr;
}

#endif
