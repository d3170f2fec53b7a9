#!/usr/bin/env python3
"""bench/gpt2_cpu_torch.py — the PyTorch reference for bench/cpu.sh.

The same GPT-2 as examples/gpt2.model (pre-LN blocks, LayerNorm with bias,
fused qkv, causal attention, GELU-tanh MLP, tied lm_head, learned position
embeddings), in plain PyTorch eager, fp32 (with --bf16: the forward under
bf16 autocast, fp32 weights), AdamW (same hyper-parameters as the compiled
run), trained on the same token file.  Prints one JSON line:
{"ms_per_step": median, "steps": N, "threads": T, "final_loss": ...}.

Usage: gpt2_cpu_torch.py TOKENS.bin --vocab V --layers L --heads H --dim C
       --seq T --batch B --steps N --warmup-steps W --threads K [--bf16]
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from tokens import read_tokens


class Block(nn.Module):
    def __init__(self, dim, heads, layers):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(dim, eps=1e-5)
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.c_proj = nn.Linear(dim, dim)
        self.ln_2 = nn.LayerNorm(dim, eps=1e-5)
        self.c_fc = nn.Linear(dim, 4 * dim)
        self.mlp_proj = nn.Linear(4 * dim, dim)
        for lin in (self.c_attn, self.c_fc):
            nn.init.normal_(lin.weight, std=0.02)
            nn.init.zeros_(lin.bias)
        for lin in (self.c_proj, self.mlp_proj):
            nn.init.normal_(lin.weight, std=0.02 / math.sqrt(2 * layers))
            nn.init.zeros_(lin.bias)

    def attn(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # torch < 2.0
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            mask = torch.ones(T, T, dtype=torch.bool).tril()
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = att @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, vocab, layers, heads, dim, seq):
        super().__init__()
        self.wte = nn.Parameter(torch.randn(vocab, dim) * 0.02)
        self.wpe = nn.Parameter(torch.randn(seq, dim) * 0.02)
        self.h = nn.ModuleList(Block(dim, heads, layers) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim, eps=1e-5)

    def forward(self, tokens, targets):
        T = tokens.size(1)
        x = F.embedding(tokens, self.wte) + self.wpe[:T]
        for b in self.h:
            x = b(x)
        logits = F.linear(self.ln_f(x), self.wte)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("tokens")
    for k, d in [("vocab", 256), ("layers", 2), ("heads", 4), ("dim", 64), ("seq", 64), ("batch", 4),
                 ("steps", 30), ("warmup_steps", 5), ("threads", 2)]:
        p.add_argument("--" + k.replace("_", "-"), type=int, default=d)
    p.add_argument("--lr", type=float, default=6e-4)
    p.add_argument("--bf16", action="store_true", help="the forward under torch.autocast('cpu', torch.bfloat16)")
    a = p.parse_args()
    torch.manual_seed(1337)
    torch.set_num_threads(a.threads)
    data = torch.frombuffer(read_tokens(a.tokens), dtype=torch.int16).to(torch.int64) & 0xFFFF
    model = GPT2(a.vocab, a.layers, a.heads, a.dim, a.seq)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator().manual_seed(1)
    times, loss = [], float("nan")
    for step in range(a.warmup_steps + a.steps):
        ix = torch.randint(0, len(data) - a.seq - 1, (a.batch,), generator=gen)
        x = torch.stack([data[i:i + a.seq] for i in ix])
        y = torch.stack([data[i + 1:i + 1 + a.seq] for i in ix])
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        dt = time.perf_counter() - t0
        if step >= a.warmup_steps:
            times.append(dt * 1000)
    print(json.dumps({"ms_per_step": statistics.median(times), "steps": a.steps, "threads": a.threads,
                      "final_loss": float(loss), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
