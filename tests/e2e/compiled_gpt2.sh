#!/usr/bin/env bash
# End to end with the compiled CPU executable (tests/e2e.cmake):
#   1. tiny GPT-2 trained on tiny Shakespeare reaches a validation loss clearly
#      below the unigram baseline (the entropy of the byte frequencies);
#   2. a run resumed from its step-20 checkpoint reproduces the uninterrupted
#      run's losses bit for bit; one compiled with other settings (weight
#      decay, a -D) resumes with a warning naming them;
#   3. the checkpoint is a safetensors file: 8-byte little-endian header
#      length, a JSON header with dtype, shape and data_offsets per tensor;
#   4. --report's total equals the arena the executable allocates;
#   5. with and without the BLAS (--no-blas), 3 steps from the trained
#      parameters: the interpreter's losses.
# Usage: compiled_gpt2.sh TRAINC TOKENIZE SCRATCH TEXT
set -euo pipefail
trainc=$1 tokenize=$2 dir=$3 text=$4
. "$(dirname "$0")/common.sh"

"$tokenize" "$text" shakes --val-fraction 0.1 >/dev/null
tiny=(-D vocab=256 -D layers=2 -D heads=4 -D dim=64 -D seq=64 -D batch=8)
"$trainc" compile "$root/examples/gpt2.model" "${tiny[@]}" -o gpt2 --keep
[ -x gpt2 ] && [ -f gpt2.c ] || fail "no executable or kept source"

# 1. learning
./gpt2 --data shakes_train.bin --val shakes_val.bin --steps 600 --warmup 20 --lr 3e-3 --min-lr 3e-4 \
       --eval-every 300 --eval-steps 20 --threads 1 --metrics m.jsonl --sample 80 --save trained.safetensors > out.txt 2> err.txt || { cat err.txt; fail "training failed"; }
val=$(grep '"val_loss"' m.jsonl | tail -1 | sed -n 's/.*"val_loss": *\([0-9.eE+-]\+\).*/\1/p')
[ -n "$val" ] || fail "no finite validation loss in the metrics"
grep -q '"loss":null' m.jsonl && fail "a loss that is not finite (null in the metrics)"
# unigram baseline: entropy (nats) of the byte distribution of the training text
unigram=$(od -An -v -tu1 -w1 "$text" | sort -n | uniq -c | awk '{c[NR]=$1; n+=$1} END {for (i in c) {p=c[i]/n; h-=p*log(p)} printf "%.4f", h}')
echo "validation loss $val; unigram baseline $unigram nats; first loss $(head -1 m.jsonl | sed 's/.*"loss": *\([0-9.]*\).*/\1/')"
# clearly below: by 0.4 nats or more (tiny Shakespeare: about 0.85)
awk -v v="$val" -v u="$unigram" 'BEGIN {exit !(v < u - 0.4)}' || fail "validation loss $val is not clearly below the unigram baseline $unigram"
grep -q "sample (80 tokens)" err.txt out.txt || fail "no sample printed"

# 2. resume reproduces the losses bit for bit
./gpt2 --data shakes_train.bin --steps 40 --threads 1 --quiet --metrics full.jsonl --save 'ck_{step}.safetensors' --save-every 20
[ -f ck_20.safetensors ] || fail "no step-20 checkpoint"
./gpt2 --data shakes_train.bin --steps 40 --threads 1 --quiet --metrics resumed.jsonl --resume ck_20.safetensors 2> resume_err.txt
grep -q "compiled with other settings" resume_err.txt && fail "a warning resuming with the same executable: $(cat resume_err.txt)"
losses() { grep -v val_loss "$1" | sed 's/.*"step": *\([0-9]*\).*"loss": *\([0-9.eE+-]*\).*/\1 \2/'; }
diff <(losses full.jsonl | awk '$1 > 20') <(losses resumed.jsonl) || fail "resumed losses differ from the uninterrupted run"
[ "$(losses resumed.jsonl | wc -l)" -eq 20 ] || fail "the resumed run did not take 20 steps"
echo "resume: steps 21-40 identical"
# ... and with a step compiled with other settings (weight decay, a -D):
# resumed, with a warning naming each (the checkpoint records them)
"$trainc" compile "$root/examples/gpt2.model" "${tiny[@]}" -D dropout=0.1 --set weight_decay=0.05 -o gpt2_other
./gpt2_other --data shakes_train.bin --steps 21 --threads 1 --quiet --resume ck_20.safetensors 2> other_err.txt || fail "resuming with other settings failed"
grep -q "warning: --resume ck_20.safetensors: its step was compiled with other settings (the run goes on with this one's): weight_decay is 0.1 in the checkpoint, 0.05 here; -D dropout=0.1 only here" other_err.txt ||
    fail "no warning naming the settings that differ: $(cat other_err.txt)"
