#!/usr/bin/env python3
"""tools/hf_to_trainc.py — a Hugging Face checkpoint as trainc's parameters.

    hf_to_trainc.py --arch gpt2|llama IN.safetensors [IN2.safetensors ...] -o OUT.safetensors
    hf_to_trainc.py --arch gpt2|llama --to-hf CKPT.safetensors -o model.safetensors

Reads the safetensors file(s) of a Hugging Face GPT2LMHeadModel / GPT2Model
or LlamaForCausalLM (a sharded checkpoint: every shard) and writes one
safetensors file whose tensors have the names and layouts of
examples/gpt2.model or examples/llama.model, for
`--init OUT.safetensors` (docs/runtime.md):

- gpt2: `transformer.` dropped; `wte.weight` and `wpe.weight` become `wte`
  and `wpe`; the Conv1D weights (`attn.c_attn`, `attn.c_proj`, `mlp.c_fc`,
  `mlp.c_proj`), stored [in, out], are transposed to a linear layer's
  [out, in]; `lm_head.weight` (the tied wte) and the attention mask buffers
  (`attn.bias`, `attn.masked_bias`) are left out;
- llama: `model.` dropped (`embed_tokens.weight` becomes `embed_tokens`);
  `rotary_emb.inv_freq` buffers are left out; with tied embeddings (no
  `lm_head.weight` in the files) the head starts as a copy of the table.
  Hugging Face's q_proj and k_proj are already in the rotate-half order
  trainc's rope uses (tests/torch/parity.sh checks that convention).

--to-hf goes the other way: the parameters of a trainc checkpoint (its
states, named by the checkpoint's "params" metadata or by their adamw.,
sgd., amp. and grad_acc. prefixes, left out) with Hugging Face's names and
layouts (GPT2LMHeadModel: "transformer." names, Conv1D weights [in, out],
lm_head.weight the tied wte; LlamaForCausalLM: "model." names), so a model
trained by trainc loads with from_pretrained (with its config.json).

Data keep their dtype (F32, F16, BF16: --init converts).  A tensor the
mapping does not know is an error, listed with the others, and nothing is
written.  Needs numpy.  The file is written to OUT.tmp and renamed.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def read(path):
    """{name: (dtype, shape, raw bytes)} of a safetensors file."""
    with open(path, "rb") as f:
        b = f.read()
    if len(b) < 8:
        sys.exit(f"{path}: not a safetensors file ({len(b)} bytes)")
    n = struct.unpack("<Q", b[:8])[0]
    if n > len(b) - 8:
        sys.exit(f"{path}: not a safetensors file (header length {n})")
    head = json.loads(b[8:8 + n])
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        lo, hi = v["data_offsets"]
        out[k] = (v["dtype"], list(v["shape"]), b[8 + n + lo:8 + n + hi])
    return out


def transpose(t):
    """[in, out] -> [out, in], any element size."""
    dt, shape, raw = t
    if len(shape) != 2:
        raise ValueError(f"expected a matrix, got shape {shape}")
    a = np.frombuffer(raw, dtype=np.dtype(f"V{SIZES[dt]}")).reshape(shape)
    return dt, [shape[1], shape[0]], np.ascontiguousarray(a.T).tobytes()


def gpt2(src):
    out, bad = {}, []
    for k, t in src.items():
        n = k[len("transformer."):] if k.startswith("transformer.") else k
        if n == "lm_head.weight" or n.endswith((".attn.bias", ".attn.masked_bias")):
            continue
        if n in ("wte.weight", "wpe.weight"):
            out[n[:-len(".weight")]] = t
        elif n.startswith("h.") and n.endswith(CONV1D):
            out[n] = transpose(t)
        elif n.startswith(("h.", "ln_f.")):
            out[n] = t
        else:
            bad.append(k)
    return out, bad


def llama(src):
    out, bad = {}, []
    for k, t in src.items():
        n = k[len("model."):] if k.startswith("model.") else k
        if n.endswith(".rotary_emb.inv_freq"):
            continue
        if n == "embed_tokens.weight":
            out["embed_tokens"] = t
        elif n.startswith("layers.") or n in ("norm.weight", "lm_head.weight"):
            out[n] = t
        else:
            bad.append(k)
    if "lm_head.weight" not in out and "embed_tokens" in out:
        print("hf_to_trainc: note: no lm_head.weight (tied embeddings): the head starts as a copy of embed_tokens", file=sys.stderr)
        out["lm_head.weight"] = out["embed_tokens"]
    return out, bad


def gpt2_to_hf(src):
    out = {}
    for n, t in src.items():
        if n in ("wte", "wpe"):
            out[f"transformer.{n}.weight"] = t
        elif n.startswith("h.") and n.endswith(CONV1D):
            out["transformer." + n] = transpose(t)
        else:
            out["transformer." + n] = t
    if "transformer.wte.weight" in out:
        out["lm_head.weight"] = out["transformer.wte.weight"]
    return out


def llama_to_hf(src):
    out = {}
    for n, t in src.items():
        if n == "embed_tokens":
            out["model.embed_tokens.weight"] = t
        elif n == "lm_head.weight":
            out[n] = t
        else:
            out["model." + n] = t
    return out


def trainc_params(path):
    """The parameters of a trainc checkpoint: the tensors its "params"
    metadata names, else those without a state's prefix."""
    with open(path, "rb") as f:
        b = f.read(8)
        head = json.loads(f.read(struct.unpack("<Q", b)[0]))
    names = head.get("__metadata__", {}).get("params")
    keep = set(names.split(",")) if names else None
    states = ("adamw.", "sgd.", "amp.", "grad_acc.")
    return {k: t for k, t in read(path).items() if (k in keep if keep is not None else not k.startswith(states))}


