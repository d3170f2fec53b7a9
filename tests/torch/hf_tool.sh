#!/bin/bash
# tests/torch/hf_tool.sh TRAINC TOKENIZE OUT — tools/hf_to_trainc.py on
# what it must refuse or handle beyond hf_import.sh's conversions (CTest:
# torch_hf_tool).  hf_import.py refuse: cut, inconsistent and malformed
# safetensors files, a PyTorch pickle, a missing input, bad -o paths (a
# folder, empty, no such folder, over ulimit -f), an untied GPT-2 head,
# --to-hf of a Hugging Face file, of the wrong --arch and of what is no
# safetensors file, LoRA without --lora-alpha, --config's checks: each one
# line "hf_to_trainc: error: ..." naming the file, exit 1, nothing written
# and no temporary file left; -o through a symbolic link (kept, mode
# kept) and onto a file with another hard link; LoRA adapters merged as
# W + (alpha/r) B A; --config's -D lines.  Then LoRA end to end: a tiny
# GPT-2 with adapters on c_attn, attn.c_proj (square: a transposition
# slip shows) and c_fc trains 3 steps from a converted Hugging Face file,
# --to-hf --lora-alpha merges them, and Hugging Face's forward (float64)
# of the merged file gives the loss trainc computes from the checkpoint;
# controls: the base file, and the adapters merged with alpha = r, give
# other losses; the checkpoint converted without --to-hf is refused as
# trainc's.  A pipe's file (read, not mapped) converts to the same
# bytes.  HF_TOOL=FILE tests another converter (an old one must
# fail).  Skips (77) without a python3 that imports torch and numpy.
set -u
trainc=$1 tokenize=$2 out=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/torch/common.sh"
torch_setup "$out" "$tokenize"
export PYTHONDONTWRITEBYTECODE=1
tool=${HF_TOOL:-$root/tools/hf_to_trainc.py}
conv="$py $tool"
hf="$py $root/tests/torch/hf_import.py"
fail=0

echo "== refuse"
$hf refuse . --tool "$tool" || fail=1

echo "== lora"
sizes="-D vocab=256 -D layers=2 -D heads=4 -D dim=64 -D seq=64 -D batch=4"
args="--heads 4 --batch 4 --seq 64"
mkdir -p lora && cp tok_train.bin lora/
if $hf make gpt2 lora --vocab 256 --layers 2 --heads 4 --dim 64 --seq 64 &&
    $conv --arch gpt2 lora/hf.safetensors -o lora/base.safetensors 2> /dev/null &&
    "$trainc" compile "$root/examples/gpt2.model" $sizes --set lora_rank=4 --set lora_alpha=8 \
        --set 'lora_targets=*.c_attn.weight,*.attn.c_proj.weight,*.mlp.c_fc.weight' -o lora/train > lora/compile.log 2>&1 &&
    lora/train --data tok_train.bin --init lora/base.safetensors --steps 3 --warmup 1 --lr 1e-2 --batches sequential --quiet \
        --save lora/trained.safetensors &&
    lora/train --data tok_train.bin --init lora/trained.safetensors --steps 1 --batches sequential --quiet --metrics lora/metrics.jsonl; then
    if $conv --arch gpt2 --to-hf lora/trained.safetensors --lora-alpha 8 -o lora/merged.safetensors &&
        $hf check gpt2 lora $args --hf merged.safetensors; then :; else
        echo "FAIL: lora: the merged model's loss is not trainc's"; fail=1
    fi
    # controls: without the adapters, and with them scaled by 1 (alpha = r), the loss is another
    $conv --arch gpt2 --to-hf lora/trained.safetensors --lora-alpha 0 -o lora/alpha_r.safetensors 2> /dev/null
    for f in hf alpha_r; do
        if $hf check gpt2 lora $args --hf $f.safetensors > lora/control_$f.txt 2>&1 || ! grep -q "Hugging Face's layout" lora/control_$f.txt; then
            echo "FAIL: lora: control $f: $(tail -1 lora/control_$f.txt)"; fail=1
        else
            echo "control $f: differs, as it must: $(cat lora/control_$f.txt)"
        fi
    done
    # the checkpoint given without --to-hf: said to be trainc's, nothing written
    if $conv --arch gpt2 lora/trained.safetensors -o lora/wrongway.safetensors 2> lora/wrongway.log ||
        ! grep -q "is a trainc checkpoint.*--to-hf" lora/wrongway.log || [ -e lora/wrongway.safetensors ]; then
        echo "FAIL: lora: a trainc checkpoint without --to-hf: $(tail -1 lora/wrongway.log)"; fail=1
    else
        echo "a trainc checkpoint without --to-hf: $(cat lora/wrongway.log)"
    fi
else
    echo "FAIL: lora: making, converting or training the model"; tail -3 lora/compile.log; fail=1
fi

echo "== pipe"
# a file that cannot be mapped (a pipe) is read instead: the same bytes out
if [ -s lora/hf.safetensors ] && cat lora/hf.safetensors | $conv --arch gpt2 /dev/stdin -o lora/piped.safetensors 2> lora/piped.log &&
    cmp -s lora/base.safetensors lora/piped.safetensors; then
    echo "a pipe's file converts as the mapped file does"
else
    echo "FAIL: pipe: $(tail -1 lora/piped.log 2>/dev/null)"; fail=1
fi
[ $fail -eq 0 ] && echo "PASS"
exit $fail
