#!/usr/bin/env python3
# The PyTorch peer of bench_gpu: the same GPT (bench_gpu's 1.3B shape, learned positions, pre-LN,
# tanh GELU, tied head, dropout 0.1) trained in bf16 autocast with AdamW, timed per attention mode.
"""Usage: gpt_torch.py OUT_JSON [--preset 1.3b|quick|tiny] [--device cuda|cpu]
                       [--modes eager,checkpoint,sdpa] [--warmup-steps 2] [--timed-steps 3]
                       [--peak-tflops 989.4] [--time-limit-s S]

Modes: eager (attention written out: scores, causal mask, softmax, dropout, context), checkpoint
(eager with torch.utils.checkpoint around every block) and sdpa
(torch.nn.functional.scaled_dot_product_attention, causal, with dropout). Each mode reports
tokens/s, model TFLOP/s and MFU with bench_gpu's FLOP count (model/flops.cpp: the six GEMMs of a
layer with full T x T attention products, the head over the padded vocabulary, 3 x forward per
microbatch) and the peak of allocated device memory. OUT_JSON is rewritten after every mode, so
a run cut short keeps what it measured. Needs torch; exits 2 with a message when it is absent.
"""
import argparse
import json
import math
import os
import sys
import time

# bench_gpu's shapes (bench/bench_gpu.h BenchShape; quick = BenchShape::quick()); tiny is for
# checking the script on a CPU in seconds.
PRESETS = {
    "1.3b": dict(layers=24, hidden=2048, heads=16, vocab=50257, seq=2048, micro_batch=4,
                 global_batch=8),
    "quick": dict(layers=2, hidden=256, heads=4, vocab=50257, seq=512, micro_batch=2,
                  global_batch=4),
    "tiny": dict(layers=2, hidden=64, heads=4, vocab=256, seq=64, micro_batch=2, global_batch=4),
}
MODES = ("eager", "checkpoint", "sdpa")
DROPOUT = 0.1
VOCAB_MULTIPLE = 128  # model.make_vocab_size_divisible_by


def padded_vocab(vocab):
    return (vocab + VOCAB_MULTIPLE - 1) // VOCAB_MULTIPLE * VOCAB_MULTIPLE


