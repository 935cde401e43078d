#!/usr/bin/env python3
"""How far a run's config travels: the longest chain of calls from `trainer train`
(trainer::commands::train) to a layer (a function of model/ that takes a model::LayerDims),
through functions that hold the config.

A function holds it when one of its parameters is a trainer::Config or a trainer::RunPlan (which
carries the config as run), when it is a member of trainer::Trainer (which keeps config_), or
when it is a lambda inside such a function. The call graph is clang's (the static analyzer's
debug.DumpCallGraph over every source of the build's compile_commands.json outside tests/ and
bench/); overloads share a node, and a function of an anonymous namespace is its file's own.

Prints the chain, one call a line with the function's room (trainer/<room>/, or the top folder
elsewhere), then its length in calls, the rooms it passes through (a room counted again each
time the chain comes back into it) and how many of its calls come back into a room it had left.
Usage: scripts/config_path.py BUILD_DIR [START]  (BUILD_DIR configured with
-DCMAKE_EXPORT_COMPILE_COMMANDS=ON; START, a function's qualified name, default
trainer::commands::train). Takes a few minutes on two cores."""
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys

build_dir = sys.argv[1]
start = sys.argv[2] if len(sys.argv) > 2 else "trainer::commands::train"
commands = json.load(open(os.path.join(build_dir, "compile_commands.json")))
root = os.path.commonpath([c["file"] for c in commands if "/trainer/" in c["file"]]).rsplit(
    "/trainer", 1)[0]
PROJECT = ("trainer::", "model::", "recompute::", "parallel::", "runtime::",
           "(anonymous namespace)::")
HOLDS = re.compile(r"\btrainer::(Config|RunPlan) &|^trainer::Trainer::")
LAYER = re.compile(r"\bmodel::LayerDims &")
ANALYZE = re.compile(r"^ANALYZE \(Syntax\): (\S+) (.+) : [0-9.]+ ms$")


def analyze(entry):
    """One source's call edges and the files and signatures of the functions it defines."""
    words = shlex.split(entry["command"]) if "command" in entry else entry["arguments"]
    keep = [w for w in words[1:] if w.startswith(("-I", "-D", "-std="))]
    run = subprocess.run(
        ["clang++", *keep, "-fopenmp", "--analyze", "-Xclang", "-analyzer-checker=debug.DumpCallGraph",
         "-Xclang", "-analyzer-display-progress", "-Xclang", "-analyzer-config", "-Xclang",
         "mode=shallow", entry["file"], "-o", os.devnull],
        capture_output=True, text=True, cwd=entry["directory"])
    return entry["file"], run.stdout + run.stderr


def node(name, source):
    """A function's node: its qualified name, and its file when it is an anonymous namespace's."""
    return f"{name}@{os.path.relpath(source, root)}" if "(anonymous namespace)" in name else name


def base_name(signature):
    """The qualified name before the parameter list: `a::(anonymous namespace)::f` of
    `a::(anonymous namespace)::f(int)`."""
    return re.match(r"(?:\(anonymous (?:namespace|class)\)|[^(])+", signature).group(0)


def names(listing):
    """The names of a call graph line's callee list: split at spaces outside parentheses (a
    lambda's name holds its enclosing function's signature)."""
    found, depth, word = [], 0, ""
    for ch in listing + " ":
        depth += (ch == "(") - (ch == ")")
        if ch == " " and depth == 0:
            found += [word] if word else []
            word = ""
        else:
            word += ch
    return found


def room(path):
    parts = os.path.relpath(path, root).split("/")
    return f"trainer/{parts[1]}" if parts[0] == "trainer" and len(parts) > 2 else parts[0]


sources = [c for c in commands if not re.search(r"/(tests|bench|_deps)/", c["file"])]
calls, files, holds, takes_layer = {}, {}, set(), set()
with concurrent.futures.ThreadPoolExecutor(os.cpu_count()) as pool:
    for source, text in pool.map(analyze, sources):
        for line in text.splitlines():
            line = line.strip()
            match = ANALYZE.match(line)
            if match:
                path, signature = match.groups()
                name = node(base_name(signature) if "::operator()" not in signature
                            else signature.rsplit("(", 1)[0], source)
                if path.startswith(root) and "/_deps/" not in path:
                    files.setdefault(name, path)
                if HOLDS.search(signature):
                    holds.add(name)
                if LAYER.search(signature):
                    takes_layer.add(name)
            elif line.startswith("Function: ") and " calls:" in line:
                caller, callees = line[len("Function: "):].split(" calls:", 1)
                if caller.startswith(PROJECT):
                    edges = calls.setdefault(node(caller, source), set())
                    edges.update(node(c, source) for c in names(callees) if c.startswith(PROJECT))

