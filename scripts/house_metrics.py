#!/usr/bin/env python3
"""The trainer's shape, for docs/architecture.md's rooms: per room of trainer/ its files and the
include arrows that cross into it and out of it (one per #include line of a file in one room
naming a header of another), and the Trainer class's member functions, data members and project
includes (trainer/run/train.h). Usage: scripts/house_metrics.py [REPO_ROOT] [TRAIN_H]."""
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
train_h = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "trainer/run/train.h")


def room_of(path):
    parts = path.split("/")
    if parts[0] != "trainer":
        return None
    return parts[1] if len(parts) > 2 else "(top)"


files, arrows_in, arrows_out = {}, {}, {}
for folder, _, names in os.walk(os.path.join(root, "trainer")):
    for name in names:
        if not name.endswith((".h", ".cpp")):
            continue
        path = os.path.relpath(os.path.join(folder, name), root)
        room = room_of(path)
        files[room] = files.get(room, 0) + 1
        for line in open(os.path.join(root, path), encoding="utf-8"):
            match = re.match(r'#include "(trainer/[^"]+)"', line)
            if not match or room_of(match.group(1)) == room:
                continue
            arrows_out[room] = arrows_out.get(room, 0) + 1
            target = room_of(match.group(1))
            arrows_in[target] = arrows_in.get(target, 0) + 1

print(f"{'room':12} {'files':>5} {'in':>4} {'out':>4}")
for room in sorted(files):
    print(f"{room:12} {files[room]:5} {arrows_in.get(room, 0):4} {arrows_out.get(room, 0):4}")

# The Trainer's declarations: split the class body (comments dropped) at the semicolons and
# closing braces of depth 0; a declaration naming `name(` before any `=` is a member function,
# one ending in a `name_` (with or without an initialiser) a data member.
text = open(train_h, encoding="utf-8").read()
start = text.index("class Trainer {")
body = re.sub(r"//[^\n]*", "", text[start + len("class Trainer {"):text.index("\n};", start)])
declarations, current, depth = [], "", 0
for ch in body:
    if ch == "{":
        depth += 1
    elif ch == "}":
        depth -= 1
        if depth == 0:
            declarations.append(current)
            current = ""
            continue
    if ch == ";" and depth == 0:
        declarations.append(current)
        current = ""
        continue
    if depth == 0:
        current += ch
functions = data = 0
for declaration in declarations:
    declaration = " ".join(declaration.replace("public:", "").replace("private:", "").split())
    if not declaration:
        continue
    head = declaration.split("=")[0]
    if re.search(r"\b\w+_\s*(\{.*)?$", head.strip()):
        data += 1
    elif re.search(r"(~?\w+|operator=)\s*\(", head):
        functions += 1
includes = len(re.findall(r'^#include "', text, re.M))
print(f"Trainer ({os.path.relpath(train_h, root)}): {functions} member functions, {data} data "
      f"members, {includes} project includes")
