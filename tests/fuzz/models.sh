#!/usr/bin/env bash
# tests/fuzz/models.sh BUILD FIRST LAST OUT — differential fuzzing of the
# compiler with the models tests/fuzz/models.py makes for seeds FIRST..LAST
# (python3; not a CTest test).  BUILD: a build folder (tools/trainc,
# tools/trainc-tokenize, tests/cuda_emit, runtime/libtrainc_rt.a).  For
# each model, in OUT/sSEED:
#   - `trainc compile --emit=kernels` for cpu and cuda, fp32/tf32/bf16/fp16,
#     with accumulation + clipping, without liger fusion, with some of the
#     fusions (a sum of bits from the seed) and no padding and weight decay
#     on every parameter, with the sampling graph's logits at every
#     position, with SGD, with
#     checkpointing (models with a repeated block: blocks, the first block
#     alone, and budget with memory_budget half way between the arenas of
#     none and blocks), with LoRA, with a frozen parameter: no failure;
#   - the compiled executable against `trainc run` (the interpreter), 3
#     steps, fp32 and bf16 (fp16 plain and with clipping; fp32 with SGD and
#     Nesterov momentum too), fused, not fused, partly fused without padding
#     and with weight decay on everything, with 2 micro-batches a step
#     and clipping, checkpointed (the three ways), with LoRA on some of the
#     weights read only by linear (models.py's `# lora_targets:` line), with
#     one parameter frozen (its `# freeze:` line): the same losses (1e-4;
#     bf16, fp16 3e-2);
#   - pad-tiles: the interpreter's fp32 losses padded to 24 (vocabulary
#     256 to 264) and not, fused and not, the same (1e-6);
#   - its CUDA C on the CPU emulation against the C backend, kernel by
#     kernel (tests/cuda/emu/run.sh; fp32 for odd seeds, bf16 for even;
#     with 2 micro-batches a step for seeds 2 and 3 modulo 4; with the
#     LoRA options for seeds 1 modulo 5, the frozen parameter for 3), each launch
#     in both of the emulation's orders; for seeds divisible by 3, in one
#     order under ThreadSanitizer (EMU_TSAN=1) instead.
# Findings go to OUT/log, one line each (an fp32 losses finding with the
# interpreter's f64 losses beside: mismatch, below).  A model that shows a bug, once
# reduced and fixed, goes into tests/e2e/fuzz/.
set -u
# joined N W: the first N lines of stdin, each cut to W characters, as one
# line (" | " between them): a finding stays one line of the log
joined() { awk -v n="$1" -v w="$2" 'NR > n { exit } { printf "%s%s", (NR > 1 ? " | " : ""), substr($0, 1, w) }'; }
build=$(cd "$1" && pwd) first=$2 last=$3 out=$4
root=$(cd "$(dirname "$0")/../.." && pwd)
T=$build/tools/trainc
mkdir -p "$out" && out=$(cd "$out" && pwd) && log=$out/log
cat "$root/README.md" "$root"/docs/*.md > "$out/text.txt"
"$build/tools/trainc-tokenize" "$out/text.txt" "$out/tok" > /dev/null
set -f # the globs of --set freeze and lora_targets stay as they are
A="--data $out/tok_train.bin --steps 3 --seed 7 --warmup 0 --quiet"
# the errors expected: a repeated block all of whose parameters are dead
# has nothing for checkpoint = blocks to recompute; a budget made for one
# precision and target can be under another's smallest arena; a LoRA
# target whose products are all dead is not used
expected="the model has no repeated blocks\|checkpoint = budget: memory_budget is\|LoRA: target '[^']*' is not used"
# mismatch PRECISION TAG OPTIONS...: a losses finding; in fp32 with the
# interpreter's f64 losses too (a model so ill-conditioned that those
# differ from both is chaotic, not a bug; where the compiled code is wrong,
# they side with the f32 interpreter)
mismatch() {
  local P=$1 tag=$2 f64=""
  shift 2
  [ "$P" = fp32 ] && timeout 120 "$T" run m.model $A --fp64 "$@" --metrics f$tag.jsonl > f$tag.log 2>&1 &&
    f64=" fp64 interpreter [$(grep -o '"loss":[^,]*' f$tag.jsonl | cut -d: -f2 | paste -sd, -)]"
  echo "[$s] losses $P $*: $(cat cmp$tag.txt)$f64" >> "$log"
}
# same_losses LABEL A.jsonl LABEL B.jsonl LIMIT: both runs' losses on one
# line; status 0 when the 3 steps agree within LIMIT (relative)
same_losses() {
  python3 - "$@" <<'PY'
import json, sys
la, fa, lb, fb, lim = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
a = [json.loads(l)['loss'] for l in open(fa) if '"step"' in l]
b = [json.loads(l)['loss'] for l in open(fb) if '"step"' in l]
ok = len(a) == len(b) == 3 and all(abs(x - y) <= lim * max(1, abs(x)) for x, y in zip(a, b))
print(la, a, lb, b)
sys.exit(0 if ok else 1)
PY
}
for s in $(seq "$first" "$last"); do
  d=$out/s$s
  rm -rf "$d" && mkdir -p "$d" && cd "$d" || exit 2
  python3 "$root/tests/fuzz/models.py" "$s" > m.model
  if ! "$T" check m.model > check.txt 2>&1; then echo "[$s] check: $(head -c 300 check.txt)" >> "$log"; continue; fi
  ck="" c1=""; grep -q "^  repeat" m.model && ck="--set checkpoint=blocks" c1="--set checkpoint=blocks --set checkpoint_blocks=1"
  # budget BUDGET-OPTIONS: checkpoint = budget half way between the arenas of none and blocks
  budget() {
    local a0 a1
    a0=$("$T" compile m.model --report "$@" 2>/dev/null | awk '/total \(arena\)/ {print $(NF - 2)}')
    a1=$("$T" compile m.model --report "$@" $ck 2>/dev/null | awk '/total \(arena\)/ {print $(NF - 2)}')
    [ -n "$a0" ] && [ -n "$a1" ] && echo "--set checkpoint=budget --set memory_budget=$(( (a0 + a1) / 2 ))"
  }
  bk=""; [ -n "$ck" ] && bk=$(budget)
  # LoRA on the weights models.py lists (the rest frozen) but those of dead
  # products (an error: dce warns of them), and one frozen parameter
  dead=$("$T" ir --train m.model 2>&1 > /dev/null | sed -n "s/.*parameter '\([^']*\)' does not contribute.*/\1/p")
  lo=""
  for g in $(sed -n 's/^# lora_targets: //p' m.model | tr ',' ' '); do
    live=1
    for n in $dead; do case $n in $g) live=0 ;; esac; done
    [ $live = 0 ] || lo=${lo:+$lo,}$g
  done
  fr=$(sed -n 's/^# freeze: //p' m.model)
  # rank 1: a target may have a side of 1 (a rank above its smaller side is an error)
  lo=${lo:+"--set lora_rank=1 --set lora_targets=$lo"} fr=${fr:+"--set freeze=$fr"}
  # some of the fusions (a sum of bits 2..64, docs/passes.md), no padding, decay on every parameter
  fm="--set fusion=$((2 * (1 + s % 63))) --set pad_tiles=0 --set weight_decay=0.1 --set decay_all=1"
  for P in fp32 tf32 bf16 fp16; do for tg in cpu cuda; do
    for o in "" "--set grad_accum=2 --set grad_clip=1" "--set fusion=0" "--set optimizer=sgd --set momentum=0.9" "$fm" "--set sample_logits=all" ${ck:+"$ck"} ${c1:+"$c1"} ${bk:+"$bk"} ${lo:+"$lo"} ${fr:+"$fr"}; do
      timeout 60 "$T" compile m.model --emit=kernels --precision=$P --target=$tg $o > k.txt 2> kerr.txt ||
        grep -q "$expected" kerr.txt || echo "[$s] kernels $P $tg $o: $(grep -v '^ \|warning' kerr.txt | joined 2 300)" >> "$log"
    done
  done; done
  for P in fp32 bf16 fp16; do
    bp=""; [ -n "$ck" ] && [ $P != fp16 ] && bp=$(budget --precision=$P)
    # fp32 also with SGD (Nesterov momentum); fp16 (loss scaling) plain and with clipping only
    sg=""; [ $P = fp32 ] && sg="--set optimizer=sgd --set momentum=0.9 --set nesterov=1"
    opts=("" "--set fusion=0" "--set grad_accum=2 --set grad_clip=1" "$fm" ${ck:+"$ck"} ${c1:+"$c1"} ${bp:+"$bp"} ${lo:+"$lo"} ${fr:+"$fr"} ${sg:+"$sg"})
    [ $P = fp16 ] && opts=("" "--set grad_clip=1")
    for o in "${opts[@]}"; do
    tag=$P$(echo "$o" | tr -dc a-z0-9 | cut -c1-40)
    timeout 120 "$T" run m.model $A --precision=$P $o --metrics i$tag.jsonl > i$tag.log 2>&1 ||
      { grep -q "$expected" i$tag.log || echo "[$s] trainc run $P $o: $(tail -1 i$tag.log)" >> "$log"; continue; }
    # (a timeout says so: on a loaded machine the C compiler can take past it)
    timeout 120 "$T" compile m.model --precision=$P $o -o x$tag > c$tag.log 2>&1 ||
      { rc=$?; echo "[$s] compile $P $o: $([ $rc = 124 ] && echo "timed out after 120 s" || grep -v '^ \|warning' c$tag.log | tail -1)" >> "$log"; continue; }
    timeout 60 ./x$tag $A --metrics c$tag.jsonl > r$tag.log 2>&1 ||
      { rc=$?; echo "[$s] executable $P $o: $([ $rc = 124 ] && echo "timed out after 60 s" || tail -1 r$tag.log)" >> "$log"; continue; }
    lim=1e-4; [ $P != fp32 ] && lim=3e-2
    same_losses interpreter i$tag.jsonl compiled c$tag.jsonl $lim > cmp$tag.txt || mismatch "$P" "$tag" $o
  done; done
  # pad-tiles changes nothing: the interpreter's fp32 losses padded to 24
  # (the vocabulary 256 to 264) and not padded, fused and not, the same to
  # 1e-6 (a cross_entropy_grad without the forward's {classes} failed it)
  for o in "" "--set fusion=0"; do
    tag=pad$(echo "$o" | tr -dc a-z0-9)
    timeout 120 "$T" run m.model $A $o --set pad_tiles=0 --metrics u$tag.jsonl > u$tag.log 2>&1 &&
      timeout 120 "$T" run m.model $A $o --pad-multiple=24 --metrics p$tag.jsonl > p$tag.log 2>&1 ||
      { grep -q "$expected" u$tag.log p$tag.log || echo "[$s] trainc run padded or not $o: $(tail -qn1 u$tag.log p$tag.log | joined 2 300)" >> "$log"; continue; }
    same_losses unpadded u$tag.jsonl padded p$tag.jsonl 1e-6 > cmp$tag.txt || echo "[$s] padding changes the losses $o: $(cat cmp$tag.txt)" >> "$log"
  done
  P=$([ $((s % 2)) -eq 0 ] && echo bf16 || echo fp32)
  tsan=$([ $((s % 3)) -eq 0 ] && echo 1 || echo 0)
  acc=$([ $((s % 4)) -ge 2 ] && echo 2 || echo 1)
  ex=""; case $((s % 5)) in 1) ex=$lo ;; 3) ex=$fr ;; esac
  EMU_TSAN=$tsan TRAINC_EMU_ONE_ORDER=$tsan timeout 300 bash "$root/tests/cuda/emu/run.sh" "$build/tests/cuda_emit" "$build/runtime/libtrainc_rt.a" "$d/emu" "$d/m.model" fz trn_model_fz \
    --set precision=$P --set grad_accum=$acc $ex > emu.txt 2>&1 || grep -q "$expected" emu.txt || echo "[$s] emulation $P accum $acc$([ $tsan = 1 ] && echo ' (tsan)')${ex:+ $ex}: $(grep -E 'FAIL|SUMMARY|kernels,|^emu:|error' emu.txt | joined 4 400)" >> "$log"
  echo "[$s] done" >> "$log"
done
