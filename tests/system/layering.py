"""The include rules of docs/architecture.md, "Libraries and layering", read from the sources.

Each library includes only the libraries before it: runtime <- parallel_core <- model <- recompute
<- parallel_pipeline <- trainer, and inside trainer/ each room only the rooms its CMake library
links. The CUDA backend's headers are included only by the backend, the NCCL communicator and the
device setup of trainer/commands; mpi.h only by parallel/core's MPI files; model/ includes no
kernel header and calls no collective (only parallel/core's mappings and cross entropy do). Usage: layering.py REPO_ROOT. Prints every include that breaks a rule, exits 1.
"""
import os
import re
import sys

root = sys.argv[1]

# The layers, bottom first, by folder.
LAYERS = ["runtime", "parallel/core", "model", "recompute", "parallel/pipeline", "trainer"]

# The trainer's rooms and the rooms each may include (besides itself and every layer below the
# trainer). main.cpp, at the top, may include any.
ROOMS = {
    "util": set(),
    "config": {"util"},
    "tokenizer": {"util"},
    "data": {"util", "tokenizer"},
    "export": {"util"},
    "checkpoint": {"util", "export"},
    "generate": {"util", "config", "tokenizer", "data", "export", "checkpoint"},
    "engine": {"util", "config", "tokenizer", "data"},
    "observe": {"util"},
    "planning": {"util", "config", "tokenizer", "data", "engine"},
}
ROOMS["run"] = set(ROOMS) | {"observe", "planning"}
ROOMS["commands"] = ROOMS["run"] | {"run"}

CUDA_INCLUDERS = ("runtime/kernels/cuda/", "parallel/core/nccl_communicator.cpp",
                  "trainer/commands/device_setup.cpp")
MPI_INCLUDERS = ("parallel/core/process_groups.cpp", "parallel/core/mpi_communicator.cpp",
                 "parallel/core/mpi_check.h")
COLLECTIVE = re.compile(r"(->|\.)(all_reduce\w*|all_gather\w*|reduce_scatter\w*|broadcast|send|"
                        r"recv|barrier)\(")
CUDA_HEADER = re.compile(r'#include [<"](runtime/kernels/cuda/|cuda[a-zA-Z_]*\.h|cublas|nccl\.h)')


def layer_of(path):
    for index in reversed(range(len(LAYERS))):
        if path.startswith(LAYERS[index] + "/"):
            return index
    return None


def room_of(path):
    parts = path.split("/")
    return parts[1] if parts[0] == "trainer" and len(parts) > 2 else None


problems = []
for layer in LAYERS:
    for folder, _, files in os.walk(os.path.join(root, layer)):
        for name in files:
            if not name.endswith((".h", ".cpp", ".cu", ".cuh")):
                continue
            path = os.path.relpath(os.path.join(folder, name), root)
            if layer_of(path) != LAYERS.index(layer):
                continue  # parallel/pipeline under parallel/: walked as its own layer
            if path.startswith("trainer/") and room_of(path) is None and path != "trainer/main.cpp":
                problems.append(f"{path}: sits in no room (trainer/ holds main.cpp and the rooms)")
            text = open(os.path.join(root, path), encoding="utf-8").read()
            for line_number, line in enumerate(text.splitlines(), 1):
                where = f"{path}:{line_number}: {line.strip()}"
                if CUDA_HEADER.match(line) and not path.startswith(CUDA_INCLUDERS):
                    problems.append(f"{where}: a CUDA backend header outside {CUDA_INCLUDERS}")
                if path.startswith("model/") and COLLECTIVE.search(line):
                    problems.append(f"{where}: model/ calls a collective (parallel/core's "
                                    "mappings and cross_entropy.h call them)")
                if line.startswith("#include <mpi.h>") and path not in MPI_INCLUDERS:
                    problems.append(f"{where}: mpi.h outside {MPI_INCLUDERS}")
                match = re.match(r'#include "([^"]+)"', line)
                if not match:
                    continue
                header = match.group(1)
                if path.startswith("model/") and header.startswith("runtime/kernels/"):
                    problems.append(f"{where}: model/ includes a kernel header")
                target = layer_of(header)
                if target is not None and target > layer_of(path):
                    problems.append(f"{where}: {LAYERS[layer_of(path)]} includes the later "
                                    f"{LAYERS[target]}")
                mine, theirs = room_of(path), room_of(header)
                if mine and theirs and theirs != mine and theirs not in ROOMS.get(mine, set()):
                    problems.append(f"{where}: trainer/{mine} may include only "
                                    f"{sorted(ROOMS.get(mine, set()))}")

rooms_on_disk = {d for d in os.listdir(os.path.join(root, "trainer"))
                 if os.path.isdir(os.path.join(root, "trainer", d))}
for room in sorted(rooms_on_disk ^ set(ROOMS)):
    problems.append(f"trainer/{room}: a room on disk or in ROOMS but not both")

for problem in sorted(set(problems)):
    print(problem)
print("FAIL" if problems else "PASS", f"({len(set(problems))} broken rules)")
sys.exit(1 if problems else 0)