def model_flops_per_step(shape):
    """bench_gpu's MFU numerator: 3 x forward GEMM FLOPs over every microbatch of a step."""
    rows, c, t = shape["seq"] * shape["micro_batch"], shape["hidden"], shape["seq"]
    attention = 2 * 2 * shape["micro_batch"] * shape["heads"] * t * t * (c // shape["heads"])
    layer = 2 * rows * c * 3 * c + attention + 2 * rows * c * c + 2 * 2 * rows * c * 4 * c
    head = 2 * rows * c * padded_vocab(shape["vocab"])
    microbatches = shape["global_batch"] // shape["micro_batch"]
    return 3 * (shape["layers"] * layer + head) * microbatches


def parse_args(argv, family):
    p = argparse.ArgumentParser(description=family["usage"].splitlines()[0])
    p.add_argument("out_json")
    p.add_argument("--preset", choices=sorted(family["presets"]),
                   default=family["default_preset"])
    p.add_argument("--device", default="cuda")
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--warmup-steps", type=int, default=2)
    p.add_argument("--timed-steps", type=int, default=3)
    p.add_argument("--peak-tflops", type=float, default=989.4)
    p.add_argument("--time-limit-s", type=float, default=0, help="0: no limit")
    args = p.parse_args(argv)
    args.modes = [m for m in args.modes.split(",") if m]
    bad = [m for m in args.modes if m not in MODES]
    if bad:
        p.error(f"--modes: unknown mode(s) {', '.join(bad)} (choose from {', '.join(MODES)})")
    if args.warmup_steps < 0 or args.timed_steps < 1:
        p.error("--warmup-steps must be >= 0 and --timed-steps >= 1")
    if not args.peak_tflops > 0 or args.time_limit_s < 0:
        p.error("--peak-tflops must be > 0 and --time-limit-s >= 0")
    return args


def build_model(torch, shape, mode):
    """The GPT as a torch.nn.Module whose forward(tokens, targets) returns the mean loss."""
    import torch.utils.checkpoint  # not imported by `import torch` in every version

    nn, F = torch.nn, torch.nn.functional
    c, heads, seq = shape["hidden"], shape["heads"], shape["seq"]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(c), nn.LayerNorm(c)
            self.qkv, self.proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
            self.fc1, self.fc2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
            self.drop = nn.Dropout(DROPOUT)
            self.register_buffer("causal", torch.ones(seq, seq, dtype=torch.bool).tril(),
                                 persistent=False)

        def attention(self, x):
            b, t, _ = x.shape
            q, k, v = (y.view(b, t, heads, c // heads).transpose(1, 2)
                       for y in self.qkv(x).split(c, dim=2))
            if mode == "sdpa":
                y = F.scaled_dot_product_attention(q, k, v, dropout_p=DROPOUT if self.training
                                                   else 0.0, is_causal=True)
            else:
                scores = (q @ k.transpose(-2, -1)) / math.sqrt(c // heads)
                scores = scores.masked_fill(~self.causal[:t, :t], float("-inf"))
                y = F.dropout(F.softmax(scores, dim=-1), DROPOUT, self.training) @ v
            return self.drop(self.proj(y.transpose(1, 2).reshape(b, t, c)))

        def forward(self, x):
            x = x + self.attention(self.ln1(x))
            return x + self.drop(self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh")))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(padded_vocab(shape["vocab"]), c)
            self.wpe = nn.Embedding(seq, c)
            self.drop = nn.Dropout(DROPOUT)
            self.blocks = nn.ModuleList(Block() for _ in range(shape["layers"]))
            self.ln_f = nn.LayerNorm(c)

        def forward(self, tokens, targets):
            positions = torch.arange(tokens.shape[1], device=tokens.device)
            x = self.drop(self.wte(tokens) + self.wpe(positions))
            for block in self.blocks:
                if mode == "checkpoint":
                    x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
                else:
                    x = block(x)
            logits = self.ln_f(x) @ self.wte.weight.t()  # the tied head, padded vocabulary
            return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))

    model = Gpt()
    init_weights(torch, model, shape["layers"])
    return model


def init_weights(torch, model, layers):
    """The trainer's init: normal(0, 0.02), the output projections (proj, fc2) 0.02 / sqrt(2 L),
    zero biases, layernorm weight 1 and bias 0."""
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            torch.nn.init.zeros_(p)
        elif ".ln" in name or name.startswith("ln_f"):
            torch.nn.init.ones_(p)
        else:
            std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight", "fc2.weight")) \
                else 0.02
            torch.nn.init.normal_(p, 0.0, std)


def adamw(torch, model, device):
    """AdamW at the trainer's defaults; fused on CUDA where this torch has it."""
    params = list(model.parameters())
    kwargs = dict(lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    if device.type == "cuda":
        try:
            return torch.optim.AdamW(params, fused=True, **kwargs), "AdamW fused"
        except (TypeError, RuntimeError):
            pass
    return torch.optim.AdamW(params, **kwargs), "AdamW"


def synchronize(torch, device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_mode(torch, args, shape, mode, device, family):
    """One mode's measurement: a dict of its numbers, or of the error that stopped it."""
    result = {"mode": mode}
    if mode == "sdpa" and not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        result["error"] = f"torch {torch.__version__} has no scaled_dot_product_attention"
        return result
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    setup_start = time.perf_counter()
    try:
        if hasattr(torch.device, "__enter__"):  # torch >= 2.0: parameters made on the device
            with device:
                model = family["build"](torch, shape, mode)
        else:
            model = family["build"](torch, shape, mode).to(device)
        optimizer, result["optimizer"] = adamw(torch, model, device)
        result["parameters"] = sum(p.numel() for p in model.parameters())
        micro, seq = shape["micro_batch"], shape["seq"]
        batches = [torch.randint(0, shape["vocab"], (micro, seq + 1), device=device)
                   for _ in range(shape["global_batch"] // micro)]
        synchronize(torch, device)
        result["setup_s"] = time.perf_counter() - setup_start
        step_ms = []
        for _ in range(args.warmup_steps + args.timed_steps):
            start = time.perf_counter()
            for batch in batches:
                with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                    loss = model(batch[:, :-1], batch[:, 1:]) / len(batches)
                loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            synchronize(torch, device)
            step_ms.append((time.perf_counter() - start) * 1e3)
        result["step_ms"] = step_ms
        result["loss"] = float(loss) * len(batches)
    except Exception as e:  # recorded, so the next mode still runs (OOM is a RuntimeError)
        result["error"] = f"{type(e).__name__}: {e}".splitlines()[0][:500]
        result["out_of_memory"] = "out of memory" in str(e).lower()
        return result
    finally:
        if device.type == "cuda":
            result["peak_allocated_bytes"] = torch.cuda.max_memory_allocated(device)
    timed_s = sum(step_ms[args.warmup_steps:]) / 1e3
    tokens = args.timed_steps * shape["global_batch"] * shape["seq"]
    result["tokens_per_s"] = tokens / timed_s
    result["model_tflops"] = family["flops"](shape) * args.timed_steps / timed_s / 1e12
    result["mfu"] = result["model_tflops"] / args.peak_tflops
    return result


def write_json(path, report):
    """Rewrites PATH whole (a temporary file, then a rename)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


# What main() measures: a model family's presets, its module and FLOP count (llama_torch.py
# passes the Llama family's).
GPT = {"name": "gpt_torch", "usage": __doc__, "presets": PRESETS, "default_preset": "1.3b",
       "build": build_model, "flops": model_flops_per_step, "dropout": DROPOUT}


def main(argv, family=GPT):
    args = parse_args(argv, family)
    try:
        import torch
    except ImportError as e:
        print(f"{family['name']}: PyTorch is not installed ({e})", file=sys.stderr)
        return 2
    start = time.perf_counter()
    device = torch.device(args.device)
    shape = family["presets"][args.preset]
    report = {"framework": "pytorch", "torch": torch.__version__, "preset": args.preset,
              "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
              "model": shape, "padded_vocab": padded_vocab(shape["vocab"]),
              "dropout": family["dropout"], "precision": "bf16 autocast",
              "warmup_steps": args.warmup_steps, "timed_steps": args.timed_steps,
              "peak_tflops": args.peak_tflops,
              "model_flops_per_step": family["flops"](shape),
              "runs": [], "skipped_for_time": [], "complete": False}
    torch.manual_seed(0)
    for mode in args.modes:
        elapsed = time.perf_counter() - start
        if args.time_limit_s and elapsed >= args.time_limit_s:
            report["skipped_for_time"].append(mode)
            continue
        result = run_mode(torch, args, shape, mode, device, family)
        report["runs"].append(result)
        report["elapsed_s"] = time.perf_counter() - start
        write_json(args.out_json, report)
        mfu = result.get("mfu")
        print(f"{mode}: " + (result["error"] if "error" in result else
                             f"{result['tokens_per_s']:.0f} tok/s, MFU {100 * mfu:.1f}%, peak "
                             f"{result.get('peak_allocated_bytes', 0) / 2**30:.1f} GiB"),
              flush=True)
    report["complete"] = not report["skipped_for_time"]
    report["elapsed_s"] = time.perf_counter() - start
    write_json(args.out_json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
