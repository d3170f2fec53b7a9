#!/usr/bin/env python3
"""tests/torch/hf_import.py — tools/hf_to_trainc.py against Hugging Face's layouts.

    hf_import.py make gpt2|llama DIR --heads H [--kv-heads K] --vocab V --layers L --dim C [--ffn F] --seq T [--untied]
        writes DIR/hf.safetensors: random weights named and laid out as
        Hugging Face stores them (GPT2LMHeadModel: "transformer." names,
        Conv1D weights [in, out], the tied lm_head (--untied: a head of
        its own) and the attention mask buffers; LlamaForCausalLM:
        "model." names, bf16, rotary inv_freq buffers), and
        DIR/control.safetensors later (below)
    hf_import.py check gpt2|llama DIR --heads H [--kv-heads K] --batch B --seq T [--hf F] [--metrics M]
        the loss of micro-batch 0 (sequential order of DIR/tok_train.bin)
        computed from DIR/hf.safetensors (--hf) with Hugging Face's layout
        (a Conv1D is x W + b) against the first loss trainc logged
        (DIR/metrics.jsonl, --metrics) after `--init` of the converted
        file; exits 1 beyond 1e-5 relative
    hf_import.py back DIR
        DIR/back.safetensors (tools/hf_to_trainc.py --to-hf of a checkpoint
        trainc saved) against DIR/hf.safetensors: the same tensors, bit for
        bit, but for the mask buffers (GPT-2)
    hf_import.py control DIR
        DIR/control.safetensors: the converted file with one square Conv1D
        weight (h.0.attn.c_proj) left as Hugging Face stores it, which must
        not give the loss
    hf_import.py refuse DIR [--tool FILE]
        in DIR/refuse: tools/hf_to_trainc.py (or FILE) on the inputs, -o
        paths, heads, --to-hf names, LoRA adapters and configs it must
        refuse (one line "hf_to_trainc: error: ..." naming the file, exit
        1, nothing written, no temporary file) or handle (a symbolic link,
        another hard link, merged adapters, the -D lines); exits 1 when a
        case fails (tests/torch/hf_tool.sh)
"""
import argparse
import json
import math
import os
import resource
import stat
import struct
import subprocess
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


def make(a, out="hf.safetensors"):
    rng = np.random.default_rng(7)
    f32 = lambda *s, std=0.02: rng.normal(0.0, std, s).astype(np.float32)
    T = {}
    put = lambda k, x: T.__setitem__(k, ("F32", x.shape, x.tobytes()))
    C, V, L = a.dim, a.vocab, a.layers
    if a.model == "gpt2":
        wte = f32(V, C)
        put("transformer.wte.weight", wte)
        # tied: saved by Hugging Face too (--untied: a head of its own, which
        # examples/gpt2.model cannot hold: the conversion must refuse it)
        put("lm_head.weight", f32(V, C) if getattr(a, "untied", False) else wte)
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
    parity.st.write(os.path.join(a.dir, out), T)


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


