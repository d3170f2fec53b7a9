#!/usr/bin/env python3
"""tools/hf_to_trainc.py — a Hugging Face checkpoint as trainc's parameters.

    hf_to_trainc.py --arch gpt2|llama IN.safetensors [IN2.safetensors ...] -o OUT.safetensors [--config config.json]
    hf_to_trainc.py --arch gpt2|llama --to-hf CKPT.safetensors -o model.safetensors [--lora-alpha A] [--config config.json]

Reads the safetensors file(s) of a Hugging Face GPT2LMHeadModel / GPT2Model
or LlamaForCausalLM (a sharded checkpoint: every shard) and writes one
safetensors file whose tensors have the names and layouts of
examples/gpt2.model or examples/llama.model, for
`--init OUT.safetensors` (docs/runtime.md):

- gpt2: `transformer.` dropped; `wte.weight` and `wpe.weight` become `wte`
  and `wpe`; the Conv1D weights (`attn.c_attn`, `attn.c_proj`, `mlp.c_fc`,
  `mlp.c_proj`), stored [in, out], are transposed to a linear layer's
  [out, in]; the attention mask buffers (`attn.bias`, `attn.masked_bias`)
  are left out, and so is `lm_head.weight` when it holds wte's values (the
  tied head); an untied head is an error (examples/gpt2.model ties it);
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
trained by trainc loads with from_pretrained (with its config.json).  A
LoRA model's adapters (passes/lora.c: W [out, in], A [r, in], B [out, r],
"NAME.lora_A.weight" beside "NAME.weight") are merged into their weights,
W + (alpha/r) B A, before the layout changes; r is A's rows, and alpha,
which the checkpoint does not record, is --lora-alpha (the train section's
lora_alpha; 0 there and here means alpha = r).

--config config.json (Hugging Face's) checks what the tensors cannot show:
GPT-2's layer_norm_epsilon (1e-5), activation_function (gelu_new or
gelu_pytorch_tanh), tie_word_embeddings (true) and n_inner; Llama's
hidden_act (silu), no rope_scaling (but one of rope_type "default"),
no biases; the sizes against the tensors' shapes.  It prints the `-D`
line of examples/gpt2.model or examples/llama.model on stdout (for Llama
with rms_norm_eps as eps and rope_theta, or rope_parameters' rope_theta,
as theta).  GPT-2's seq must be n_positions (wpe is [seq, dim] and
--init wants its shape); Llama's seq (max_position_embeddings) may be
made smaller, rope has no table.

Data keep their dtype (F32, F16, BF16: --init converts).  A tensor the
mapping does not know is an error, listed with the others, and nothing is
written; so is a parameter of the model that no input holds (for layers
0 to the highest one the inputs hold: a shard not given).  Every input is checked as trainc's runtime checks a safetensors
file (a JSON object as header, no duplicate names, each tensor's bytes its
dtype's size times its shape's product, the tensors back to back filling
the data exactly).  The output is written to OUT.PID.tmp beside it and
renamed (an existing file keeps its mode; a symbolic link is written
through to its target; a file with other hard links is written in place),
as the compiler's own files (out_open, ir/util.c); a failure removes the
temporary file.  Errors are one line, "hf_to_trainc: error: ...", exit
status 1.  Needs numpy.
"""
import argparse
import json
import math
import mmap
import os
import re
import stat
import struct
import sys

try:
    import numpy as np
except ImportError:
    raise SystemExit("hf_to_trainc: error: needs numpy (Debian: apt-get install python3-numpy)")

SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
# dtypes safetensors knows that trainc's --init does not load: their sizes, to check the file
OTHER_SIZES = {"U64": 8, "U32": 4, "U16": 2, "F8_E4M3": 1, "F8_E5M2": 1}
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
STATES = ("adamw.", "sgd.", "amp.", "grad_acc.")