def write(path, tensors):
    names = sorted(tensors)
    head, off = {"__metadata__": {"format": "pt", "source": "tools/hf_to_trainc.py"}}, 0
    for k in names:
        dt, shape, raw = tensors[k]
        head[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    h = json.dumps(head, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for k in names:
            f.write(tensors[k][2])
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description="a Hugging Face GPT-2 or Llama checkpoint as trainc's parameters (for --init)")
    ap.add_argument("--arch", choices=["gpt2", "llama"], required=True)
    ap.add_argument("--to-hf", action="store_true", help="from a trainc checkpoint to Hugging Face's names and layouts")
    ap.add_argument("inputs", nargs="+", help="the model's safetensors file(s)")
    ap.add_argument("-o", dest="out", required=True)
    a = ap.parse_args()
    if a.to_hf:
        if len(a.inputs) != 1:
            sys.exit("hf_to_trainc: error: --to-hf takes one trainc checkpoint")
        try:
            out = (gpt2_to_hf if a.arch == "gpt2" else llama_to_hf)(trainc_params(a.inputs[0]))
        except ValueError as e:
            sys.exit(f"hf_to_trainc: error: {e}")
        write(a.out, out)
        print(f"hf_to_trainc: {len(out)} tensors written to {a.out}", file=sys.stderr)
        return
    src = {}
    for p in a.inputs:
        for k, t in read(p).items():
            if k in src:
                sys.exit(f"hf_to_trainc: error: tensor '{k}' is in two input files")
            if t[0] not in SIZES:
                sys.exit(f"hf_to_trainc: error: {p}: tensor '{k}' has dtype {t[0]}")
            src[k] = t
    try:
        out, bad = (gpt2 if a.arch == "gpt2" else llama)(src)
    except ValueError as e:
        sys.exit(f"hf_to_trainc: error: {e}")
    if bad:
        sys.exit(f"hf_to_trainc: error: {len(bad)} tensor(s) not of a {a.arch} model: " + ", ".join(sorted(bad)[:10]) + (" ..." if len(bad) > 10 else ""))
    write(a.out, out)
    print(f"hf_to_trainc: {len(out)} tensors written to {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
