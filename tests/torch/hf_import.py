#!/usr/bin/env python3
"""tests/torch/hf_import.py — tools/hf_to_trainc.py against Hugging Face's layouts.

    hf_import.py make gpt2|llama DIR --heads H [--kv-heads K] --vocab V --layers L --dim C [--ffn F] --seq T
        writes DIR/hf.safetensors: random weights named and laid out as
        Hugging Face stores them (GPT2LMHeadModel: "transformer." names,
        Conv1D weights [in, out], the tied lm_head and the attention mask
        buffers; LlamaForCausalLM: "model." names, bf16, rotary inv_freq
        buffers), and DIR/control.safetensors later (below)
    hf_import.py check gpt2|llama DIR --heads H [--kv-heads K] --batch B --seq T
        the loss of micro-batch 0 (sequential order of DIR/tok_train.bin)
        computed from DIR/hf.safetensors with Hugging Face's layout (a
        Conv1D is x W + b) against the first loss trainc logged
        (DIR/metrics.jsonl) after `--init` of the converted file; exits 1
        beyond 1e-5 relative
    hf_import.py back DIR
        DIR/back.safetensors (tools/hf_to_trainc.py --to-hf of a checkpoint
        trainc saved) against DIR/hf.safetensors: the same tensors, bit for
        bit, but for the mask buffers (GPT-2)
    hf_import.py control DIR
        DIR/control.safetensors: the converted file with one square Conv1D
        weight (h.0.attn.c_proj) left as Hugging Face stores it, which must
        not give the loss
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity  # noqa: E402  (the loaders, batches, attention, rms_norm, rope; parity.st: the safetensors reader and writer)

DT = torch.float64


def bf16_bits(a):
    """float32 array -> bf16 bit patterns (round to nearest even)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def read_st(path):
    """{name: (dtype, shape, float64 tensor or None, raw bytes)} (tools/hf_to_trainc.py's reader)."""
    out = {}
    for k, (dt, shape, raw) in parity.st.read(path).items():
        t = None
        if dt == "F32":
            t = torch.tensor(np.frombuffer(raw, "<f4").astype(np.float64).reshape(shape))
        elif dt == "BF16":
            t = torch.tensor((np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64).reshape(shape))
        out[k] = (dt, shape, t, raw)
    return out


def make(a):
    rng = np.random.default_rng(7)
    f32 = lambda *s, std=0.02: rng.normal(0.0, std, s).astype(np.float32)
    T = {}
    put = lambda k, x: T.__setitem__(k, ("F32", x.shape, x.tobytes()))
    C, V, L = a.dim, a.vocab, a.layers
    if a.model == "gpt2":
        wte = f32(V, C)
        put("transformer.wte.weight", wte)
        put("lm_head.weight", wte)   # tied: saved by Hugging Face too
        put("transformer.wpe.weight", f32(a.seq, C))
        for i in range(L):
            p = f"transformer.h.{i}."
            for ln in ("ln_1", "ln_2"):
                put(p + ln + ".weight", 1.0 + f32(C, std=0.1))
                put(p + ln + ".bias", f32(C, std=0.1))
            # Conv1D: weight [in, out]; biases non-zero, so that a wrong layout shows
            for name, n_in, n_out in (("attn.c_attn", C, 3 * C), ("attn.c_proj", C, C), ("mlp.c_fc", C, 4 * C), ("mlp.c_proj", 4 * C, C)):
                put(p + name + ".weight", f32(n_in, n_out))
                put(p + name + ".bias", f32(n_out, std=0.05))
            mask = np.tril(np.ones((a.seq, a.seq), np.uint8)).reshape(1, 1, a.seq, a.seq)
            T[p + "attn.bias"] = ("U8", mask.shape, mask.tobytes())   # the causal mask buffer
        put("transformer.ln_f.weight", 1.0 + f32(C, std=0.1))
        put("transformer.ln_f.bias", f32(C, std=0.1))
    else:
        D, Hkv = C // a.heads, a.kv_heads or a.heads
        bf = {}
        bf["model.embed_tokens.weight"] = f32(V, C)
        bf["lm_head.weight"] = f32(V, C)
        bf["model.norm.weight"] = 1.0 + f32(C, std=0.1)
        for i in range(L):
            p = f"model.layers.{i}."
            bf[p + "input_layernorm.weight"] = 1.0 + f32(C, std=0.1)
            bf[p + "post_attention_layernorm.weight"] = 1.0 + f32(C, std=0.1)
            bf[p + "self_attn.q_proj.weight"] = f32(C, C)
            bf[p + "self_attn.k_proj.weight"] = f32(Hkv * D, C)
            bf[p + "self_attn.v_proj.weight"] = f32(Hkv * D, C)
            bf[p + "self_attn.o_proj.weight"] = f32(C, C)
            bf[p + "mlp.gate_proj.weight"] = f32(a.ffn, C)
            bf[p + "mlp.up_proj.weight"] = f32(a.ffn, C)
            bf[p + "mlp.down_proj.weight"] = f32(C, a.ffn)
            inv = (1.0 / 10000.0 ** (np.arange(0, D, 2) / D)).astype(np.float32)
            put(p + "self_attn.rotary_emb.inv_freq", inv)   # a buffer older checkpoints carry
        for k, x in bf.items():   # Llama checkpoints are bf16
            T[k] = ("BF16", x.shape, bf16_bits(x).tobytes())
    parity.st.write(os.path.join(a.dir, "hf.safetensors"), T)


