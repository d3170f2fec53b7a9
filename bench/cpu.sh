#!/usr/bin/env bash
# bench/cpu.sh — the compiled CPU executable against PyTorch eager on the
# CPU, for the same tiny GPT-2 (same shapes, fp32 or bf16, AdamW, same threads),
# both measured in the same run.  Prints the ratio and writes
# bench/results/cpu.json (bf16: cpu_bf16.json).  Needs Debian's
# python3-torch.  PRECISION bf16: trainc's --precision=bf16 (bf16
# products, f32 master weights) against the forward under PyTorch's bf16
# autocast.
#
#   bench/cpu.sh [THREADS] [STEPS] [PRECISION=fp32|bf16]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
threads=${1:-2}
steps=${2:-40}
prec=${3:-fp32}
case $prec in
fp32) tflag=() dtype=f32 result=cpu.json ;;
bf16) tflag=(--bf16) dtype=bf16 result=cpu_bf16.json ;;
*) echo "bench/cpu.sh: PRECISION is fp32 or bf16, not '$prec'" >&2; exit 2 ;;
esac
warm=5
. "$root/bench/common.sh"   # $bin, $trainc, $work, $work/t_train.bin
count THREADS "$threads" 0
count STEPS "$steps" 1
# the model: vocab 256, 4 layers, 4 heads, 128 wide, context 128, batch 8
declare -A size=([vocab]=256 [layers]=4 [heads]=4 [dim]=128 [seq]=128 [batch]=8)
defs=()
for k in "${!size[@]}"; do defs+=(-D "$k=${size[$k]}"); done
"$trainc" compile "$root/examples/gpt2.model" "${defs[@]}" --precision="$prec" -o "$work/gpt2" >/dev/null
total=$((warm + steps))
"$work/gpt2" --data "$work/t_train.bin" --steps "$total" --warmup 0 --lr 6e-4 --schedule constant \
  --threads "$threads" --quiet --metrics "$work/m.jsonl"
ours=$(sed -n 's/.*"step": *\([0-9]*\).*"ms": *\([0-9.eE+-]*\).*/\1 \2/p' "$work/m.jsonl" |
       awk -v w="$warm" '$1 > w {print $2}' | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}')
py=python3; /usr/bin/python3 -c "import torch" 2>/dev/null && py=/usr/bin/python3
torch=$(OMP_NUM_THREADS=$threads $py "$root/bench/gpt2_cpu_torch.py" "$work/t_train.bin" --vocab "${size[vocab]}" \
  --layers "${size[layers]}" --heads "${size[heads]}" --dim "${size[dim]}" --seq "${size[seq]}" --batch "${size[batch]}" \
  --steps "$steps" --warmup-steps "$warm" --threads "$threads" "${tflag[@]}")
tms=$(echo "$torch" | sed 's/.*"ms_per_step": *\([0-9.eE+-]*\).*/\1/')
tver=$(echo "$torch" | sed 's/.*"torch": *"\([^"]*\)".*/\1/')
ratio=$(awk -v a="$tms" -v b="$ours" 'BEGIN {printf "%.2f", a / b}')
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
printf 'tiny GPT-2 (vocab 256, 4 layers, 128 wide, T=128, B=8), %s, %s threads, median of %s steps:\n' "$prec" "$threads" "$steps"
printf '  trainc compiled   %8.2f ms/step\n  PyTorch %s eager %8.2f ms/step\n  speed-up          %8sx\n' "$ours" "$tver" "$tms" "$ratio"
cat > "$root/bench/results/$result" <<JSON
{"model": "gpt2 vocab=256 layers=4 heads=4 dim=128 seq=128 batch=8", "dtype": "$dtype", "threads": $threads, "steps": $steps,
 "trainc_ms_per_step": $ours, "torch_ms_per_step": $tms, "torch_version": "$tver", "speedup": $ratio,
 "cpu": "$cpu", "date": "$(date -u +%Y-%m-%d)"}
JSON
