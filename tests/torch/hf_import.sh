#!/bin/bash
# tests/torch/hf_import.sh TRAINC TOKENIZE OUT — tools/hf_to_trainc.py
# (CTest: torch_hf_import).  For a tiny GPT-2 and a tiny Llama: random
# weights written as Hugging Face stores them (tests/torch/hf_import.py
# make), converted, loaded by a compiled examples/*.model with --init, and
# the first loss compared with the loss of Hugging Face's own layout on the
# same micro-batch (PyTorch, float64).  Controls: one square Conv1D weight
# left untransposed gives another loss; an unknown tensor is refused.  And
# back: --to-hf of the checkpoint trainc saves gives the same tensors.
# Skips (77) without a python3 that imports torch and numpy.
set -u
trainc=$1 tokenize=$2 out=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/torch/common.sh"
torch_setup "$out" "$tokenize"
conv="$py $root/tools/hf_to_trainc.py"
hf="$py $root/tests/torch/hf_import.py"
fail=0

# NAME MODEL "SIZES (-D)" "PY ARGS"
case_() {
    local name=$1 model=$2 sizes=$3 args=$4
    mkdir -p "$name" && cp tok_train.bin "$name/"
    echo "== $name"
    $hf make "$model" "$name" $args || { echo "FAIL: $name: make"; fail=1; return; }
    $conv --arch "$model" "$name/hf.safetensors" -o "$name/trainc.safetensors" || { echo "FAIL: $name: hf_to_trainc"; fail=1; return; }
    "$trainc" compile "$root/examples/$model.model" $sizes -o "$name/train" > "$name/compile.log" 2>&1 || { echo "FAIL: $name: compile"; fail=1; return; }
    "$name/train" --data tok_train.bin --init "$name/trainc.safetensors" --steps 1 --batches sequential --quiet \
        --metrics "$name/metrics.jsonl" || { echo "FAIL: $name: --init of the converted file"; fail=1; return; }
    $hf check "$model" "$name" $args || { echo "FAIL: $name: the converted model's loss is not Hugging Face's"; fail=1; }
}
case_ gpt2 gpt2 "-D vocab=256 -D layers=2 -D heads=4 -D dim=64 -D seq=64 -D batch=4" \
    "--vocab 256 --layers 2 --heads 4 --dim 64 --seq 64 --batch 4"
case_ llama llama "-D vocab=256 -D layers=2 -D heads=4 -D kv_heads=2 -D dim=64 -D ffn=128 -D seq=64 -D batch=4" \
    "--vocab 256 --layers 2 --heads 4 --kv-heads 2 --dim 64 --ffn 128 --seq 64 --batch 4"

# controls: h.0.attn.c_proj left [in, out] (square: no shape error) gives another loss
if [ -f gpt2/trainc.safetensors ]; then
    $hf control gpt2 && gpt2/train --data tok_train.bin --init gpt2/control.safetensors --steps 1 --batches sequential --quiet \
        --metrics gpt2/metrics.jsonl && ! $hf check gpt2 gpt2 --heads 4 --batch 4 --seq 64 > gpt2/control.txt &&
        grep -q "Hugging Face's layout" gpt2/control.txt && echo "control: an untransposed Conv1D weight: $(cat gpt2/control.txt)" ||
        { echo "FAIL: control: an untransposed Conv1D weight gave the same loss"; fail=1; }
fi
# back: a checkpoint trainc saved (with its optimizer states) as Hugging
# Face's GPT-2 again: the tensors it was made from, bit for bit
if [ -f gpt2/trainc.safetensors ]; then
    gpt2/train --data tok_train.bin --init gpt2/trainc.safetensors --steps 0 --save gpt2/saved.safetensors --quiet &&
        $conv --arch gpt2 --to-hf gpt2/saved.safetensors -o gpt2/back.safetensors 2> /dev/null && $hf back gpt2 ||
        { echo "FAIL: --to-hf did not give back Hugging Face's tensors"; fail=1; }
fi
# a tensor the mapping does not know: an error naming it, no file written
"$py" - "$out/odd.safetensors" <<'EOF'
import json, struct, sys
h = json.dumps({"transformer.h.0.attn.c_attn.weight": {"dtype": "F32", "shape": [1, 1], "data_offsets": [0, 4]},
                "transformer.adapter.weight": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}).encode()
h += b" " * ((8 - len(h) % 8) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + bytes(8))
EOF
if $conv --arch gpt2 odd.safetensors -o odd_out.safetensors 2> odd.err; then
    echo "FAIL: an unknown tensor was accepted"; fail=1
elif ! grep -q "transformer.adapter.weight" odd.err || [ -e odd_out.safetensors ]; then
    echo "FAIL: the unknown tensor's error: $(cat odd.err)"; fail=1
else
    echo "control: $(cat odd.err)"
fi
[ $fail -eq 0 ] && echo "PASS"
exit $fail
