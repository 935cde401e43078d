#!/usr/bin/env python3
"""The CUDA kernels' compiled resources, without a GPU: compiles the backend's sources for one
architecture with ptxas's report (-Xptxas -v) and prints, per kernel, its registers, stack frame,
spilled bytes, static shared memory and, for the flash attention kernels (128 threads), the
blocks that their registers let one multiprocessor hold. With --check it fails when a kernel instantiated for bf16 (the GPU's speed
path) spills registers to local memory.

  scripts/kernel_resources.py [--nvcc PATH] [--arch 90] [--jobs N] [--check] [SOURCE.cu ...]

Sources default to runtime/kernels/cuda/*.cu. The fp32 kernels are the precision reference and
are reported but not checked."""
import argparse
import concurrent.futures
import glob
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REGISTERS_PER_SM = 65536  # sm_80 and sm_90
MAX_BLOCKS_PER_SM = 32
ENTRY = re.compile(r"Compiling entry function '([^']+)' for 'sm_(\d+)'")
FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"Used (\d+) registers(?:.*?, (\d+) bytes smem)?")
FLASH_THREADS = 128  # the flash kernels' __launch_bounds__
FLASH_KERNELS = re.compile(r"^void flash_(forward|dq|dkdv)_kernel<")


def compile_report(nvcc, arch, source):
    """ptxas's -v lines for `source`, or raises with the compiler's output."""
    with tempfile.TemporaryDirectory() as tmp:
        command = [nvcc, "-I" + ROOT, "-O3", "-DNDEBUG", "-std=c++17", "--expt-relaxed-constexpr",
                   "--generate-code=arch=compute_%s,code=[sm_%s]" % (arch, arch), "-Xptxas", "-v",
                   "-x", "cu", "-c", source, "-o", os.path.join(tmp, "kernel.o")]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError("%s failed:\n%s%s" % (" ".join(command), done.stdout, done.stderr))
        return done.stderr


def demangle(names):
    done = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
    return done.stdout.splitlines() if done.returncode == 0 else names


def short_name(name):
    name = re.sub(r"runtime::cuda::(\(anonymous namespace\)::)?(device::flash::)?", "", name)
    return name.replace("__nv_bfloat16", "bf16")


def parse(report):
    """[(mangled name, registers, stack, spill stores, spill loads, smem)] of one report."""
    kernels, current = [], None
    for line in report.splitlines():
        entry = ENTRY.search(line)
        if entry:
            current = {"name": entry.group(1)}
            kernels.append(current)
            continue
        if current is None:
            continue
        frame = FRAME.search(line)
        if frame:
            current["stack"], current["spill_stores"], current["spill_loads"] = map(
                int, frame.groups())
        used = USED.search(line)
        if used:
            current["registers"] = int(used.group(1))
            current["smem"] = int(used.group(2) or 0)
    return kernels


def blocks_per_sm(kernel, threads):
    """Blocks of `threads` threads that the kernel's registers let one multiprocessor hold."""
    per_warp = -(-kernel["registers"] * 32 // 256) * 256  # allocated per warp, 256 at a time
    warps = -(-threads // 32)
    return min(MAX_BLOCKS_PER_SM, REGISTERS_PER_SM // (per_warp * warps))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nvcc", default="nvcc")
    parser.add_argument("--arch", default="90")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("sources", nargs="*")
    args = parser.parse_args()
    sources = args.sources or sorted(glob.glob(os.path.join(ROOT, "runtime/kernels/cuda/*.cu")))
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        reports = list(pool.map(lambda s: compile_report(args.nvcc, args.arch, s), sources))
    failures = 0
    print("%-16s %5s %6s %6s %6s %7s  %s" % ("file", "regs", "stack", "spill", "smem", "blk/SM",
                                              "kernel (sm_%s)" % args.arch))
    for source, report in zip(sources, reports):
        kernels = parse(report)
        file = os.path.basename(source)
        for kernel, name in zip(kernels, demangle([k["name"] for k in kernels])):
            name = short_name(name)
            spilled = kernel.get("spill_stores", 0) + kernel.get("spill_loads", 0)
            blocks = (str(blocks_per_sm(kernel, FLASH_THREADS)) if FLASH_KERNELS.match(name)
                      else "-")
            print("%-16s %5d %6d %6d %6d %7s  %s" % (
                file.split(".")[0], kernel.get("registers", 0), kernel.get("stack", 0), spilled,
                kernel.get("smem", 0), blocks, name[:100]))
            if args.check and spilled and "bf16" in name:
                print("  ^ %s: a bf16 kernel spills %d bytes (stores + loads)" % (file, spilled))
                failures += 1
    if failures:
        print("%d bf16 kernel(s) spill registers" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