# Constructor calls, which clang's call graph leaves out: a class of the project whose
# constructor is defined, named in a function's body as a declaration (`Trainer t(...)`,
# `Trainer t{...}`), a temporary (`Trainer(...)`) or make_unique/emplace's type argument.
tags = subprocess.run(["ctags", "--output-format=json", "--languages=C++", "--kinds-C++=f",
                       "--fields=+neS", "-R", "-o", "-", "trainer", "model", "recompute",
                       "parallel", "runtime"], cwd=root, capture_output=True, text=True).stdout
definitions = [json.loads(t) for t in tags.splitlines()]
definitions = [d for d in definitions if d.get("scopeKind") != "function" and "end" in d]
constructors = {}
for d in definitions:
    scope = d.get("scope", "")
    if scope.endswith("::" + d["name"]) and d.get("scopeKind") in ("class", "struct"):
        constructors.setdefault(d["name"], set()).add(f"{scope}::{d['name']}")
CONSTRUCT = re.compile(r"\b(\w+)(?:\s*<[^<>;]*>)?\s+\w+\s*[({]|\b(\w+)\s*[({]|"
                       r"(?:make_unique|make_shared|emplace)<(?:\w+::)*(\w+)>")
for d in definitions:
    scope = re.sub(r"__anon\w+", "(anonymous namespace)", d.get("scope", ""))
    caller = node(f"{scope}::{d['name']}" if scope else d["name"], os.path.join(root, d["path"]))
    if caller not in calls:
        continue
    lines = open(os.path.join(root, d["path"]), encoding="utf-8").read().splitlines()
    body = "\n".join(lines[d["line"] - 1:d["end"]])
    for match in CONSTRUCT.finditer(body):
        for cls in match.groups():
            calls[caller].update(constructors.get(cls, ()))

# A lambda's call graph name carries its enclosing function's signature, and its file is that
# function's.
holds |= {n for n in calls if HOLDS.search(n)}
for name in calls:
    if name not in files and "(" in name:
        enclosing = base_name(name)
        if "@" in name:
            enclosing = node(enclosing, os.path.join(root, name.split("@")[1]))
        if enclosing in files:
            files[name] = files[enclosing]
layers = {n for n, path in files.items() if room(path) == "model" and n in takes_layer}
best = {}


def longest(name, seen):
    """The longest chain from `name` (which holds the config) to a layer. Memoized without
    `seen`, so a cycle can slip in: the caller asserts the chain visits no function twice."""
    if name in best:
        return best[name]
    chain = None
    for callee in sorted(calls.get(name, ())):
        if callee in seen:
            continue
        if callee in layers:
            tail = [callee]
        elif callee in holds and callee in files:
            rest = longest(callee, seen | {callee})
            tail = [callee, *rest] if rest else None
        else:
            tail = None
        if tail and (chain is None or len(tail) > len(chain)):
            chain = tail
    best[name] = chain
    return chain


chain = [start, *(longest(start, {start}) or [])]
assert len(set(chain)) == len(chain), "the call graph's cycles made a chain visit a function twice"
if len(chain) == 1:
    sys.exit(f"no chain from {start} to a layer (is {start} in the build's sources?)")
rooms, left, returns = [], set(), 0
for name in chain:
    here = room(files.get(name, "?/?"))
    print(f"{here:18} {name.split('@')[0]}")
    if rooms and rooms[-1] != here:
        left.add(rooms[-1])
        returns += here in left
    if not rooms or rooms[-1] != here:
        rooms.append(here)
print(f"{len(chain) - 1} calls, through {len(rooms)} rooms ({len(set(rooms))} distinct), "
      f"{returns} of them back into a room it had left")
