#!/usr/bin/env python3
# The PyTorch peers of the Llama block (RMSNorm, SwiGLU, RoPE in the rotate_half convention,
# grouped-query attention, untied head): scripts/bench_llama_cpu.sh's (fp32 on the CPU, attention
# written out eagerly with repeat_kv) and bench_gpu --model llama's (--preset: bf16 autocast on
# CUDA in gpt_torch.py's modes, configs/llama_1b_gpu.yaml's shape).
"""Usage: llama_torch.py OUT_JSON --layers L --hidden C --heads H --groups G --ffn F --seq T
                        --micro-batch B --vocab V [--warmup-steps 2] [--timed-steps 8]
       llama_torch.py OUT_JSON --preset 1b|quick|tiny [--device cuda|cpu]
                        [--modes eager,checkpoint,sdpa] [--warmup-steps 2] [--timed-steps 3]
                        [--peak-tflops 989.4] [--time-limit-s S]

The first writes {"tokens_per_s", "step_ms": [...], "median_step_ms", "threads", "torch"}: the
median of the timed steps (each: zero_grad, forward, cross entropy, backward, clip, AdamW step).
The second is gpt_torch.py's report for the Llama block (bench_gpu's Llama shapes, no dropout):
eager (attention written out, repeat_kv), checkpoint (eager with torch.utils.checkpoint around
every block) and sdpa (scaled_dot_product_attention, causal; grouped key/value heads through
enable_gqa where this torch has it, else repeat_kv). Exits 2 with a message when torch is absent.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_torch  # noqa: E402  bench_gpu's peer harness: modes, timing, the report


def cpu_main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    for name in ("layers", "hidden", "heads", "groups", "ffn", "seq", "micro-batch", "vocab"):
        parser.add_argument("--" + name, type=int, required=True)
    parser.add_argument("--warmup-steps", type=int, default=2)
    parser.add_argument("--timed-steps", type=int, default=8)
    args = parser.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print("llama_torch.py: no torch in this python", file=sys.stderr)
        sys.exit(2)
    torch.set_num_threads(os.cpu_count())  # every core, as the trainer uses
    torch.manual_seed(0)
    C, H, G, D = args.hidden, args.heads, args.groups, args.hidden // args.heads
    T, B, V, r = args.seq, args.micro_batch, args.vocab, args.heads // args.groups

    def linear(out_features, in_features):
        return torch.nn.Parameter(torch.randn(out_features, in_features) * 0.02)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = torch.nn.Parameter(torch.ones(C)), torch.nn.Parameter(torch.ones(C))
            self.q, self.k, self.v = linear(H * D, C), linear(G * D, C), linear(G * D, C)
            self.o = linear(C, H * D)
            self.gate, self.up, self.down = linear(args.ffn, C), linear(args.ffn, C), linear(C, args.ffn)

    def rms(x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5))

    def rotate_half(x):
        return torch.cat([-x[..., D // 2:], x[..., :D // 2]], -1)

    blocks = torch.nn.ModuleList([Block() for _ in range(args.layers)])
    embed, head = torch.nn.Parameter(torch.randn(V, C) * 0.02), linear(V, C)
    norm = torch.nn.Parameter(torch.ones(C))
    params = list(blocks.parameters()) + [embed, head, norm]
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, D, 2).float() / D))
    angles = torch.outer(torch.arange(T).float(), inv_freq)
    cos, sin = torch.cat([angles, angles], -1).cos(), torch.cat([angles, angles], -1).sin()
    mask = torch.full((T, T), float("-inf")).triu(1)

    def forward(tokens, targets):
        x = embed[tokens]
        for b in blocks:
            n = rms(x, b.ln1)
            q = (n @ b.q.t()).view(B, T, H, D).transpose(1, 2)
            k = (n @ b.k.t()).view(B, T, G, D).transpose(1, 2)
            v = (n @ b.v.t()).view(B, T, G, D).transpose(1, 2)
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            k, v = k.repeat_interleave(r, 1), v.repeat_interleave(r, 1)
            probs = torch.softmax(q @ k.transpose(-1, -2) / D ** 0.5 + mask, -1)
            x = x + (probs @ v).transpose(1, 2).reshape(B, T, C) @ b.o.t()
            n = rms(x, b.ln2)
            x = x + (F.silu(n @ b.gate.t()) * (n @ b.up.t())) @ b.down.t()
        logits = rms(x, norm) @ head.t()
        return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))

    optimizer = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.95), weight_decay=0.01)
    data = torch.randint(0, V, (B, T + 1))
    times = []
    for step in range(args.warmup_steps + args.timed_steps):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = forward(data[:, :-1], data[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        if step >= args.warmup_steps:
            times.append(time.perf_counter() - start)
    median = statistics.median(times)
    json.dump({"tokens_per_s": B * T / median, "step_ms": [t * 1e3 for t in times],
               "median_step_ms": median * 1e3, "threads": torch.get_num_threads(),
               "torch": torch.__version__, "loss": float(loss)}, open(args.out, "w"))


# bench_gpu --model llama's shapes (bench/bench_gpu.h: BenchShape::llama_1b(), llama_quick()); tiny
# is for checking the script on a CPU in seconds.
PRESETS = {
    "1b": dict(layers=16, hidden=2048, heads=32, groups=8, ffn=8192, vocab=128256, seq=4096,
               micro_batch=2, global_batch=4, rotary_base=500000.0),
    "quick": dict(layers=2, hidden=256, heads=4, groups=2, ffn=688, vocab=128256, seq=512,
                  micro_batch=2, global_batch=4, rotary_base=500000.0),
    "tiny": dict(layers=2, hidden=64, heads=4, groups=2, ffn=96, vocab=256, seq=64, micro_batch=2,
                 global_batch=4, rotary_base=10000.0),
}
EPS = 1e-5


def model_flops_per_step(shape):
    """The trainer's count (model/flops.cpp): 3 x the forward GEMMs (QKV of the grouped width,
    full T x T attention products, proj, fc1 = [gate|up], fc2, the head over the padded vocabulary)
    over every microbatch of a step."""
    b, t, c, h = shape["micro_batch"], shape["seq"], shape["hidden"], shape["heads"]
    d, g, f, rows = c // h, shape["groups"], shape["ffn"], b * t
    attention = 2 * 2 * b * h * t * t * d
    layer = 2 * rows * c * (h + 2 * g) * d + attention + 2 * rows * h * d * c + \
        2 * rows * c * 2 * f + 2 * rows * f * c
    head = 2 * rows * c * gpt_torch.padded_vocab(shape["vocab"])
    return 3 * (shape["layers"] * layer + head) * (shape["global_batch"] // b)


def build_model(torch, shape, mode):
    """The Llama block as a torch.nn.Module whose forward(tokens, targets) returns the mean loss:
    Hugging Face LlamaForCausalLM's math (RMSNorm in fp32, rotate_half RoPE, SwiGLU, untied
    head), with one QKV GEMM and one fc1 = [gate | up] GEMM per layer as the trainer runs."""
    import torch.utils.checkpoint  # not imported by `import torch` in every version

    nn, F = torch.nn, torch.nn.functional
    c, heads, groups, ffn = shape["hidden"], shape["heads"], shape["groups"], shape["ffn"]
    d, r = c // heads, heads // groups
    sdpa = getattr(F, "scaled_dot_product_attention", None)  # torch >= 2.0
    gqa_sdpa = sdpa is not None and "enable_gqa" in (sdpa.__doc__ or "")  # torch >= 2.5

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(c))

        def forward(self, x):
            x32 = x.float()
            x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + EPS)
            return self.weight * x32.to(x.dtype)

    def rotate(x, cos, sin):
        half = torch.cat([-x[..., d // 2:], x[..., :d // 2]], -1)
        return x * cos + half * sin

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = RMSNorm(), RMSNorm()
            self.qkv = nn.Linear(c, (heads + 2 * groups) * d, bias=False)
            self.proj = nn.Linear(heads * d, c, bias=False)
            self.fc1 = nn.Linear(c, 2 * ffn, bias=False)
            self.fc2 = nn.Linear(ffn, c, bias=False)

        def attention(self, x, cos, sin):
            b, t, _ = x.shape
            q, k, v = self.qkv(x).split([heads * d, groups * d, groups * d], dim=2)
            q = rotate(q.view(b, t, heads, d).transpose(1, 2), cos, sin)
            k = rotate(k.view(b, t, groups, d).transpose(1, 2), cos, sin)
            v = v.view(b, t, groups, d).transpose(1, 2)
            if mode == "sdpa" and gqa_sdpa:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            else:
                k, v = k.repeat_interleave(r, 1), v.repeat_interleave(r, 1)
                if mode == "sdpa":
                    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                else:
                    scores = (q @ k.transpose(-2, -1)) / math.sqrt(d)
                    causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
                    y = F.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1) @ v
            return self.proj(y.transpose(1, 2).reshape(b, t, heads * d))

        def forward(self, x, cos, sin):
            x = x + self.attention(self.ln1(x), cos, sin)
            gate, up = self.fc1(self.ln2(x)).chunk(2, dim=-1)
            return x + self.fc2(F.silu(gate) * up)

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(gpt_torch.padded_vocab(shape["vocab"]), c)
            self.blocks = nn.ModuleList(Block() for _ in range(shape["layers"]))
            self.norm = RMSNorm()
            self.head = nn.Linear(c, gpt_torch.padded_vocab(shape["vocab"]), bias=False)
            inv_freq = 1.0 / (shape["rotary_base"] ** (torch.arange(0, d, 2).float() / d))
            self.register_buffer("inv_freq", inv_freq, persistent=False)

        def forward(self, tokens, targets):
            angles = torch.outer(torch.arange(tokens.shape[1], device=tokens.device).float(),
                                 self.inv_freq)
            angles = torch.cat([angles, angles], -1)
            x = self.embed(tokens)
            cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
            for block in self.blocks:
                if mode == "checkpoint":
                    x = torch.utils.checkpoint.checkpoint(block, x, cos, sin, use_reentrant=False)
                else:
                    x = block(x, cos, sin)
            logits = self.head(self.norm(x))
            return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))

    model = Llama()
    init_weights(torch, model, shape["layers"])
    return model


def init_weights(torch, model, layers):
    """The trainer's init: normal(0, 0.02), the output projections (proj, fc2) 0.02 / sqrt(2 L),
    norm weights 1."""
    for name, p in model.named_parameters():
        if name.endswith(("ln1.weight", "ln2.weight")) or name == "norm.weight":
            torch.nn.init.ones_(p)
        else:
            std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight", "fc2.weight")) \
                else 0.02
            torch.nn.init.normal_(p, 0.0, std)


# The family gpt_torch.main() measures.
LLAMA = {"name": "llama_torch", "usage": __doc__, "presets": PRESETS, "default_preset": "1b",
         "build": build_model, "flops": model_flops_per_step, "dropout": 0.0}


if __name__ == "__main__":
    if any(a == "--preset" or a.startswith("--preset=") for a in sys.argv[1:]):
        sys.exit(gpt_torch.main(sys.argv[1:], LLAMA))
    cpu_main()
