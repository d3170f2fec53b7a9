#!/usr/bin/env bash
# The main job: install what is missing, build trainc, compile
# examples/gpt2.model at a small size into a training executable, and train
# it on a text file on this CPU, ending with a sample of generated text.
#
#   scripts/demo.sh [TEXT_FILE] [STEPS]
#
# Without TEXT_FILE it trains on the project's own documentation (so a fresh
# clone needs nothing else); try ../shared/data/tinyshakespeare.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
text=${1:-}
steps=${2:-600}
"$root/scripts/setup.sh"
"$root/scripts/build.sh" build
out="$root/build/demo"
mkdir -p "$out"
if [ -z "$text" ]; then
  text="$out/docs.txt"
  cat "$root/README.md" "$root"/docs/*.md > "$text"
fi
trainc="$root/build/tools/trainc"
"$root/build/tools/trainc-tokenize" "$text" "$out/text"
size=(-D vocab=256 -D layers=4 -D heads=4 -D dim=128 -D seq=128 -D batch=8)
echo "== the models"
for m in mlp gpt2 llama; do
  "$trainc" check "$root/examples/$m.model" --stats | sed "s/^/$m: /" | grep -E "params|FLOP" || true
done
echo "== trainc compile examples/gpt2.model ${size[*]} --report"
"$trainc" compile "$root/examples/gpt2.model" "${size[@]}" -o "$out/gpt2" --report
echo "== training on $text"
"$out/gpt2" --data "$out/text_train.bin" --val "$out/text_val.bin" --steps "$steps" --warmup 30 --lr 2e-3 --min-lr 2e-4 \
  --eval-every 200 --metrics "$out/metrics.jsonl" --sample 300
