"""tests/gpu/records.py — what tests/gpu/run.sh's readers and
bench/roofline.sh share.

op(row): the op a kernel of a compiled CUDA module belongs to, as run.sh's
profile and roofline.sh group kernels (one name for both, so that a
measured op and its bound line up): the products (kind gemm) together as
"gemm", memsets as "memset", any other kernel by its name less the k<N>_
prefix and the _<file>_L<line> suffix of its .model line
(k12_layer_norm_gpt2_model_L25 -> layer_norm).  A row is a dict with
"kernel", "where" (FILE:LINE or "") and "kind".

loads(text): a JSON line as C's printf may write it: a number printed as
inf or nan (not JSON) read as null, control characters allowed in
strings; raises ValueError when it is still not JSON."""
import json
import re


def op(r):
    n = re.sub(r"^[a-z]+[0-9]+_", "", r["kernel"])
    if r["where"]:
        f, line = r["where"].rsplit(":", 1)
        suf = "_" + re.sub(r"[^A-Za-z0-9]", "_", f) + "_L" + line
        n = n[: -len(suf)] if n.endswith(suf) else n
    return r["kind"] if r["kind"] in ("gemm", "memset") else n


def loads(text):
    try:
        return json.loads(text, strict=False)
    except ValueError:
        return json.loads(re.sub(r"(?<=[:,\[])\s*[-+]?(?:inf(?:inity)?|nan)\b", "null", text, flags=re.I), strict=False)
