#!/usr/bin/env python3
# The PyTorch peer of scripts/bench_llama_cpu.sh: the same Llama block (RMSNorm, SwiGLU, RoPE in
# the rotate_half convention, grouped-query attention written out eagerly with repeat_kv, untied
# head) trained in fp32 on the CPU with torch.optim.AdamW and clip_grad_norm_, timed per step.
"""Usage: llama_torch.py OUT_JSON --layers L --hidden C --heads H --groups G --ffn F --seq T
                        --micro-batch B --vocab V [--warmup-steps 2] [--timed-steps 8]

Writes {"tokens_per_s", "step_ms": [...], "median_step_ms", "threads", "torch"}: the median of
the timed steps (each: zero_grad, forward, cross entropy, backward, clip, AdamW step). Exits 2
with a message when torch is absent.
"""
import argparse
import json
import os
import statistics
import sys
import time


def main():
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


if __name__ == "__main__":
    main()