def st_file(path, head, data=b"", raw_head=None):
    """A safetensors file of a header (a JSON value, or raw_head's bytes as
    they are) and data: what no writer would make, for the tool to refuse."""
    h = raw_head if raw_head is not None else json.dumps(head).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def refuse(a):
    """tools/hf_to_trainc.py (or --tool's) on bad inputs, bad -o paths, an
    untied head, names --to-hf does not know, LoRA adapters and --config:
    each error one line "hf_to_trainc: error: ..." naming the file, exit 1,
    no traceback, no output and no temporary file left; the outputs that
    must be written are checked for their bytes, mode and links."""
    d = os.path.abspath(os.path.join(a.dir, "refuse"))
    os.makedirs(d, exist_ok=True)
    os.chdir(d)
    for f in os.listdir("."):
        if os.path.isdir(f) and not os.path.islink(f):
            os.rmdir(f)
        else:
            os.remove(f)
    tool = os.path.abspath(a.tool or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "hf_to_trainc.py"))
    size = argparse.Namespace(model="gpt2", dir=d, vocab=64, layers=1, heads=2, dim=16, seq=8)
    make(size, "hf.safetensors")
    make(argparse.Namespace(**vars(size), untied=True), "untied.safetensors")
    make(argparse.Namespace(**{**vars(size), "model": "llama", "kv_heads": 1, "ffn": 32}), "llama.safetensors")
    fails = []

    def run(args, limit=None):
        pre = (lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))) if limit else None
        return subprocess.run([sys.executable, tool] + args, capture_output=True, text=True, preexec_fn=pre)

    def leftovers():
        return sorted(f for f in os.listdir(".") if f.endswith(".tmp"))

    def bad(name, args, want, out="out.safetensors", limit=None):
        """args must fail: exit 1, one line naming each of want, nothing written."""
        if out and os.path.lexists(out) and out != "dir":
            os.remove(out)
        r = run(args, limit)
        err = r.stderr.strip()
        why = []
        if r.returncode != 1:
            why.append(f"exit {r.returncode}")
        if not err.startswith("hf_to_trainc: error: ") or "\n" in err:
            why.append("not one line 'hf_to_trainc: error: ...'")
        why += [f"no '{w}'" for w in want if w not in err]
        if out and out != "dir" and os.path.lexists(out):
            why.append(f"{out} written")
        if leftovers():
            why.append("left " + ", ".join(leftovers()))
            for f in leftovers():
                os.remove(f)
        print(f"{'FAIL' if why else 'ok'}: {name}: " + ("; ".join(why) + ": " if why else "") + (err.splitlines() or ["(nothing)"])[-1])
        if why:
            fails.append(name)

    def good(name, args, check):
        """args must succeed, and check() (a list of what is wrong) find nothing."""
        r = run(args)
        why = ([f"exit {r.returncode}: " + (r.stderr.strip().splitlines() or [""])[-1]] if r.returncode else []) or check(r)
        print(f"{'FAIL' if why else 'ok'}: {name}" + (": " + "; ".join(why) if why else ""))
        if why:
            fails.append(name)

    conv = lambda i, o="out.safetensors", *x: ["--arch", "gpt2", i, "-o", o, *x]
    hf = open("hf.safetensors", "rb").read()
    n = struct.unpack("<Q", hf[:8])[0]
    head = json.loads(hf[8:8 + n])
    # 1: the tensors against the file
    lo, hi = head["transformer.h.0.mlp.c_fc.weight"]["data_offsets"]
    open("cut.safetensors", "wb").write(hf[:8 + n + (lo + hi) // 2 + 2])   # cut inside a Conv1D weight
    bad("a file cut inside a Conv1D weight", conv("cut.safetensors"), ["cut.safetensors", "transformer.h.0.mlp.c_fc.weight", "cut short"])
    st_file("size.safetensors", {"transformer.h.0.attn.c_proj.weight": {"dtype": "F32", "shape": [16, 16], "data_offsets": [0, 1000]}}, bytes(1000))
    bad("a tensor's bytes not its shape's", conv("size.safetensors"), ["size.safetensors", "'transformer.h.0.attn.c_proj.weight'", "1024"])
    st_file("overlap.safetensors", {"transformer.wte.weight": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                                    "transformer.wpe.weight": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, bytes(16))
    bad("two tensors on the same bytes", conv("overlap.safetensors"), ["overlap.safetensors", "overlap"])
    open("tail.safetensors", "wb").write(hf + bytes(8))
    bad("bytes after the last tensor", conv("tail.safetensors"), ["tail.safetensors", "after the last tensor"])
    # 2: headers
    st_file("notjson.safetensors", None, raw_head=b"{not json")
    bad("a header not JSON", conv("notjson.safetensors"), ["notjson.safetensors", "not JSON"])
    st_file("list.safetensors", [])
    bad("a header a JSON list", conv("list.safetensors"), ["list.safetensors", "list"])
    st_file("nooff.safetensors", {"wte": {"dtype": "F32", "shape": [1]}}, bytes(4))
    bad("a tensor without data_offsets", conv("nooff.safetensors"), ["nooff.safetensors", "'wte'", "data_offsets"])
    st_file("utf.safetensors", None, raw_head=b'{"wte\xff": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}')
    bad("a header not UTF-8", conv("utf.safetensors"), ["utf.safetensors", "UTF-8"])
    st_file("dup.safetensors", None, b"\0" * 8, raw_head=b'{"wte": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
                                                       b'"wte": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}')
    bad("a name twice", conv("dup.safetensors"), ["dup.safetensors", "'wte'", "twice"])
    bad("no such input", conv("missing.safetensors"), ["missing.safetensors", "No such file"])
    os.mkdir("folder.safetensors")
    bad("a folder as input", conv("folder.safetensors"), ["folder.safetensors"])
    open("empty.safetensors", "wb").close()
    bad("an empty file", conv("empty.safetensors"), ["empty.safetensors", "0 bytes"])
    torch.save({"transformer.wte.weight": torch.zeros(4, 4)}, "pytorch_model.bin")
    bad("a PyTorch pickle", conv("pytorch_model.bin"), ["pytorch_model.bin", "pickle", "safetensors"])
    # 3: the output path
    os.mkdir("dir")
    bad("-o a folder", conv("hf.safetensors", "dir"), ["dir", "folder"], out="dir")
    bad("-o ''", conv("hf.safetensors", ""), ["-o"], out=None)
    bad("-o in a folder that does not exist", conv("hf.safetensors", "nowhere/out.safetensors"), ["nowhere"], out=None)
    bad("-o over ulimit -f", conv("hf.safetensors"), ["out.safetensors", "too large"], limit=4096)
    # -o an input (its hard link too, which is written in place): refused,
    # the input as it was (it is mapped while the output is written)
    open("in2.safetensors", "wb").write(hf)
    os.link("in2.safetensors", "in2link.safetensors")
    bad("-o the input", conv("in2.safetensors", "in2.safetensors"), ["in2.safetensors", "is the input"], out=None)
    bad("-o a hard link of the input", conv("in2.safetensors", "in2link.safetensors"), ["in2link.safetensors", "is the input"], out=None)
    if open("in2.safetensors", "rb").read() != hf:
        print("FAIL: -o the input: the input changed")
        fails.append("-o the input: the input changed")
    ok_ref = run(conv("hf.safetensors", "ref.safetensors"))
    ref = open("ref.safetensors", "rb").read() if ok_ref.returncode == 0 else None
    same = lambda f: [] if ref is not None and open(f, "rb").read() == ref else [f"{f} is not the conversion"]
    open("target.safetensors", "wb").write(b"old")
    os.chmod("target.safetensors", 0o640)
    os.symlink("target.safetensors", "link.safetensors")
    good("-o a symbolic link: written through to its target, keeping its mode", conv("hf.safetensors", "link.safetensors"),
         lambda r: same("target.safetensors") + ([] if os.path.islink("link.safetensors") else ["the link replaced by a file"]) +
         ([] if stat.S_IMODE(os.stat("target.safetensors").st_mode) == 0o640 else ["the mode not kept"]))
    open("hard.safetensors", "wb").write(b"old")
    os.link("hard.safetensors", "hard2.safetensors")
    good("-o a file with another hard link: written in place", conv("hf.safetensors", "hard.safetensors"),
         lambda r: same("hard2.safetensors"))
    # 4: an untied head
    bad("an untied lm_head", conv("untied.safetensors"), ["untied.safetensors", "lm_head.weight", "untied", "ties"])
    # names examples/*.model does not have under a known prefix (a bias on
    # Llama's q_proj, a GPT-2 attention weight of another name)
    st_file("qbias.safetensors", {"model.layers.0.self_attn.q_proj.bias": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, bytes(16))
    bad("a Llama name the model lacks", ["--arch", "llama", "qbias.safetensors", "-o", "out.safetensors"],
        ["qbias.safetensors", "model.layers.0.self_attn.q_proj.bias", "not of a llama model"])
    st_file("gname.safetensors", {"transformer.h.0.attn.q.weight": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, bytes(16))
    bad("a GPT-2 name the model lacks", conv("gname.safetensors"), ["gname.safetensors", "transformer.h.0.attn.q.weight", "not of a gpt2 model"])
    # a parameter of examples/gpt2.model no input holds (a shard not given), by the input's name
    lack = parity.st.read("hf.safetensors")
    del lack["transformer.h.0.ln_2.bias"]
    parity.st.write("lack.safetensors", lack)
    bad("a parameter missing", conv("lack.safetensors"), ["lack.safetensors", "1 tensor(s) of examples/gpt2.model missing: transformer.h.0.ln_2.bias"])
    # 5 and 7: --to-hf of what is not a trainc checkpoint, or the wrong --arch
    to_hf = lambda arch, i, *x: ["--arch", arch, "--to-hf", i, "-o", "out.safetensors", *x]
    bad("--to-hf of a Hugging Face file", to_hf("gpt2", "hf.safetensors"), ["hf.safetensors", "transformer.h.0.attn.c_attn.weight", "not of examples/gpt2.model"])
    bad("--to-hf --arch llama of a GPT-2", to_hf("llama", "ref.safetensors"), ["ref.safetensors", "h.0.attn.c_attn.weight", "not of examples/llama.model"])
    bad("--to-hf of an empty file", to_hf("gpt2", "empty.safetensors"), ["empty.safetensors", "0 bytes"])
    bad("--to-hf of a PyTorch pickle", to_hf("gpt2", "pytorch_model.bin"), ["pytorch_model.bin", "pickle"])
    open("huge.safetensors", "wb").write(b"\xff" * 16)
    bad("--to-hf of a file with a header length past its end", to_hf("gpt2", "huge.safetensors"), ["huge.safetensors", "header length"])
    # 6: LoRA adapters merged: W + (alpha/r) B A, then Conv1D's [in, out]
    t = parity.st.read("ref.safetensors")
    rng = np.random.default_rng(3)
    A, B = rng.normal(0, 0.3, (4, 16)).astype(np.float32), rng.normal(0, 0.3, (48, 4)).astype(np.float32)
    t["h.0.attn.c_attn.lora_A.weight"] = ("F32", [4, 16], A.tobytes())
    t["h.0.attn.c_attn.lora_B.weight"] = ("F32", [48, 4], B.tobytes())
    parity.st.write("lora.safetensors", t)
    bad("--to-hf of a LoRA model without --lora-alpha", to_hf("gpt2", "lora.safetensors"), ["lora.safetensors", "--lora-alpha"])
    W = np.frombuffer(t["h.0.attn.c_attn.weight"][2], "<f4").astype(np.float64).reshape(48, 16)
    want = (W + 8 / 4 * (B.astype(np.float64) @ A.astype(np.float64))).astype(np.float32).T.copy()

    def merged(r):
        got = read_st("out.safetensors")
        k = "transformer.h.0.attn.c_attn.weight"
        return ([] if k in got and got[k][3] == want.tobytes() else [f"{k} is not (W + alpha/r B A)^T"]) + \
               [f"{x} written" for x in got if "lora" in x]
    good("--to-hf of a LoRA model: the adapters merged", to_hf("gpt2", "lora.safetensors", "--lora-alpha", "8"), merged)
    # 8: --config
    cfg = lambda name, **kv: json.dump(kv, open(name, "w")) or name
    g2 = dict(model_type="gpt2", vocab_size=64, n_layer=1, n_head=2, n_embd=16, n_positions=8, layer_norm_epsilon=1e-5,
              activation_function="gelu_new", tie_word_embeddings=True)
    line = lambda want: lambda r: [] if r.stdout.strip() == want else [f"printed {r.stdout.strip()!r}, not {want!r}"]
    good("--config: GPT-2's -D line", conv("hf.safetensors", "out.safetensors", "--config", cfg("g.json", **g2)),
         line("-D vocab=64 -D layers=1 -D heads=2 -D dim=16 -D seq=8"))
    for k, v, w in (("layer_norm_epsilon", 1e-6, "layer_norm_epsilon"), ("activation_function", "relu", "activation_function"),
                    ("tie_word_embeddings", False, "tie_word_embeddings"), ("n_positions", 16, "n_positions"),
                    ("model_type", "llama", "model_type")):
        bad(f"--config: GPT-2 with {k} {v}", conv("hf.safetensors", "out.safetensors", "--config", cfg("b.json", **{**g2, k: v})), ["b.json", w])
    l2 = dict(model_type="llama", vocab_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, hidden_size=16,
              intermediate_size=32, max_position_embeddings=8, rms_norm_eps=1e-6, rope_theta=500000.0, hidden_act="silu")
    good("--config: Llama's -D line (rms_norm_eps as eps)", ["--arch", "llama", "llama.safetensors", "-o", "out.safetensors", "--config", cfg("l.json", **l2)],
         line("-D vocab=64 -D layers=1 -D heads=2 -D kv_heads=1 -D dim=16 -D ffn=32 -D seq=8 -D eps=1e-06 -D theta=500000.0"))
    good("--config: Llama with rope_scaling of rope_type default (no scaling)",
         ["--arch", "llama", "llama.safetensors", "-o", "out.safetensors", "--config", cfg("l.json", **{**l2, "rope_scaling": {"rope_type": "default"}})],
         line("-D vocab=64 -D layers=1 -D heads=2 -D kv_heads=1 -D dim=16 -D ffn=32 -D seq=8 -D eps=1e-06 -D theta=500000.0"))
    l3 = {k: v for k, v in l2.items() if k != "rope_theta"}
    good("--config: Llama with rope_parameters (rope_theta there)",
         ["--arch", "llama", "llama.safetensors", "-o", "out.safetensors", "--config",
          cfg("l.json", **{**l3, "rope_parameters": {"rope_type": "default", "rope_theta": 250000.0}})],
         line("-D vocab=64 -D layers=1 -D heads=2 -D kv_heads=1 -D dim=16 -D ffn=32 -D seq=8 -D eps=1e-06 -D theta=250000.0"))
    for k, v in (("rope_scaling", {"rope_type": "linear", "factor": 2.0}), ("rope_scaling", {"type": "dynamic", "factor": 2.0}),
                 ("rope_parameters", {"rope_type": "llama3", "factor": 8.0, "rope_theta": 500000.0})):
        bad(f"--config: Llama with {k} {v}", ["--arch", "llama", "llama.safetensors", "-o", "out.safetensors", "--config",
                                               cfg("b.json", **{**l2, k: v})], ["b.json", k, "no scaling"])
    bad("--config: Llama with intermediate_size 64", ["--arch", "llama", "llama.safetensors", "-o", "out.safetensors", "--config",
                                                      cfg("b.json", **{**l2, "intermediate_size": 64})], ["b.json", "gate_proj"])
    print(f"{len(fails)} case(s) failed" + (": " + ", ".join(fails) if fails else ""))
    sys.exit(1 if fails else 0)


def main():
    ap = argparse.ArgumentParser(description="tools/hf_to_trainc.py against Hugging Face's layouts (tests/torch/hf_import.sh, hf_tool.sh)")
    ap.add_argument("what", choices=["make", "check", "control", "back", "refuse"])
    ap.add_argument("model", nargs="?", choices=["gpt2", "llama"])
    ap.add_argument("dir")
    for k in ("heads", "kv-heads", "vocab", "layers", "dim", "ffn", "seq", "batch"):
        ap.add_argument("--" + k, type=int, default=0)
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--untied", action="store_true", help="make gpt2: an lm_head of its own, not wte")
    ap.add_argument("--hf", default="hf.safetensors", help="check: the Hugging Face file in DIR")
    ap.add_argument("--metrics", default="metrics.jsonl", help="check: trainc's metrics in DIR")
    ap.add_argument("--tool", help="refuse: the converter to test (default tools/hf_to_trainc.py)")
    a = ap.parse_args()
    if a.what == "make":
        make(a)
        return
    if a.what == "refuse":
        refuse(a)
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
    t = read_st(os.path.join(a.dir, a.hf))
    tok = parity.load_tokens(os.path.join(a.dir, "tok_train.bin"))
    x, y = parity.batch(tok, a.batch, a.seq, 0)
    ref = hf_gpt2_loss(t, x, y, a.heads) if a.model == "gpt2" else hf_llama_loss(t, x, y, a.heads, a.kv_heads or a.heads)
    rows = [json.loads(l) for l in open(os.path.join(a.dir, a.metrics)) if '"loss"' in l]
    got = rows[0]["loss"]
    e = abs(got - ref) / abs(ref)
    print(f"{a.model}: Hugging Face's layout ({a.hf}) {ref:.8f}, trainc ({a.metrics}) {got:.8f}: {e:.1e}")
    sys.exit(1 if e > a.tol or not math.isfinite(got) else 0)


if __name__ == "__main__":
    main()