echo "resume with other settings: $(cat other_err.txt)"

# 3. safetensors format
ck=ck_40.safetensors
n=$(od -An -t u8 -N 8 "$ck" | tr -d ' ')
head -c $((8 + n)) "$ck" | tail -c "$n" > header.json
head -c 1 header.json | grep -q '{' || fail "header is not JSON"
grep -q '"wte": *{"dtype": *"F32", *"shape": *\[256, *64\], *"data_offsets": *\[' header.json || fail "no wte entry of the right form"
grep -q '"__metadata__"' header.json || fail "no metadata"
size=$(stat -c %s "$ck")
last=$(grep -o '"data_offsets": *\[[0-9]*, *[0-9]*\]' header.json | sed 's/.*, *\([0-9]*\)\]/\1/' | sort -n | tail -1)
[ $((8 + n + last)) -eq "$size" ] || fail "data offsets do not end at the file's end ($((8 + n + last)) vs $size)"
echo "checkpoint: header of $n bytes, data ends at the file's end"

# 4. the arena is what --report says
planned=$("$trainc" compile "$root/examples/gpt2.model" "${tiny[@]}" --report | awk '/total \(arena\)/ {print $3}')
./gpt2 --report > rep.txt 2>&1
[ -n "$planned" ] || fail "no 'total (arena)' line in trainc compile --report"
grep -qE "^  total +$planned bytes" rep.txt || { cat rep.txt; fail "the executable's arena differs from the plan ($planned)"; }
echo "arena: $planned bytes, as planned"

# 5. with the BLAS (products and f32 attention as SGEMMs) and without it
#    (--no-blas: loops), from the parameters trained in 1 (at
#    initialisation attention is nearly uniform, and a wrong score moves the
#    loss too little), 3 steps at 2 threads: the interpreter's losses
#    (relative 2e-6; attention's scores 1% too large move them by 3e-5)
"$trainc" compile "$root/examples/gpt2.model" "${tiny[@]}" --no-blas -o gpt2_noblas
run=(--data shakes_train.bin --steps 3 --seed 7 --warmup 0 --lr 1e-3 --schedule constant --quiet --init trained.safetensors)
"$trainc" run "$root/examples/gpt2.model" "${tiny[@]}" "${run[@]}" --metrics interp.jsonl
for exe in gpt2 gpt2_noblas; do
  ./$exe "${run[@]}" --threads 2 --metrics $exe.jsonl
  paste <(losses $exe.jsonl) <(losses interp.jsonl) > both.txt
  [ "$(wc -l < both.txt)" -eq 3 ] || { cat both.txt; fail "$exe: not 3 losses each"; }
  awk '{ d = $2 - $4; if (d < 0) d = -d; if (!(d <= 2e-6 * $4)) { print "step " $1 ": " $2 ", interpreter " $4; bad = 1 } } END { exit bad }' both.txt ||
    fail "$exe: the losses are not the interpreter's"
  echo "$exe: 3 steps, the interpreter's losses: $(awk '{ printf "%s/%s ", $2, $4 }' both.txt)"
done
echo "ok"
