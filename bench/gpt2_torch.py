#!/usr/bin/env python3
"""bench/gpt2_torch.py — the PyTorch reference for trainc's GPT-2 benchmark.

The same model as examples/gpt2.model (GPT-2 small, 124M parameters, tied
lm_head, pre-LN, tanh GELU, causal attention) trained with AdamW (fused),
bf16 autocast and scaled_dot_product_attention, in eager mode or under
torch.compile.  Prints one JSON object: tokens/s, step time, MFU against
989 TFLOP/s (H100/H200 dense bf16) and peak device memory.

    python3 bench/gpt2_torch.py --mode eager|compile [--batch 16] [--seq 1024] [--steps 20] [--vocab 50257]

--vocab 50304 pads the embedding table by hand, as nanoGPT does: the
matrices then have the shapes trainc's pad-tiles gives them by itself, so
the work is the same, but not the loss: the padded rows are logits that
enter nanoGPT's softmax (trainc's padded columns do not).  The tokens stay
below 50257.

--data FILE takes the batches from a token file in llm.c's .bin format
(trainc's --data; tests/gpu/run.sh gives both sides the same file), B x
(T + 1) tokens each, in order from the start, instead of random tokens:
the embedding's backward then sees the same repeated rows as trainc's.

--device cpu (with --layers, --heads, --dim small) is the smoke test that
runs where there is no GPU (tests/gpu/torch_smoke.sh: the script's shapes
and its JSON line, eager; with Debian's PyTorch 1.13, which has neither
torch.compile nor scaled_dot_product_attention, the attention is written
out for it).  The benchmark is the default, --device cuda.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# (bench/ on the path: tests/torch/parity.py loads this file as a module)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokens import read_tokens  # noqa: E402


def sdpa(q, k, v):
    """Causal attention: SDPA (the Flash or cuDNN kernels on the GPU)."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    # PyTorch < 2.0 (the CPU smoke test only)
    T = q.shape[-2]
    s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return s.softmax(-1).to(v.dtype) @ v


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(dim)
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.c_proj = nn.Linear(dim, dim)
        self.ln_2 = nn.LayerNorm(dim)
        self.c_fc = nn.Linear(dim, 4 * dim)
        self.mlp_proj = nn.Linear(4 * dim, dim)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        y = sdpa(q, k, v)
        x = x + self.c_proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, vocab=50257, layers=12, heads=12, dim=768, seq=1024):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(seq, dim)
        self.h = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        for n, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * layers) if n.endswith("c_proj.weight") or n.endswith("mlp_proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif n.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, tokens, targets):
        T = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(T, device=tokens.device))
        for b in self.h:
            x = b(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)          # tied lm_head
        # (targets is a slice of the batch, not contiguous: reshape, not view)
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))


def read_batches(path, n, rows, cols, vocab):
    """n batches of rows x cols tokens from a token file (tokens.py), in
    order, the file read round again if it is short."""
    tok = read_tokens(path, n * rows * cols)
    if max(tok) >= vocab:
        sys.exit(f"gpt2_torch: {path}: a token past the vocabulary's {vocab}")
    t = torch.tensor([tok[i % len(tok)] for i in range(n * rows * cols)], dtype=torch.long)
    return list(t.view(n, rows, cols))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["eager", "compile"], default="eager")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--vocab", type=int, default=50257, help="embedding rows (50304: padded by hand, as nanoGPT; the extra rows enter the softmax, so the loss is not 50257's)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--peak", type=float, default=989e12, help="peak FLOP/s for MFU")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: the smoke test (small sizes), not a benchmark")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--data", help="a token file (llm.c's .bin format): the batches from it, not random tokens")
    a = ap.parse_args()
    torch.manual_seed(1337)
    dev = a.device
    gpu = dev == "cuda"
    if a.mode == "compile" and not hasattr(torch, "compile"):
        sys.exit(f"torch {torch.__version__} has no torch.compile")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    model = GPT2(vocab=a.vocab, layers=a.layers, heads=a.heads, dim=a.dim, seq=a.seq).to(dev)
    nparams = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    nodecay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": nodecay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8, **({"fused": True} if gpu else {}))
    step_fn = model
    if a.mode == "compile":
        step_fn = torch.compile(model)
    g = torch.Generator(device="cpu").manual_seed(0)
    if a.data:
        data = read_batches(a.data, 4, a.batch, a.seq + 1, min(a.vocab, 50257))
    else:
        data = [torch.randint(0, min(a.vocab, 50257), (a.batch, a.seq + 1), generator=g) for _ in range(4)]
    if gpu:
        torch.cuda.reset_peak_memory_stats()

    def sync():
        if gpu:
            torch.cuda.synchronize()

    def step(i):
        d = data[i % len(data)].to(dev, non_blocking=True)
        with torch.autocast(dev, dtype=torch.bfloat16):
            loss = step_fn(d[:, :-1], d[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    # (each warm-up step's end said on stderr: a run killed by its time
    # limit shows how far it got, torch.compile's first step the longest)
    t0 = time.time()
    for i in range(a.warmup):
        step(i)
        sync()
        print(f"gpt2_torch: warm-up step {i + 1} of {a.warmup} done at {time.time() - t0:.1f} s", file=sys.stderr, flush=True)
    warm_s = time.time() - t0
    times, losses = [], []
    for i in range(a.steps):
        if gpu:
            ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            ev0.record()
        t1 = time.perf_counter()
        loss = step(i)
        if gpu:
            ev1.record()
        sync()
        times.append(ev0.elapsed_time(ev1) / 1e3 if gpu else time.perf_counter() - t1)
        losses.append(loss.item())
    times.sort()
    med = times[len(times) // 2]
    tokens = a.batch * a.seq
    # 6 N per token for the matrices, plus attention: 6 * layers * T * dim per
    # token (QK^T and PV, forward and backward, causal: half).  tests/gpu/run.sh
    # recomputes the MFU of both sides from tokens/s with one N.
    flops = 6 * nparams * tokens + 6 * a.layers * a.seq * a.dim * tokens
    graph_breaks = None
    if a.mode == "compile":
        try:
            graph_breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
        except Exception:
            pass
    res = {
        "impl": "pytorch-" + a.mode + ("" if a.vocab == 50257 else f"-v{a.vocab}"), "vocab": a.vocab, "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if gpu else "cpu", "batch": a.batch, "seq": a.seq, "params": nparams,
        "precision": "bf16 autocast", "step_ms": med * 1e3, "tokens_per_s": tokens / med, "mfu": flops / med / a.peak,
        "peak_mem_bytes": torch.cuda.max_memory_allocated() if gpu else None,
        "reserved_mem_bytes": torch.cuda.max_memory_reserved() if gpu else None, "graph_breaks": graph_breaks,
        "warmup_s": warm_s, "last_loss": losses[-1], "data": a.data or "random",
    }
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