def hf_gpt2_loss(t, tokens, targets, H):
    """GPT2LMHeadModel's forward with its own layout: a Conv1D is x W + b."""
    w = lambda k: t[k][2]
    B, Tn = tokens.shape
    x = w("transformer.wte.weight")[tokens] + w("transformer.wpe.weight")[:Tn]
    C = x.shape[-1]
    L = sum(1 for k in t if k.endswith(".ln_1.weight"))
    conv = lambda x, p: x @ w(p + ".weight") + w(p + ".bias")
    for i in range(L):
        p = f"transformer.h.{i}."
        h = F.layer_norm(x, (C,), w(p + "ln_1.weight"), w(p + "ln_1.bias"), 1e-5)
        q, k, v = conv(h, p + "attn.c_attn").split(C, dim=2)
        heads = lambda z: z.view(B, Tn, H, C // H).transpose(1, 2)
        y = parity.causal_attention(heads(q), heads(k), heads(v)).transpose(1, 2).reshape(B, Tn, C)
        x = x + conv(y, p + "attn.c_proj")
        h = F.layer_norm(x, (C,), w(p + "ln_2.weight"), w(p + "ln_2.bias"), 1e-5)
        x = x + conv(F.gelu(conv(h, p + "mlp.c_fc"), approximate="tanh"), p + "mlp.c_proj")
    x = F.layer_norm(x, (C,), w("transformer.ln_f.weight"), w("transformer.ln_f.bias"), 1e-5)
    logits = x @ w("lm_head.weight").T
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1)).item()


def hf_llama_loss(t, tokens, targets, H, Hkv):
    """LlamaForCausalLM's forward on its own names (the parity test's model)."""
    p = {}
    for k, v in t.items():
        if v[2] is None or k.endswith("inv_freq"):
            continue
        n = k[len("model."):] if k.startswith("model.") else k
        p["embed_tokens" if n == "embed_tokens.weight" else n] = v[2]
    return parity.llama(p, tokens, targets, H, Hkv).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["make", "check", "control", "back"])
    ap.add_argument("model", nargs="?", choices=["gpt2", "llama"])
    ap.add_argument("dir")
    for k in ("heads", "kv-heads", "vocab", "layers", "dim", "ffn", "seq", "batch"):
        ap.add_argument("--" + k, type=int, default=0)
    ap.add_argument("--tol", type=float, default=1e-5)
    a = ap.parse_args()
    if a.what == "make":
        make(a)
        return
    if a.what == "back":
        a_, b_ = read_st(os.path.join(a.dir, "hf.safetensors")), read_st(os.path.join(a.dir, "back.safetensors"))
        want = {k: v[3] for k, v in a_.items() if not k.endswith(".attn.bias")}
        got = {k: v[3] for k, v in b_.items()}
        bad = sorted(set(want) ^ set(got)) + [k for k in want if k in got and want[k] != got[k]]
        print(f"--to-hf: {len(got)} tensors, " + ("the same bytes" if not bad else "differ: " + ", ".join(bad[:5])))
        sys.exit(1 if bad else 0)
    if a.what == "control":
        conv = read_st(os.path.join(a.dir, "trainc.safetensors"))
        out = {k: (v[0], v[1], v[3]) for k, v in conv.items()}
        dt, shape, _, raw = conv["h.0.attn.c_proj.weight"]
        m = np.frombuffer(raw, "<f4").reshape(shape).T.copy()
        out["h.0.attn.c_proj.weight"] = (dt, shape, m.tobytes())
        parity.st.write(os.path.join(a.dir, "control.safetensors"), out)
        return
    t = read_st(os.path.join(a.dir, "hf.safetensors"))
    tok = parity.load_tokens(os.path.join(a.dir, "tok_train.bin"))
    x, y = parity.batch(tok, a.batch, a.seq, 0)
    ref = hf_gpt2_loss(t, x, y, a.heads) if a.model == "gpt2" else hf_llama_loss(t, x, y, a.heads, a.kv_heads or a.heads)
    rows = [json.loads(l) for l in open(os.path.join(a.dir, "metrics.jsonl")) if '"loss"' in l]
    got = rows[0]["loss"]
    e = abs(got - ref) / abs(ref)
    print(f"{a.model}: Hugging Face's layout {ref:.8f}, trainc after --init of the converted file {got:.8f}: {e:.1e}")
    sys.exit(1 if e > a.tol or not math.isfinite(got) else 0)


if __name__ == "__main__":
    main()