# the parameters of examples/gpt2.model and examples/llama.model (trainc's names)
GPT2_NAMES = re.compile(r"(wte|wpe|ln_f\.(weight|bias)|h\.\d+\.(ln_1|ln_2|attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.(weight|bias))")
LLAMA_NAMES = re.compile(r"(embed_tokens|norm\.weight|lm_head\.weight|"
                         r"layers\.\d+\.(input_layernorm|post_attention_layernorm|self_attn\.[qkvo]_proj|mlp\.(gate|up|down)_proj)\.weight)")
# a LoRA adapter (passes/lora.c): "NAME.lora_A.weight" of "NAME.weight", "NAME.lora_A" of "NAME"
LORA = re.compile(r"(.*)\.lora_([AB])(\.weight)?")


def die(msg):
    """The tool's one way out on an error: one line, exit status 1 (SystemExit:
    the tests that import this file as a library see the message too)."""
    raise SystemExit(f"hf_to_trainc: error: {msg}")


def _no_dups(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError(f"the name '{k}' appears twice")
        d[k] = v
    return d


def _no_constant(c):
    raise ValueError(f"{c} is not JSON")


def _is_uint(x):
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def read_meta(path):
    """({name: (dtype, shape, raw bytes)}, {metadata}) of a safetensors file,
    every tensor checked against the file; an error names the file and the tensor.
    A regular file is mapped, not read: its tensors' bytes are views of the
    mapping (memoryviews), so a shard costs no memory until it is used."""
    try:
        with open(path, "rb") as f:
            try:
                b = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
            except (ValueError, OSError):   # empty, or not a file that maps (a pipe)
                b = f.read()
    except OSError as e:
        die(f"{path}: {e.strerror or e}")
    n = struct.unpack("<Q", bytes(b[:8]))[0] if len(b) >= 8 else None
    if n is None or n > len(b) - 8:
        # torch.save's zip or (before PyTorch 1.6) pickle: what its first bytes would be as a header length
        if bytes(b[:4]) == b"PK\x03\x04" or bytes(b[:2]) in (b"\x80\x02", b"\x80\x04", b"\x80\x05"):
            die(f"{path}: a PyTorch pickle (pytorch_model.bin?), not supported; convert it to safetensors")
        die(f"{path}: not a safetensors file (" + (f"{len(b)} bytes" if n is None else f"header length {n}, file size {len(b)}") + ")")
    try:
        text = bytes(b[8:8 + n]).decode("utf-8")
    except UnicodeDecodeError as e:
        die(f"{path}: the header is not UTF-8 (byte {e.start})")
    try:
        head = json.loads(text, object_pairs_hook=_no_dups, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        die(f"{path}: the header is not JSON ({e})")
    except ValueError as e:   # _no_dups, _no_constant
        die(f"{path}: the header: {e}")
    if not isinstance(head, dict):
        die(f"{path}: the header is a JSON {type(head).__name__}, not an object")
    meta = head.pop("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        die(f"{path}: __metadata__ is not an object of strings")
    data = len(b) - 8 - n
    spans, out = [], {}
    for k, v in head.items():
        where = f"{path}: tensor '{k}'"
        if not isinstance(v, dict):
            die(f"{where}: not an object")
        for key in ("dtype", "shape", "data_offsets"):
            if key not in v:
                die(f"{where}: no {key}")
        dt, shape, offs = v["dtype"], v["shape"], v["data_offsets"]
        size = SIZES.get(dt) or OTHER_SIZES.get(dt) if isinstance(dt, str) else None
        if not size:
            die(f"{where}: dtype {dt!r}, not a safetensors dtype")
        if not isinstance(shape, list) or not all(_is_uint(d) for d in shape):
            die(f"{where}: shape {shape!r}, not a list of sizes")
        if not isinstance(offs, list) or len(offs) != 2 or not all(_is_uint(o) for o in offs) or offs[0] > offs[1]:
            die(f"{where}: data_offsets {offs!r}, not [begin, end]")
        want = size * math.prod(shape)
        if offs[1] - offs[0] != want:
            die(f"{where}: data_offsets {offs} hold {offs[1] - offs[0]} bytes, but {dt} {shape} is {want}")
        if offs[1] > data:
            die(f"{where}: data_offsets {offs} end past the data's {data} bytes (the file is cut short?)")
        spans.append((offs[0], offs[1], k))
        out[k] = (dt, list(shape), b[8 + n + offs[0]:8 + n + offs[1]])
    pos = 0
    for lo, hi, k in sorted(spans):
        if lo != pos:
            die(f"{path}: tensor '{k}': data_offsets [{lo}, {hi}] " +
                ("overlap the tensor before" if lo < pos else f"leave a gap after byte {pos}"))
        pos = hi
    if pos != data:
        die(f"{path}: {data - pos} bytes after the last tensor's data")
    return out, meta


def read(path):
    """{name: (dtype, shape, raw bytes)} of a safetensors file (checked: read_meta)."""
    return read_meta(path)[0]


def to_f64(t):
    """A float tensor's values as a float64 array of its shape."""
    dt, shape, raw = t
    if dt == "BF16":
        a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
    elif dt in ("F16", "F32", "F64"):
        a = np.frombuffer(raw, {"F16": "<f2", "F32": "<f4", "F64": "<f8"}[dt])
    else:
        raise ValueError(f"dtype {dt}, not a float")
    return a.astype(np.float64).reshape(shape)


def from_f64(dt, a):
    """float64 values as dtype dt's bytes, rounded to nearest even."""
    if dt == "BF16":
        f = np.ascontiguousarray(a, dtype=np.float32)
        u = f.view(np.uint32).astype(np.uint64)
        h = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")
        h[np.isnan(f)] = 0x7FC0   # (the rounding would carry a NaN's payload into the sign)
        return h.tobytes()
    return np.ascontiguousarray(a, dtype={"F16": "<f2", "F32": "<f4", "F64": "<f8"}[dt]).tobytes()


def transpose(t):
    """[in, out] -> [out, in], any element size."""
    dt, shape, raw = t
    if len(shape) != 2:
        raise ValueError(f"expected a matrix, got shape {shape}")
    a = np.frombuffer(raw, dtype=np.dtype(f"V{SIZES[dt]}")).reshape(shape)
    return dt, [shape[1], shape[0]], np.ascontiguousarray(a.T).tobytes()


def same_values(a, b):
    """Two tensors hold the same values (exactly; across dtypes, as float64)."""
    if a[1] != b[1]:
        return False
    if a[0] == b[0]:   # (bytes or views of a mapping: compared as arrays, not byte by byte)
        return bool(np.array_equal(np.frombuffer(a[2], np.uint8), np.frombuffer(b[2], np.uint8)))
    try:
        return bool(np.array_equal(to_f64(a), to_f64(b), equal_nan=True))
    except ValueError:
        return False


def gpt2(src):
    out, bad, head = {}, [], None
    for k, t in src.items():
        n = k[len("transformer."):] if k.startswith("transformer.") else k
        if n.endswith((".attn.bias", ".attn.masked_bias")):
            continue
        if n == "lm_head.weight":
            head = (k, t)
        elif n in ("wte.weight", "wpe.weight"):
            out[n[:-len(".weight")]] = t
        elif n.startswith("h.") and n.endswith(CONV1D):
            out[n] = transpose(t)
        elif GPT2_NAMES.fullmatch(n):
            out[n] = t
        else:
            bad.append(k)
    if head and "wte" in out and not same_values(head[1], out["wte"]):
        raise ValueError(f"{head[0]} is not wte's values (an untied head, {head[1][0]} {head[1][1]}); "
                         "examples/gpt2.model ties the head to wte, so it cannot hold this checkpoint")
    return out, bad


def llama(src):
    out, bad = {}, []
    for k, t in src.items():
        n = k[len("model."):] if k.startswith("model.") else k
        if n.endswith(".rotary_emb.inv_freq"):
            continue
        if n == "embed_tokens.weight":
            out["embed_tokens"] = t
        elif LLAMA_NAMES.fullmatch(n):   # (a q_proj.bias, say, is not examples/llama.model's)
            out[n] = t
        else:
            bad.append(k)
    if "lm_head.weight" not in out and "embed_tokens" in out:
        print("hf_to_trainc: note: no lm_head.weight (tied embeddings): the head starts as a copy of embed_tokens", file=sys.stderr)
        out["lm_head.weight"] = out["embed_tokens"]
    return out, bad


GPT2_LAYER = [f"{m}.{w}" for m in ("ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj") for w in ("weight", "bias")]
LLAMA_LAYER = ["input_layernorm.weight", "post_attention_layernorm.weight"] + \
    [f"self_attn.{x}_proj.weight" for x in "qkvo"] + [f"mlp.{x}_proj.weight" for x in ("gate", "up", "down")]


def missing(arch, out, src):
    """The parameters of examples/ARCH.model that out (trainc's names) lacks,
    for layers 0 to the highest one present, by the names the input would
    give them (with its "transformer." or "model." prefix where its names
    have one): a shard not given, a file cut down by hand."""
    if arch == "gpt2":
        top, per, lay = ["wte", "wpe", "ln_f.weight", "ln_f.bias"], GPT2_LAYER, "h"
        pre = "transformer." if any(k.startswith("transformer.") for k in src) else ""
        hf = lambda n: pre + n + (".weight" if n in ("wte", "wpe") else "")
    else:
        top, per, lay = ["embed_tokens", "norm.weight", "lm_head.weight"], LLAMA_LAYER, "layers"
        pre = "model." if any(k.startswith("model.") for k in src) else ""
        hf = lambda n: n if n == "lm_head.weight" else pre + n + (".weight" if n == "embed_tokens" else "")
    idx = {int(k.split(".")[1]) for k in out if k.startswith(lay + ".")}
    want = top + [f"{lay}.{i}.{n}" for i in range(max(idx) + 1 if idx else 0) for n in per]
    return [hf(n) for n in want if n not in out]


def merge_lora(src, alpha, path):
    """The parameters with each LoRA adapter pair merged into its weight:
    W [out, in] + (alpha/r) B [out, r] A [r, in], in float64, rounded to W's
    dtype.  alpha None: an error when there are adapters; 0: alpha = r."""
    pairs = {}
    for k in src:
        m = LORA.fullmatch(k)
        if m:
            pairs.setdefault(m.group(1) + (m.group(3) or ""), {})[m.group(2)] = k
    if not pairs:
        if alpha is not None:
            print(f"hf_to_trainc: note: {path} has no LoRA adapters; --lora-alpha unused", file=sys.stderr)
        return src
    if alpha is None:
        r = sorted({src[p["A"]][1][0] for p in pairs.values() if "A" in p and src[p["A"]][1]})
        die(f"{path}: LoRA adapters on {len(pairs)} weight(s) (rank {', '.join(map(str, r)) or '?'}), and the checkpoint "
            "does not record alpha: give --lora-alpha, the train section's lora_alpha (0 for alpha = r), to merge them")
    out = dict(src)
    for w, p in sorted(pairs.items()):
        if "A" not in p or "B" not in p:
            die(f"{path}: LoRA adapter '{p.get('A') or p.get('B')}' without its {'lora_B' if 'A' in p else 'lora_A'}")
        if w not in src:
            die(f"{path}: LoRA adapters '{p['A']}' and '{p['B']}' of a weight '{w}' the checkpoint does not hold")
        W, A, B = src[w], src[p["A"]], src[p["B"]]
        if len(W[1]) != 2 or len(A[1]) != 2 or len(B[1]) != 2 or A[1][1] != W[1][1] or B[1][0] != W[1][0] or B[1][1] != A[1][0]:
            die(f"{path}: LoRA '{w}' {W[1]}, A {A[1]}, B {B[1]}: not W [out, in], A [r, in], B [out, r]")
        try:
            merged = to_f64(W) + (alpha or A[1][0]) / A[1][0] * (to_f64(B) @ to_f64(A))
        except ValueError as e:
            die(f"{path}: LoRA '{w}': {e}")
        out[w] = (W[0], W[1], from_f64(W[0], merged))
        del out[p["A"]], out[p["B"]]
    print(f"hf_to_trainc: LoRA adapters merged into {len(pairs)} weight(s) (alpha {alpha or 'r'})", file=sys.stderr)
    return out


def unknown(src, names, arch):
    """An error listing the parameters not of examples/ARCH.model."""
    bad = sorted(k for k in src if not names.fullmatch(k))
    if bad:
        hint = " (a Hugging Face file? --to-hf takes a trainc checkpoint)" if any(k.startswith(("transformer.", "model.")) for k in bad) else ""
        raise ValueError(f"{len(bad)} tensor(s) not of examples/{arch}.model{hint}: " + ", ".join(bad[:10]) + (" ..." if len(bad) > 10 else ""))


def gpt2_to_hf(src):
    unknown(src, GPT2_NAMES, "gpt2")
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
    unknown(src, LLAMA_NAMES, "llama")
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
    tensors, meta = read_meta(path)
    names = meta.get("params")
    if names is None:
        return {k: t for k, t in tensors.items() if not k.startswith(STATES)}
    keep = [k for k in names.split(",") if k]
    missing = [k for k in keep if k not in tensors]
    if missing:
        die(f"{path}: metadata 'params' names {len(missing)} tensor(s) the file does not hold: " + ", ".join(missing[:5]))
    return {k: tensors[k] for k in keep}


def check_out(path, inputs=()):
    """-o checked before the work: not empty, not a folder, in a folder that
    exists, none of the inputs (which are mapped while the output is written)."""
    if not path:
        die("-o: an empty path")
    for p in inputs:
        try:
            same = os.path.exists(path) and os.path.samefile(p, path)
        except OSError:
            same = False
        if same:
            die(f"{path}: is the input {p}: writing it would destroy the file being converted")
    dest = os.path.realpath(path) if os.path.islink(path) else path
    if os.path.isdir(dest):
        die(f"{path}: a folder, not a file (-o names the file to write)")
    parent = os.path.dirname(dest) or "."
    if not os.path.exists(parent):
        die(f"{path}: no folder {parent}")
    if not os.path.isdir(parent):
        die(f"{path}: {parent} is not a folder")


def write(path, tensors):
    """A safetensors file of the tensors (sorted by name), as out_open in
    ir/util.c writes: through a symbolic link to its target; to DEST.PID.tmp
    renamed over DEST (keeping an existing file's mode) unless DEST has other
    hard links or is not a regular file (then in place); the temporary file
    removed on any failure, and the failure an error naming the path."""
    names = sorted(tensors)
    head, off = {"__metadata__": {"format": "pt", "source": "tools/hf_to_trainc.py"}}, 0
    for k in names:
        dt, shape, raw = tensors[k]
        head[k] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    h = json.dumps(head, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    dest, st = path, None   # (path passed check_out before the work)
    try:
        st = os.lstat(path)
        if os.path.islink(path):
            try:
                dest = os.path.realpath(path, strict=True)
                st = os.stat(dest)
            except OSError:   # a dangling link: written through, in place (as realpath failing in out_open)
                pass
    except FileNotFoundError:
        pass
    except OSError as e:
        die(f"{path}: {e.strerror}")
    tmp, f = None, None
    try:
        if st is None or (stat.S_ISREG(st.st_mode) and st.st_nlink == 1):
            t = f"{dest}.{os.getpid()}.tmp"
            try:
                f = open(t, "wb")
                tmp = t
                if st is not None:
                    os.fchmod(f.fileno(), st.st_mode & 0o7777)
            except OSError:
                if f:
                    f.close()
                    os.remove(t)
                f, tmp = None, None
        if f is None:
            f = open(path, "wb")
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for k in names:
            f.write(tensors[k][2])
        f.flush()
        os.fsync(f.fileno())
        f.close()
        f = None
        if tmp:
            os.replace(tmp, dest)
            tmp = None
    except BaseException as e:
        if f:
            try:
                f.close()
            except OSError:
                pass
        if tmp:
            try:
                os.remove(tmp)
            except OSError:
                pass
        if isinstance(e, OSError):
            die(f"{path}: {e.strerror or e}")
        raise


# ---- --config: what the tensors cannot show ----

def _cfg(c, key, default=None):
    v = c.get(key, default)
    return default if v is None else v


def check_config(path, arch):
    """Hugging Face's config.json checked against examples/ARCH.model: ({-D name: value}, [errors])."""
    try:
        with open(path, "rb") as f:
            c = json.loads(f.read().decode("utf-8"), object_pairs_hook=_no_dups)
    except OSError as e:
        die(f"{path}: {e.strerror or e}")
    except (UnicodeDecodeError, ValueError) as e:
        die(f"{path}: not a JSON config: {e}")
    if not isinstance(c, dict):
        die(f"{path}: not a JSON object")
    bad = []
    mt = c.get("model_type")
    if mt is not None and mt != arch:
        bad.append(f"model_type is '{mt}', not '{arch}' (--arch)")
    sizes = {}

    def size(name, *keys):
        for k in keys:
            if c.get(k) is not None:
                if not _is_uint(c[k]) or c[k] == 0:
                    bad.append(f"{k} is {c[k]!r}, not a size")
                sizes[name] = c[k]
                return
        bad.append(f"no {keys[0]}")

    if arch == "gpt2":
        size("vocab", "vocab_size")
        size("layers", "n_layer")
        size("heads", "n_head")
        size("dim", "n_embd")
        size("seq", "n_positions", "n_ctx")
        eps = _cfg(c, "layer_norm_epsilon", 1e-5)
        if eps != 1e-5:
            bad.append(f"layer_norm_epsilon is {eps}; examples/gpt2.model's layer_norm uses 1e-5")
        act = _cfg(c, "activation_function", "gelu_new")
        if act not in ("gelu_new", "gelu_pytorch_tanh"):
            bad.append(f"activation_function is '{act}'; examples/gpt2.model's is the tanh GELU (gelu_new, gelu_pytorch_tanh)")
        if not _cfg(c, "tie_word_embeddings", True):
            bad.append("tie_word_embeddings is false; examples/gpt2.model ties the head to wte")
        inner = c.get("n_inner")
        if inner is not None and "dim" in sizes and inner != 4 * sizes["dim"]:
            bad.append(f"n_inner is {inner}; examples/gpt2.model's MLP is 4 * n_embd = {4 * sizes['dim']}")
        if c.get("scale_attn_by_inverse_layer_idx"):
            bad.append("scale_attn_by_inverse_layer_idx is true; examples/gpt2.model scales by 1/sqrt(D) only")
        if not _cfg(c, "scale_attn_weights", True):
            bad.append("scale_attn_weights is false; examples/gpt2.model scales by 1/sqrt(D)")
    else:
        size("vocab", "vocab_size")
        size("layers", "num_hidden_layers")
        size("heads", "num_attention_heads")
        if c.get("num_key_value_heads") is None:
            sizes["kv_heads"] = sizes.get("heads")
        else:
            size("kv_heads", "num_key_value_heads")
        size("dim", "hidden_size")
        size("ffn", "intermediate_size")
        size("seq", "max_position_embeddings")
        # examples/llama.model's constants eps (1e-5) and theta (10000.0): -D sets them
        sizes["eps"] = _cfg(c, "rms_norm_eps", 1e-6)   # LlamaConfig's default
        # newer configs keep rope_theta and rope_type in rope_parameters
        rp = c.get("rope_parameters") if isinstance(c.get("rope_parameters"), dict) else {}
        sizes["theta"] = float(rp["rope_theta"] if "rope_theta" in rp else _cfg(c, "rope_theta", 10000.0))
        act = _cfg(c, "hidden_act", "silu")
        if act != "silu":
            bad.append(f"hidden_act is '{act}'; examples/llama.model's MLP is SwiGLU (silu)")
        # a rope_type of "default" (type, in older configs) is no scaling
        for key, rs in (("rope_scaling", c.get("rope_scaling")), ("rope_parameters", rp)):
            if rs and not (isinstance(rs, dict) and rs.get("rope_type", rs.get("type", "default")) == "default"):
                bad.append(f"{key} is {json.dumps(rs)}; examples/llama.model's rope has no scaling")
        for k in ("attention_bias", "mlp_bias"):
            if c.get(k):
                bad.append(f"{k} is true; examples/llama.model has no biases")
        hd = c.get("head_dim")
        if hd is not None and sizes.get("dim") and sizes.get("heads") and hd * sizes["heads"] != sizes["dim"]:
            bad.append(f"head_dim {hd} times {sizes['heads']} heads is not hidden_size {sizes['dim']}")
        if sizes.get("heads") and sizes.get("kv_heads") and sizes["heads"] % sizes["kv_heads"]:
            bad.append(f"num_attention_heads {sizes['heads']} is not a multiple of num_key_value_heads {sizes['kv_heads']}")
    if arch == "gpt2" and sizes.get("dim") and sizes.get("heads") and sizes["dim"] % sizes["heads"]:
        bad.append(f"n_embd {sizes['dim']} is not a multiple of n_head {sizes['heads']}")
    return c, sizes, bad


def config_vs_tensors(arch, c, sizes, params):
    """The config's sizes against the shapes of the parameters (trainc's names and layouts)."""
    bad = []
    g = lambda n: sizes.get(n)

    def want(name, shape, why=""):
        if name in params and None not in shape and params[name][1] != shape:
            bad.append(f"{name} is {params[name][1]}, the config says {shape}{why}")

    if arch == "gpt2":
        want("wte", [g("vocab"), g("dim")])
        want("wpe", [g("seq"), g("dim")], " (GPT-2's seq is n_positions: wpe is [seq, dim])")
        layers = len({k.split(".")[1] for k in params if k.startswith("h.")})
    else:
        want("embed_tokens", [g("vocab"), g("dim")])
        hd = g("dim") // g("heads") if g("dim") and g("heads") else None
        want("layers.0.self_attn.k_proj.weight", [g("kv_heads") * hd if hd and g("kv_heads") else None, g("dim")])
        want("layers.0.mlp.gate_proj.weight", [g("ffn"), g("dim")])
        layers = len({k.split(".")[1] for k in params if k.startswith("layers.")})
        if c.get("tie_word_embeddings") and "lm_head.weight" in params and "embed_tokens" in params \
                and not same_values(params["lm_head.weight"], params["embed_tokens"]):
            bad.append("tie_word_embeddings is true, but lm_head.weight is not embed_tokens (examples/llama.model trains "
                       "them apart): Hugging Face would load the table as the head; set tie_word_embeddings to false")
    if g("layers") and layers != g("layers"):
        bad.append(f"the checkpoint has {layers} layers, the config {g('layers')}")
    return bad


def d_line(arch, sizes):
    names = ["vocab", "layers", "heads", "dim", "seq"] if arch == "gpt2" else \
            ["vocab", "layers", "heads", "kv_heads", "dim", "ffn", "seq", "eps", "theta"]
    return " ".join(f"-D {n}={sizes[n]!r}" for n in names)


def main():
    ap = argparse.ArgumentParser(description="a Hugging Face GPT-2 or Llama checkpoint as trainc's parameters (for --init), "
                                             "or (--to-hf) a trainc checkpoint as Hugging Face's")
    ap.add_argument("--arch", choices=["gpt2", "llama"], required=True)
    ap.add_argument("--to-hf", action="store_true", help="from a trainc checkpoint to Hugging Face's names and layouts")
    ap.add_argument("inputs", nargs="+", help="the model's safetensors file(s)")
    ap.add_argument("-o", dest="out", required=True)
    ap.add_argument("--lora-alpha", type=float, metavar="A",
                    help="--to-hf of a LoRA model: its lora_alpha (0: alpha = r), to merge W + (alpha/r) B A")
    ap.add_argument("--config", metavar="config.json",
                    help="Hugging Face's config: checked against examples/ARCH.model and the tensors; "
                         "prints the model's -D line on stdout")
    a = ap.parse_args()
    check_out(a.out, list(a.inputs) + ([a.config] if a.config else []))
    cfg = check_config(a.config, a.arch) if a.config else None
    if cfg and cfg[2]:
        die(f"{a.config}: " + "; ".join(cfg[2]))
    if a.to_hf:
        if len(a.inputs) != 1:
            die("--to-hf takes one trainc checkpoint")
        p = a.inputs[0]
        src = merge_lora(trainc_params(p), a.lora_alpha, p)
        if cfg:
            bad = config_vs_tensors(a.arch, cfg[0], cfg[1], src)
            if bad:
                die(f"{a.config}: " + "; ".join(bad))
        try:
            out = (gpt2_to_hf if a.arch == "gpt2" else llama_to_hf)(src)
        except ValueError as e:
            die(f"{p}: {e}")
        write(a.out, out)
        print(f"hf_to_trainc: {len(out)} tensors written to {a.out}", file=sys.stderr)
        return
    if a.lora_alpha is not None:
        die("--lora-alpha is for --to-hf (a LoRA checkpoint's adapters)")
    src, where = {}, {}
    for p in a.inputs:
        tensors, meta = read_meta(p)
        if meta.get("format") == "trainc":
            die(f"{p} is a trainc checkpoint (metadata 'format' is 'trainc'): --to-hf writes it as Hugging Face's")
        for k, t in tensors.items():
            if k in src:
                die(f"{p}: tensor '{k}' is also in {where[k]}")
            if t[0] not in SIZES:
                die(f"{p}: tensor '{k}' has dtype {t[0]}, which --init does not load")
            src[k], where[k] = t, p
    try:
        out, bad = (gpt2 if a.arch == "gpt2" else llama)(src)
    except ValueError as e:
        die(f"{', '.join(a.inputs)}: {e}")
    if bad:
        die(f"{', '.join(sorted({where[k] for k in bad}))}: {len(bad)} tensor(s) not of a {a.arch} model: " +
            ", ".join(sorted(bad)[:10]) + (" ..." if len(bad) > 10 else ""))
    lack = missing(a.arch, out, src)
    if lack:
        die(f"{', '.join(a.inputs)}: {len(lack)} tensor(s) of examples/{a.arch}.model missing" +
            (" (every shard given?)" if len(lack) > 1 else "") + ": " + ", ".join(lack[:10]) + (" ..." if len(lack) > 10 else ""))
    if cfg:
        bad = config_vs_tensors(a.arch, cfg[0], cfg[1], out)
        if bad:
            die(f"{a.config}: " + "; ".join(bad))
    write(a.out, out)
    print(f"hf_to_trainc: {len(out)} tensors written to {a.out}", file=sys.stderr)
    if cfg:
        print(d_line(a.arch, cfg[1]))   # alone on stdout: trainc compile examples/ARCH.model $(...)


if __name__ == "__main__":
    main()
