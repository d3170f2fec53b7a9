#!/usr/bin/env bash
# tests/fuzz/compile_sweep.sh BUILD FIRST LAST OUT — a fast sweep of the
# compiler short of the C compiler (python3; not a CTest test): for each
# seed FIRST..LAST, the model tests/fuzz/models.py makes goes through
# `trainc compile --emit=kernels` (every pass, the IR verified after each,
# the lowering and the memory plan) six times, each with a random set of
# train keys drawn from the seed: precision (fp32, tf32, bf16, fp16),
# target, a sum of fusion bits, pad_multiple, pad_tiles = 0, grad_accum,
# clipping, SGD with momentum (Nesterov or not), checkpoint = blocks with
# checkpoint_blocks, LoRA on the model's `# lora_targets:` line, its
# `# freeze:` parameter, sampling logits at every position, decay on every
# parameter, --no-fuse.  A crash, an internal error or an invalid IR is a
# line of OUT/log (the model kept as OUT/badSEED.model); an error message
# is not.  OUT/rcs holds every compile's exit status and options, OUT/errs
# the first line of each error: what the options reach.  The draws repeat
# for a seed.  About 10 compiles a second on 2 shared cores.
set -u
build=$(cd "$1" && pwd) first=$2 last=$3 out=$4
T=$build/tools/trainc root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out" && cd "$out" || exit 2
set -f # the globs of lora_targets and freeze stay as they are
# pick WORD...: one of the words into $P, drawn in this shell (a command
# substitution's subshell would reseed RANDOM: the draws would not repeat)
pick() { local a=("$@"); P=${a[$((RANDOM % $#))]}; }
for s in $(seq "$first" "$last"); do
  python3 "$root/tests/fuzz/models.py" "$s" > m.model
  lt=$(sed -n 's/^# lora_targets: //p' m.model) fr=$(sed -n 's/^# freeze: //p' m.model)
  RANDOM=$s
  for k in 1 2 3 4 5 6; do
    pick fp32 tf32 bf16 fp16; o="--precision=$P"
    pick cpu cuda; o="$o --target=$P"
    [ $((RANDOM % 3)) = 0 ] && o="$o --set fusion=$((RANDOM % 128))"
    pick 0 1 3 8 16 64; [ $((RANDOM % 3)) = 0 ] && o="$o --set pad_multiple=$P"
    [ $((RANDOM % 3)) = 0 ] && o="$o --set pad_tiles=0"
    [ $((RANDOM % 3)) = 0 ] && o="$o --set grad_accum=$((RANDOM % 3 + 1))"
    [ $((RANDOM % 4)) = 0 ] && o="$o --set grad_clip=1"
    [ $((RANDOM % 4)) = 0 ] && o="$o --set optimizer=sgd --set momentum=0.$((RANDOM % 9 + 1)) --set nesterov=$((RANDOM % 2))"
    [ $((RANDOM % 4)) = 0 ] && grep -q '^  repeat' m.model && o="$o --set checkpoint=blocks --set checkpoint_blocks=$((RANDOM % 3))"
    [ $((RANDOM % 4)) = 0 ] && [ -n "$lt" ] && o="$o --set lora_rank=$((RANDOM % 4 + 1)) --set lora_targets=$lt"
    [ $((RANDOM % 4)) = 0 ] && [ -n "$fr" ] && o="$o --set freeze=$fr"
    [ $((RANDOM % 5)) = 0 ] && o="$o --set sample_logits=all"
    [ $((RANDOM % 5)) = 0 ] && o="$o --set weight_decay=0.1 --set decay_all=1"
    [ $((RANDOM % 5)) = 0 ] && o="$o --no-fuse"
    timeout 60 "$T" compile m.model --emit=kernels $o > k.txt 2> e.txt
    rc=$?
    echo "$rc $o" >> rcs
    [ $rc = 1 ] && grep -m1 'error:' e.txt | sed 's/.*error: //' | cut -c1-80 >> errs
    if [ $rc -gt 1 ] || grep -q 'internal error\|IR is invalid\|Sanitizer' e.txt; then
      echo "[$s] exit $rc $o: $(grep -v '^ ' e.txt | head -3 | tr '\n' '|')" >> log
      cp m.model "bad$s.model"
    fi
  done
done
echo "seeds $first-$last: $(grep -c . rcs) compiles, $(grep -c "^0 " rcs) compiled, $(grep -c . log 2>/dev/null || echo 0) findings" >> log
