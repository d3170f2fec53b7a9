#!/usr/bin/env python3
"""tests/torch/parity.py — trainc's training against PyTorch's, step by step.

An outside reference for what the compiler's own references (the
interpreter, finite differences) cannot show: that examples/gpt2.model and
examples/llama.model, trained by trainc, are the models PyTorch users know
(nanoGPT's GPT-2; Hugging Face's Llama: rotate-half RoPE, grouped-query
attention with key/value head j serving query heads j*g .. j*g+g-1, RMSNorm,
SwiGLU) under the optimizer they know (torch.optim.AdamW, decay on the
matrices, torch.nn.utils.clip_grad_norm_).

    parity.py gpt2|llama DIR --batch B --seq T --heads H [--kv-heads K] [--accum A]
              [--beta2 B2] [--eps E] [--wd W] [--clip C] [--sgd --momentum M --nesterov]
              [--lora-scale S] [--bench] [--tol TOL] [--ptol PTOL]
              [--control gqa-tiled|rope-interleaved|no-decay|clip-per-tensor]

DIR holds what parity.sh left there: init.safetensors (trainc's step-0
parameters), tok_train.bin (the token file trainc trained on, sequential
batches), metrics.jsonl (trainc's loss, gradient norm and learning rate of
each step) and end.safetensors (its parameters after the last step).
PyTorch starts from init.safetensors, trains on the same micro-batches with
the learning rate trainc logged for each step, in float64, and the script
prints each step's loss and gradient norm side by side, then the largest
difference of the final parameters.  Exits 1 when a loss or a norm differs
by more than --tol (relative) or a final parameter by more than --ptol
times the sum of the learning rates (how far AdamW can move a weight).
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import hf_to_trainc as st  # noqa: E402  (the safetensors reader and writer of the Python tools and tests)
from tokens import read_tokens  # noqa: E402  (the token-file reader of the PyTorch scripts)

DT = torch.float64

# --control NAME: the reference made wrong on purpose, in a way a model or
# an optimizer could plausibly be wrong; parity.sh expects each to fail.
CONTROL = None


def load_safetensors(path):
    """The parameters of a trainc checkpoint (those its "params" metadata
    names: tools/hf_to_trainc.py's trainc_params), as float64 tensors."""
    out = {}
    for k, (dt, shape, raw) in st.trainc_params(path).items():
        if dt != "F32":
            sys.exit(f"{path}: {k} is {dt}, not F32")
        out[k] = torch.tensor(np.frombuffer(raw, dtype="<f4").astype(np.float64).reshape(shape))
    return out


def load_tokens(path):
    """The tokens of a token file (llm.c's .bin: bench/tokens.py's reader) as int64."""
    return np.frombuffer(read_tokens(path), dtype=np.uint16).astype(np.int64)


def batch(tok, B, T, k):
    """Micro-batch k in sequential order (runtime/data.c, rt_data_batch): row r
    of it starts at ((k B + r) mod rows) T, rows = (n - 1) / T."""
    rows = (len(tok) - 1) // T
    x = np.empty((B, T), np.int64)
    y = np.empty((B, T), np.int64)
    for r in range(B):
        s = ((k * B + r) % rows) * T
        x[r], y[r] = tok[s:s + T], tok[s + 1:s + T + 1]
    return torch.tensor(x), torch.tensor(y)


def causal_attention(q, k, v):
    """softmax(q k^T / sqrt(D) + causal mask) v, q [B,H,T,D], k and v [B,Hkv,T,D]:
    key/value head j serves query heads j*g .. j*g+g-1 (Hugging Face's repeat_kv)."""
    g = q.shape[1] // k.shape[1]
    if CONTROL == "gqa-tiled":   # key/value head j serving query heads j, j+Hkv, ...
        k, v = k.repeat(1, g, 1, 1), v.repeat(1, g, 1, 1)
    else:
        k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    T = q.shape[2]
    s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return s.softmax(-1) @ v


LORA_SCALE = 1.0


def lin(p, x, name):
    """linear(x, NAME.weight[, NAME.bias]), plus LoRA's (alpha/r) B(A x) where
    the checkpoint has NAME.lora_A.weight and NAME.lora_B.weight (PEFT's names)."""
    y = F.linear(x, p[name + ".weight"], p.get(name + ".bias"))
    if name + ".lora_A.weight" in p:
        y = y + LORA_SCALE * F.linear(F.linear(x, p[name + ".lora_A.weight"]), p[name + ".lora_B.weight"])
    return y


def gpt2(p, tokens, targets, H):
    """nanoGPT's GPT-2: pre-LN blocks, tanh GELU, the lm_head tied to wte."""
    B, T = tokens.shape
    x = p["wte"][tokens] + p["wpe"][:T]
    C = x.shape[-1]
    L = sum(1 for k in p if k.endswith(".ln_1.weight"))
    for i in range(L):
        w = lambda n: p[f"h.{i}.{n}"]
        h = F.layer_norm(x, (C,), w("ln_1.weight"), w("ln_1.bias"), 1e-5)
        q, k, v = lin(p, h, f"h.{i}.attn.c_attn").split(C, dim=2)
        heads = lambda t: t.view(B, T, H, C // H).transpose(1, 2)
        y = causal_attention(heads(q), heads(k), heads(v)).transpose(1, 2).reshape(B, T, C)
        x = x + lin(p, y, f"h.{i}.attn.c_proj")
        h = F.layer_norm(x, (C,), w("ln_2.weight"), w("ln_2.bias"), 1e-5)
        h = F.gelu(lin(p, h, f"h.{i}.mlp.c_fc"), approximate="tanh")
        x = x + lin(p, h, f"h.{i}.mlp.c_proj")
    x = F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], 1e-5)
    logits = F.linear(x, p["wte"])
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def rms_norm(x, w, eps=1e-5):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, theta=10000.0):
    """Hugging Face's rotate-half RoPE over x [B, H, T, D], positions 0 .. T-1."""
    T, D = x.shape[-2], x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=DT) / D))
    f = torch.outer(torch.arange(T, dtype=DT), inv)
    if CONTROL == "rope-interleaved":   # pairs (2i, 2i+1) rotated, as Meta's original code
        c, s = f.cos(), f.sin()
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)
    emb = torch.cat((f, f), dim=-1)
    x1, x2 = x[..., :D // 2], x[..., D // 2:]
    return x * emb.cos() + torch.cat((-x2, x1), dim=-1) * emb.sin()


def llama(p, tokens, targets, H, Hkv):
    """Hugging Face's LlamaForCausalLM: RMSNorm, RoPE, GQA, SwiGLU, no biases, untied head."""
    B, T = tokens.shape
    x = p["embed_tokens"][tokens]
    C = x.shape[-1]
    D = C // H
    L = sum(1 for k in p if k.endswith(".input_layernorm.weight"))
    for i in range(L):
        w = lambda n: p[f"layers.{i}.{n}"]
        h = rms_norm(x, w("input_layernorm.weight"))
        heads = lambda t, n: t.view(B, T, n, D).transpose(1, 2)
        q = rope(heads(lin(p, h, f"layers.{i}.self_attn.q_proj"), H))
        k = rope(heads(lin(p, h, f"layers.{i}.self_attn.k_proj"), Hkv))
        v = heads(lin(p, h, f"layers.{i}.self_attn.v_proj"), Hkv)
        y = causal_attention(q, k, v).transpose(1, 2).reshape(B, T, C)
        x = x + lin(p, y, f"layers.{i}.self_attn.o_proj")
        h = rms_norm(x, w("post_attention_layernorm.weight"))
        h = F.silu(lin(p, h, f"layers.{i}.mlp.gate_proj")) * lin(p, h, f"layers.{i}.mlp.up_proj")
        x = x + lin(p, h, f"layers.{i}.mlp.down_proj")
    logits = F.linear(rms_norm(x, p["norm.weight"]), p["lm_head.weight"])
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def bench_loss(p, tokens, targets, H):
    """The loss of bench/gpt2_torch.py's GPT2 (the benchmark's PyTorch
    reference, in eager mode) with these parameters on one micro-batch: the
    benchmark times the model trainc trains."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "gpt2_torch.py")
    spec = importlib.util.spec_from_file_location("gpt2_torch", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    V, C = p["wte"].shape
    L = sum(1 for k in p if k.endswith(".ln_1.weight"))
    m = mod.GPT2(vocab=V, layers=L, heads=H, dim=C, seq=p["wpe"].shape[0]).to(DT)
    names = {"c_attn": "attn.c_attn", "c_proj": "attn.c_proj", "c_fc": "mlp.c_fc", "mlp_proj": "mlp.c_proj"}
    sd = {}
    for k in m.state_dict():
        parts = k.split(".")
        if parts[0] in ("wte", "wpe"):
            src = parts[0]
        elif parts[0] == "h":
            src = f"h.{parts[1]}.{names.get(parts[2], parts[2])}.{parts[3]}"
        else:
            src = k
        sd[k] = p[src]
    m.load_state_dict(sd)
    with torch.no_grad():
        return m(tokens, targets).item()


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


def main():
    ap = argparse.ArgumentParser(description="trainc's training (DIR: parity.sh's init.safetensors, tok_train.bin, "
                                             "metrics.jsonl, end.safetensors) against PyTorch's, step by step, in float64")
    ap.add_argument("model", choices=["gpt2", "llama"])
    ap.add_argument("dir")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--kv-heads", type=int, default=0)
    ap.add_argument("--accum", type=int, default=1)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--sgd", action="store_true", help="torch.optim.SGD (--momentum, --nesterov) instead of AdamW")
    ap.add_argument("--momentum", type=float, default=0.0)
    ap.add_argument("--nesterov", action="store_true")
    ap.add_argument("--lora-scale", type=float, default=0.0,
                    help="LoRA: alpha/r; only the adapters (*.lora_A/B.weight) train, the rest frozen")
    ap.add_argument("--bench", action="store_true", help="gpt2: also bench/gpt2_torch.py's model's first loss")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--control", choices=["gqa-tiled", "rope-interleaved", "no-decay", "clip-per-tensor"],
                    help="make the reference wrong on purpose (the test's negative controls)")
    ap.add_argument("--ptol", type=float, default=1e-2)
    a = ap.parse_args()
    global CONTROL, LORA_SCALE
    CONTROL = a.control
    LORA_SCALE = a.lora_scale
    if CONTROL == "no-decay":
        a.wd = 0.0
    torch.set_num_threads(1)
    d = a.dir
    p = load_safetensors(f"{d}/init.safetensors")
    end = load_safetensors(f"{d}/end.safetensors")
    tok = load_tokens(f"{d}/tok_train.bin")
    rows = [json.loads(l) for l in open(f"{d}/metrics.jsonl") if '"step"' in l and '"loss"' in l]
    if not rows:
        sys.exit("metrics.jsonl: no steps")
    names = sorted(p)
    trains = lambda k: not a.lora_scale or ".lora_" in k
    params = {k: p[k].clone().requires_grad_(trains(k)) for k in names}
    train = [k for k in names if trains(k)]
    decay = [params[k] for k in train if params[k].dim() >= 2]
    nodecay = [params[k] for k in train if params[k].dim() < 2]
    groups = [{"params": decay, "weight_decay": a.wd}, {"params": nodecay, "weight_decay": 0.0}]
    if a.sgd:
        opt = torch.optim.SGD(groups, lr=rows[0]["lr"], momentum=a.momentum, nesterov=a.nesterov)
    else:
        opt = torch.optim.AdamW(groups, lr=rows[0]["lr"], betas=(0.9, a.beta2), eps=a.eps)
    fwd = (lambda x, y: gpt2(params, x, y, a.heads)) if a.model == "gpt2" else \
          (lambda x, y: llama(params, x, y, a.heads, a.kv_heads or a.heads))
    fail = 0
    if a.bench:
        x, y = batch(tok, a.batch, a.seq, 0)
        lb = bench_loss(p, x, y, a.heads)
        e = rel(rows[0]["loss"], lb)
        bad = e > a.tol
        fail |= bad
        print(f"bench/gpt2_torch.py's GPT2, first loss: {lb:.8f} (trainc {rows[0]['loss']:.8f}, {e:.1e}){'  <-- over ' + str(a.tol) if bad else ''}")
    print(f"{'step':>4} {'trainc loss':>14} {'torch loss':>14} {'rel':>8}   {'trainc norm':>12} {'torch norm':>12} {'rel':>8}")
    for i, r in enumerate(rows):
        loss = 0.0
        for m in range(a.accum):
            x, y = batch(tok, a.batch, a.seq, i * a.accum + m)
            l = fwd(x, y) / a.accum
            l.backward()
            loss += l.item()
        if CONTROL == "clip-per-tensor":   # each gradient clipped by its own norm
            norm = math.sqrt(sum(float(params[k].grad.pow(2).sum()) for k in train))
            for k in train:
                torch.nn.utils.clip_grad_norm_([params[k]], a.clip)
        else:
            norm = torch.nn.utils.clip_grad_norm_([params[k] for k in train], a.clip).item()
        for g in opt.param_groups:
            g["lr"] = r["lr"]
        opt.step()
        opt.zero_grad(set_to_none=True)
        el, en = rel(r["loss"], loss), rel(r["grad_norm"], norm)
        bad = el > a.tol or en > a.tol
        fail |= bad
        print(f"{r['step']:>4} {r['loss']:>14.8f} {loss:>14.8f} {el:>8.1e}   {r['grad_norm']:>12.8f} {norm:>12.8f} {en:>8.1e}{'  <-- over ' + str(a.tol) if bad else ''}")
    # each step of AdamW moves a weight by about lr at most (its update is
    # m^/(sqrt(v^)+eps), within +-1, and the decay): the difference is
    # measured against the sum of the learning rates, how far the optimizer
    # could have moved any weight (SGD's steps are lr times a clipped
    # gradient, smaller).  (Weights whose gradient is zero but for
    # rounding, as the key projection's bias under softmax, get updates
    # from that rounding, different on each side.)
    moved = sum(r["lr"] for r in rows)
    worst, wname = 0.0, None
    for k in names:
        if k not in end:
            print(f"end.safetensors has no '{k}'")
            fail = 1
            continue
        e = (end[k] - params[k].detach()).abs().max().item() / moved
        if not e <= worst:  # a NaN is the worst (`e > worst` would pass over it)
            worst, wname = (math.inf if math.isnan(e) else e), k
    bad = worst > a.ptol
    fail |= bad
    print(f"parameters after step {rows[-1]['step']}: worst difference {worst:.1e} of the learning rates' sum {moved:.3g} ({wname}){'  <-- over ' + str(a.ptol) if bad else ''}")
    sys.exit(1 if fail else 0)


if __name__ == "__main__":
    main()
