"""tests/gpu/ceilings.py — the two ceilings of this GPU, measured (run.sh's
profile stage, before it times trainc's kernels): the bandwidth of a
device-to-device copy (bytes read plus bytes written over its time) and
the rate of a large bf16 matrix product through PyTorch (cuBLAS), on
random data; and beside them the rate PyTorch gets on the twelve products
of one GPT-2 small layer at the benchmark's 16 x 1024 tokens (forward, and
both products of each backward: the shapes of trainc's `gemm` op in the
profile) and on its causal attention (scaled_dot_product_attention, 16 x
12 heads x 1024 x 64, forward, and forward with backward; FLOPs counted as
trainc counts them: 2 B H T^2 D forward, twice that backward).  Each figure is the median of REPS timings, each timing INNER
back-to-back runs between two CUDA events (so the host's launch latency
is not in it), after 3 such warm-ups.  The roofline's bound at the
ceilings is what the device allows in practice; at the datasheet's peaks
(989 TFLOP/s, 4.8 TB/s) it is what no program reaches.  Prints one JSON
line, or {"error": ...} where PyTorch or the GPU is missing.

    python3 tests/gpu/ceilings.py [--copy-gib 2] [--n 8192] [--tokens 16384]
        [--width 768] [--heads 12] [--seq 1024] [--reps 10] [--inner 10]
        [--device cuda]
"""
import argparse
import json
import sys
import time


def timed(fn, reps, inner, torch, dev):
    """median, least and most milliseconds of one run of fn: REPS timings of
    INNER runs each, after 3 such warm-ups; between two CUDA events (on the
    CPU, the host's clock: the tests' smoke run)"""
    def batch():
        for _ in range(inner):
            fn()
    for _ in range(3):
        batch()
    ms = []
    for _ in range(reps):
        if dev == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            batch()
            b.record()
            b.synchronize()
            ms.append(a.elapsed_time(b) / inner)
        else:
            t = time.perf_counter()
            batch()
            ms.append((time.perf_counter() - t) * 1e3 / inner)
    ms.sort()
    return ms[len(ms) // 2], ms[0], ms[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--copy-gib", type=float, default=2.0)
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--width", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--inner", type=int, default=10)
    ap.add_argument("--device", default="cuda", help="cuda; cpu only for the tests' smoke run, at small sizes")
    a = ap.parse_args()
    try:
        import torch
    except Exception as e:  # noqa: BLE001 (any import failure is a result)
        print(json.dumps({"error": f"no PyTorch: {e}"}))
        return
    dev = a.device
    if dev == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device", "torch": torch.__version__}))
        return
    torch.manual_seed(0)
    rnd = lambda *s: torch.randn(*s, device=dev, dtype=torch.bfloat16)
    # the copy
    nbytes = int(a.copy_gib * 2**30) // 16 * 16
    src = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    cmed, cmin, cmax = timed(lambda: dst.copy_(src), a.reps, a.inner, torch, dev)
    same = bool(torch.equal(src, dst))
    del src, dst
    # the large product
    n = a.n
    x, w, y = rnd(n, n), rnd(n, n), torch.empty(n, n, device=dev, dtype=torch.bfloat16)
    mmed, mmin, mmax = timed(lambda: torch.matmul(x, w, out=y), a.reps, a.inner, torch, dev)
    ok = bool(torch.isfinite(y).all())
    del x, w, y
    # one GPT-2 layer's products: x [N, in] times W [in, out] (qkv, the
    # attention's projection, the MLP's two), then dx = dy W^T and
    # dW = x^T dy, bf16 in and out
    N, C = a.tokens, a.width
    mats = []
    for i, o in ((C, 3 * C), (C, C), (C, 4 * C), (4 * C, C)):
        mats.append((rnd(N, i), rnd(i, o), rnd(N, o), torch.empty(N, o, device=dev, dtype=torch.bfloat16),
                     torch.empty(N, i, device=dev, dtype=torch.bfloat16), torch.empty(i, o, device=dev, dtype=torch.bfloat16)))
    def layer():
        for xi, wi, dy, yo, dx, dw in mats:
            torch.matmul(xi, wi, out=yo)
            torch.matmul(dy, wi.t(), out=dx)
            torch.matmul(xi.t(), dy, out=dw)
    lmed, lmin, lmax = timed(layer, a.reps, a.inner, torch, dev)
    lflops = 3 * 2.0 * N * sum(m[0].shape[1] * m[1].shape[1] for m in mats)
    ok = ok and all(bool(torch.isfinite(m[5]).all()) for m in mats)
    del mats
    # causal attention at the same sizes: B = tokens / seq sequences
    T, H = a.seq, a.heads
    B, D = max(1, N // T), C // H
    qkv = [rnd(B, H, T, D).requires_grad_() for _ in range(3)]
    do = rnd(B, H, T, D)
    F = torch.nn.functional
    if hasattr(F, "scaled_dot_product_attention"):
        sdpa, impl = F.scaled_dot_product_attention, "scaled_dot_product_attention"
    else:  # PyTorch < 2.0 (the tests' smoke run on the CPU only)
        def sdpa(q, k, v, is_causal):
            s = (q @ k.transpose(-2, -1)) / D ** 0.5
            s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
            return s.softmax(-1) @ v
        impl = "written out (no scaled_dot_product_attention)"
    def att_fwd():
        with torch.no_grad():
            sdpa(*qkv, is_causal=True)
    def att_both():
        for x in qkv:
            x.grad = None
        sdpa(*qkv, is_causal=True).backward(do)
    fmed, _, _ = timed(att_fwd, a.reps, a.inner, torch, dev)
    bmed, _, _ = timed(att_both, a.reps, a.inner, torch, dev)
    aflops = 2.0 * B * H * T * T * D
    ok = ok and all(bool(torch.isfinite(x.grad).all()) for x in qkv)
    print(json.dumps({
        "gpu": torch.cuda.get_device_name() if dev == "cuda" else dev,
        "torch": torch.__version__,
        "copy_bytes": 2 * nbytes,
        "copy_ms": cmed, "copy_ms_range": [cmin, cmax],
        "copy_tb_per_s": 2 * nbytes / (cmed / 1e3) / 1e12,
        "copy_equal": same,
        "matmul_n": n,
        "matmul_ms": mmed, "matmul_ms_range": [mmin, mmax],
        "bf16_tflops": 2.0 * n * n * n / (mmed / 1e3) / 1e12,
        "layer_tokens": N, "layer_width": C,
        "layer_products_ms": lmed, "layer_products_ms_range": [lmin, lmax],
        "layer_products_tflops": lflops / (lmed / 1e3) / 1e12,
        "attention_shape": [B, H, T, D], "attention_impl": impl,
        "attention_fwd_ms": fmed, "attention_fwd_bwd_ms": bmed,
        "attention_fwd_tflops": aflops / (fmed / 1e3) / 1e12,
        "attention_bwd_tflops": 2 * aflops / (max(bmed - fmed, 1e-6) / 1e3) / 1e12,
        "matmul_finite": ok,
        "reps": a.reps, "inner": a.inner,
    }))


if __name__ == "__main__":
    sys.exit(main())
