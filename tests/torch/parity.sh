#!/bin/bash
# tests/torch/parity.sh TRAINC TOKENIZE OUT — trainc's training against
# PyTorch's (CTest: torch_parity).  For each case, a tiny examples/gpt2.model
# or examples/llama.model is compiled for the CPU in fp32, saves its step-0
# parameters, trains a few steps on tiny Shakespeare (sequential batches,
# warm-up then cosine decay) and saves the result; tests/torch/parity.py
# trains PyTorch's model from the same parameters on the same batches and
# compares every step's loss and gradient norm, and the final parameters
# (and, for GPT-2, that bench/gpt2_torch.py's model, the GPU benchmark's
# PyTorch side, gives the same first loss).
# Cases: AdamW, two micro-batches a step, SGD with Nesterov momentum, LoRA
# (PEFT's adapters), Llama with grouped-query attention.  Then the negative
# controls: the reference made wrong on purpose (weight decay left out,
# clipping per tensor, LoRA scaled by alpha rather than alpha/r, GQA's
# key/value heads tiled instead of repeated, RoPE's pairs interleaved) must
# each fail, the Llama ones also from trained weights.  Skips (77) when no
# python3 here imports torch (Debian's python3-torch: scripts/setup.sh
# installs it when it can).
set -u
trainc=$1 tokenize=$2 out=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/torch/common.sh"
torch_setup "$out" "$tokenize"
gpt2="-D vocab=256 -D layers=2 -D heads=4 -D dim=64 -D seq=64 -D batch=4"
llama="-D vocab=256 -D layers=2 -D heads=4 -D kv_heads=2 -D dim=64 -D ffn=128 -D seq=64 -D batch=4"
fail=0

# NAME MODEL STEPS "COMPILE ARGS" "RUN ARGS" [PRETRAIN]: DIR NAME with init,
# metrics, end; PRETRAIN steps (at lr 3e-3, constant) first make the init
train() {
    local name=$1 model=$2 steps=$3 pre=${6:-0}
    mkdir -p "$name" && cp tok_train.bin "$name/"
    local from=()
    [ "$pre" -gt 0 ] && from=(--init "$name/pre.safetensors")
    "$trainc" compile "$root/examples/$model.model" $4 -o "$name/train" > "$name/compile.log" 2>&1 &&
    { [ "$pre" -eq 0 ] || "$name/train" --data tok_train.bin --steps "$pre" --lr 3e-3 --warmup 0 --schedule constant --quiet \
                             --save "$name/pre.safetensors"; } &&
    "$name/train" --data tok_train.bin --steps 0 --save "$name/init.safetensors" --quiet "${from[@]}" &&
    "$name/train" --data tok_train.bin --steps "$steps" --warmup 2 --batches sequential --quiet $5 "${from[@]}" \
        --metrics "$name/metrics.jsonl" --save "$name/end.safetensors" > "$name/train.log" 2>&1 ||
        { echo "FAIL: $name: trainc failed"; cat "$name/compile.log" "$name/train.log" | tail -5; fail=1; return 1; }
}
# NAME MODEL ARGS...: the comparison, which must pass
same() {
    local name=$1 model=$2
    shift 2
    echo "== $name"
    "$py" "$root/tests/torch/parity.py" "$model" "$name" "$@" || { echo "FAIL: $name differs from PyTorch"; fail=1; }
}
# NAME MODEL WHAT ARGS...: the comparison with the reference made wrong (WHAT), which must fail
control() {
    local name=$1 model=$2 what=$3
    shift 3
    "$py" "$root/tests/torch/parity.py" "$model" "$name" "$@" > "$name/control_$what.txt" 2>&1
    local rc=$?
    # exit 1 with lines over the tolerance: a traceback (also exit 1) is no difference found
    if [ $rc -eq 1 ] && grep -q '<--' "$name/control_$what.txt"; then
        echo "control $what on $name: differs, as it must ($(grep -c '<--' "$name/control_$what.txt") lines over the tolerance)"
    else
        echo "FAIL: control $what on $name: exit $rc, not 1"; tail -3 "$name/control_$what.txt"; fail=1
    fi
}

if train gpt2 gpt2 8 "$gpt2" "--lr 1e-3"; then
    same gpt2 gpt2 --batch 4 --seq 64 --heads 4 --bench   # and the benchmark's PyTorch model computes the same loss
    control gpt2 gpt2 no-decay --batch 4 --seq 64 --heads 4 --control no-decay
    control gpt2 gpt2 clip-per-tensor --batch 4 --seq 64 --heads 4 --control clip-per-tensor
fi
# two micro-batches a step: batches 2s and 2s+1, gradients averaged
train gpt2_accum gpt2 6 "$gpt2 --set grad_accum=2" "--lr 1e-3" &&
    same gpt2_accum gpt2 --batch 4 --seq 64 --heads 4 --accum 2
# SGD with Nesterov momentum (and the train section's weight decay 0.1)
train gpt2_sgd gpt2 6 "$gpt2 --set optimizer=sgd --set momentum=0.9 --set nesterov=1" "--lr 0.1" &&
    same gpt2_sgd gpt2 --batch 4 --seq 64 --heads 4 --sgd --momentum 0.9 --nesterov
# LoRA (rank 4, alpha 8) on c_attn and c_fc, everything else frozen: PEFT's
# W x + (alpha/r) B A x, B from zero; scaling by alpha instead must fail
if train gpt2_lora gpt2 6 "$gpt2 --set lora_rank=4 --set lora_alpha=8 --set lora_targets=*.c_attn.weight,*.mlp.c_fc.weight" "--lr 1e-2"; then
    same gpt2_lora gpt2 --batch 4 --seq 64 --heads 4 --lora-scale 2
    control gpt2_lora gpt2 lora-scale-alpha --batch 4 --seq 64 --heads 4 --lora-scale 8
fi
if train llama llama 8 "$llama" "--lr 1e-3"; then
    same llama llama --batch 4 --seq 64 --heads 4 --kv-heads 2 --eps 1e-5
    control llama llama gqa-tiled --batch 4 --seq 64 --heads 4 --kv-heads 2 --eps 1e-5 --control gqa-tiled
    control llama llama rope-interleaved --batch 4 --seq 64 --heads 4 --kv-heads 2 --eps 1e-5 --control rope-interleaved
fi
# from trained weights (200 steps), where attention is far from uniform: a
# RoPE or GQA mistake moves the loss by percents, not by 1e-5 as from the
# initialisation's
if train llama_trained llama 4 "$llama" "--lr 1e-3" 200; then
    same llama_trained llama --batch 4 --seq 64 --heads 4 --kv-heads 2 --eps 1e-5
    control llama_trained llama gqa-tiled --batch 4 --seq 64 --heads 4 --kv-heads 2 --eps 1e-5 --control gqa-tiled
    control llama_trained llama rope-interleaved --batch 4 --seq 64 --heads 4 --kv-heads 2 --eps 1e-5 --control rope-interleaved
fi
[ $fail -eq 0 ] && echo "PASS"
exit $fail
