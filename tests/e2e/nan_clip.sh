#!/usr/bin/env bash
# A NaN gradient norm under clipping (tests/e2e/nan_clip.model): the
# clipping coefficient is NaN, not 1, so every parameter is NaN after the
# step, in the interpreter and the compiled step alike (a coefficient of 1
# once left the parameters of finite gradients training on, unclipped).
# Usage: nan_clip.sh TRAINC TOKENIZE SCRATCH
set -euo pipefail
trainc=$1 tokenize=$2 dir=$3
fail() { echo "FAIL: $*"; exit 1; }
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
"$tokenize" "$root/README.md" tk > /dev/null
model=$root/tests/e2e/nan_clip.model
"$trainc" compile "$model" -o nc 2> /dev/null || fail "compile"
./nc --data tk_train.bin --steps 1 --save c.st --quiet 2> /dev/null || true
"$trainc" run "$model" --data tk_train.bin --steps 1 --save i.st --quiet 2> /dev/null || true
for f in c i; do
  [ -s $f.st ] || fail "no checkpoint ($f)"
  # (--init of a checkpoint holding NaNs names the first tensor and counts the others)
  ./nc --init $f.st --steps 0 2> init_$f.txt || { cat init_$f.txt; fail "--init $f.st"; }
  grep -q "holds 16 NaNs or infinities of 16 values, and 1 more tensor holds some\|holds 4096 NaNs or infinities of 4096 values, and 1 more tensor holds some" init_$f.txt ||
    { cat init_$f.txt; fail "not every parameter is NaN after the step ($f)"; }
done
echo "ok: every parameter NaN after a step with a NaN gradient norm, compiled and interpreted"
