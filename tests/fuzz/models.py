#!/usr/bin/env python3
# tests/fuzz/models.py SEED — a random small language model in the .model
# language (tokens [2, 8] -> cross-entropy over 256 classes), from a chain
# of 2 to 9 random steps over [2, 8, C] tensors: pointwise ops and
# broadcasts, linear layers (some with a tanh GELU after, some written
# x @ w + b with w [in, out]), gated MLPs,
# residual sums with a norm after, the norms (and RMSNorm spelled out), softmax
# along either axis, attention (with RoPE, grouped-query, causal or not),
# split/concat/slice, dropout, casts through bf16, transposes, a
# hand-written attention, reductions kept as broadcasts; sometimes a block
# of such steps repeated 1 to 3 times (checkpointing's unit).  Some steps'
# results are never used (their parameters get a warning).  The same seed
# gives the same model.  tests/fuzz/models.sh runs the differential checks.
import random, sys

def gen(seed):
    R = random.Random(seed)
    # choices added later draw from R2, so that every choice R makes for a
    # seed stays what it was
    R2 = random.Random(seed ^ 0x5bd1e995)
    B, T = 2, 8
    C0 = R.choice([8, 12, 16])
    V = 256
    cur = [[]]  # the statements being written: the model's or a block's
    cnt = [0]
    def fresh(p='v'):
        cnt[0] += 1
        return f'{p}{cnt[0]}'
    # every parameter's glob (a block's: '*.pN', each repeat's copy) and
    # those of the weights read only as linear(x, w): LoRA's targets
    globs, lins = [], []
    where = ['']
    def param(shape, init='normal(0.1)'):
        n = fresh('p')
        cur[0].append(f'  param {n}: [{", ".join(map(str, shape))}] = {init}')
        globs.append(where[0] + n)
        return n
    def linw(w):
        lins.append(where[0] + w)
        return w
    pool = []  # (name, width)
    x = fresh()
    wte = param([V, C0], 'normal(0.1)')
    cur[0].append(f'  {x} = embedding({wte}, tokens)')
    pool.append((x, C0))
    if R.random() < 0.5:
        wpe = param([T, C0])
        y = fresh()
        cur[0].append(f'  {y} = {x} + embedding({wpe}, arange({T}))')
        pool.append((y, C0))
    def steps(pool, nops):
      lines = cur[0]
      for _ in range(nops):
          a, ca = R.choice(pool[-3:])
          same = [p for p in pool if p[1] == ca]
          b, _ = R.choice(same)
          k = R.randrange(24)
          y = fresh()
          cy = ca
          if k == 0:
              f = R.choice(['tanh', 'sigmoid', 'relu', 'silu', 'gelu', 'neg', 'abs'])
              lines.append(f'  {y} = {f}({a})')
          elif k == 1:
              lines.append(f'  {y} = gelu({a}, approximate="tanh")')
          elif k == 2:
              op = R.choice(['+', '-', '*'])
              lines.append(f'  {y} = {a} {op} {b}')
          elif k == 3:
              f = R.choice(['maximum', 'minimum'])
              lines.append(f'  {y} = {f}({a}, {b})')
          elif k == 4:
              w = param([ca], R.choice(['ones', 'normal(0.5)']))
              op = R.choice(['+', '*'])
              lines.append(f'  {y} = {a} {op} {w}')
          elif k == 5:
              cy = R.choice([8, 12, 16, 24, 6])
              bias = R.random() < 0.5
              # some with w [in, out], x @ w + b: the weight gradient x^T dy
              # sums the bias gradient from its B (cuBLASLt's BGRADA)
              inout = bias and R2.random() < 0.4
              w = param([ca, cy] if inout else [cy, ca], f'normal({1.0 / ca ** 0.5:.3f})')
              if bias:
                  bb = param([cy], 'zeros')
                  lin = f'{a} @ {w} + {bb}' if inout else f'linear({a}, {linw(w)}, {bb})'
              else:
                  lin = f'linear({a}, {linw(w)})'
              # (a tanh GELU of it: the product's GELU epilogue)
              lines.append(f'  {y} = gelu({lin}, approximate="tanh")' if R.random() < 0.3 else f'  {y} = {lin}')
          elif k == 6:
              w = param([ca], 'ones'); bb = param([ca], 'zeros')
              lines.append(f'  {y} = layer_norm({a}, {w}, {bb})')
          elif k == 7:
              w = param([ca], 'ones')
              lines.append(f'  {y} = rms_norm({a}, {w})')
          elif k == 8:
              w = param([ca], 'ones')
              lines.append(f'  {y} = {a} * rsqrt(mean({a} * {a}, axis=-1, keepdim=true) + 1e-5) * {w}')
          elif k == 9:
              lines.append(f'  {y} = softmax({a}, axis={R.choice([-1, 1])})')
          elif k == 10:
              lines.append(f'  {y} = {a} - max({a}, axis=-1, keepdim=true)')
          elif k == 11 and ca % 4 == 0:
              H = R.choice([1, 2]); D = ca // H
              Hk = R.choice([h for h in [1, 2] if H % h == 0])
              q, kk, vv = fresh(), fresh(), fresh()
              wq = param([ca, ca], f'normal({1.0 / ca ** 0.5:.3f})')
              wk = param([Hk * D, ca], f'normal({1.0 / ca ** 0.5:.3f})')
              wv = param([Hk * D, ca], f'normal({1.0 / ca ** 0.5:.3f})')
              lines.append(f'  {q} = transpose(reshape(linear({a}, {linw(wq)}), [{B}, {T}, {H}, {D}]), 1, 2)')
              lines.append(f'  {kk} = transpose(reshape(linear({a}, {linw(wk)}), [{B}, {T}, {Hk}, {D}]), 1, 2)')
              lines.append(f'  {vv} = transpose(reshape(linear({a}, {linw(wv)}), [{B}, {T}, {Hk}, {D}]), 1, 2)')
              if R.random() < 0.5 and D % 2 == 0:
                  lines.append(f'  {q} = rope({q})')
                  lines.append(f'  {kk} = rope({kk})')
              causal = R.choice(['true', 'false']) if Hk == H else 'true'
              lines.append(f'  {y} = reshape(transpose(attention({q}, {kk}, {vv}, causal={causal}), 1, 2), [{B}, {T}, {ca}])')
          elif k == 12 and ca % 2 == 0:
              p, q = fresh(), fresh()
              lines.append(f'  {p}, {q} = split({a}, 2)')
              if R.random() < 0.5:
                  lines.append(f'  {y} = concat([{q}, {p}], axis=-1)')
              else:
                  f = R.choice(['sigmoid', 'silu', 'gelu'])
                  lines.append(f'  {y} = {f}({p}) * {q}')
                  cy = ca // 2
          elif k == 13 and ca > 2:
              e = R.randint(1, ca - 1)
              lines.append(f'  {y} = slice({a}, -1, 0, {e})')
              cy = e
          elif k == 14:
              lines.append(f'  {y} = dropout({a}, 0.1)')
          elif k == 15:
              lines.append(f'  {y} = cast(cast({a}, "bf16"), "f32")')
          elif k == 16:
              s = fresh()
              lines.append(f'  {s} = softmax(matmul({a}, transpose({b}, 1, 2)) * {1.0 / ca ** 0.5:.3f}, axis=-1)')
              lines.append(f'  {y} = matmul({s}, {b})')
          elif k == 17:
              lines.append(f'  {y} = {a} + sum({a}, axis=1, keepdim=true) * 0.1')
          elif k == 18:
              lines.append(f'  {y} = exp(tanh({a})) + sqrt({a} * {a} + 1.0)')
          elif k == 19:
              lines.append(f'  {y} = transpose(transpose({a}, 1, 2) * 2.0, 1, 2)')
          elif k == 20:
              lines.append(f'  {y} = {a} / (abs({b}) + 1.0)')
          elif k == 21:
              # a gated MLP (liger's SwiGLU / GeGLU; the backward sums the
              # two products' input gradients into one)
              hd = R.choice([8, 16, 24])
              w1 = param([hd, ca], f'normal({1.0 / ca ** 0.5:.3f})')
              w2 = param([hd, ca], f'normal({1.0 / ca ** 0.5:.3f})')
              w3 = param([ca, hd], f'normal({1.0 / hd ** 0.5:.3f})')
              g = fresh()
              lines.append(f'  {g} = {R.choice(["silu", "gelu"])}(linear({a}, {linw(w1)})) * linear({a}, {linw(w2)})')
              lines.append(f'  {y} = linear({g}, {linw(w3)})')
          elif k == 22:
              # a residual sum and its norm (liger's add + norm), the sum
              # read on
              s = fresh()
              w = param([ca], 'ones')
              lines.append(f'  {s} = {a} + {b}')
              if R.random() < 0.5:
                  bb = param([ca], 'zeros')
                  lines.append(f'  {y} = layer_norm({s}, {w}, {bb})')
              else:
                  lines.append(f'  {y} = rms_norm({s}, {w})')
              pool.append((s, ca))
          else:
              lines.append(f'  {y} = {a} + {b}')
          pool.append((y, cy))
    # a repeated block (checkpoint=blocks recomputes it in the backward)
    blocks = []
    if R.random() < 0.4:
        outer = cur[0]
        cur[0] = []
        where[0] = '*.'
        bp = [('x', C0)]
        steps(bp, R.randint(1, 6))
        last, cl = bp[-1]
        if cl != C0:
            w = param([C0, cl], f'normal({1.0 / cl ** 0.5:.3f})')
            cur[0].append(f'  y = linear({last}, {linw(w)})')
            last = 'y'
        if not any(l.startswith('  param ') for l in cur[0]):  # a block with a parameter: checkpointing's unit
            g = param([C0], 'ones')
            cur[0].append(f'  z = {last} * {g}')
            last = 'z'
        ret = f'x + {last}' if R.random() < 0.5 else last
        blocks = ['block B(x) {'] + cur[0] + [f'  return {ret}', '}', '']
        cur[0] = outer
        where[0] = ''
        h0 = pool[-1][0]
        cur[0] += [f'  repeat {R.choice([1, 2, 3])} as layers {{', f'    {h0} = B({h0}) as blk', '  }']
        pool = [(h0, C0)]
    steps(pool, R.randint(0 if blocks else 2, 6 if blocks else 9))
    lines = cur[0]
    h, ch = pool[-1]
    if R.random() < 0.3 and ch == C0:
        lines.append(f'  logits = linear({h}, {wte})')
    else:
        wh = param([V, ch], f'normal({1.0 / ch ** 0.5:.3f})')
        lines.append(f'  logits = linear({h}, {linw(wh)})')
    if R.random() < 0.25:
        lines.append('  z = logits - max(logits, axis=-1, keepdim=true)')
        lines.append('  return cross_entropy(z - log(sum(exp(z), axis=-1, keepdim=true)), targets)')
    else:
        lines.append('  return cross_entropy(logits, targets)')
    # what models.sh gives `--set lora_targets` (some of the linear-only
    # weights) and `--set freeze` (one parameter other than the embedding),
    # from a generator of their own
    R3 = random.Random(seed ^ 0x27d4eb2f)
    head = [f'# fuzz seed {seed}']
    if lins:
        head.append('# lora_targets: ' + ','.join(R3.sample(lins, R3.randint(1, len(lins)))))
    if len(globs) > 1:
        head.append('# freeze: ' + R3.choice(globs[1:]))
    out = head + blocks + [f'model fz(tokens: i32[{B}, {T}], targets: i32[{B}, {T}]) {{'] + lines + ['}', '',
           'train {', '  optimizer = adamw', '  lr = 1e-3', '  steps = 3', '}']
    return '\n'.join(out) + '\n'

if __name__ == '__main__':
    print(gen(int(sys.argv[1])), end='')
