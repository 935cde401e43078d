#!/usr/bin/env python3
# Compares the documents of a Megatron indexed dataset (PREFIX.bin/.idx, as prepare-data wrote
# them) with a reference's ids: EXPECTED.json's member NAME, a list of id lists, one per document.
# Prints one line per differing document and a summary; exits 1 on any difference.
# Usage: compare_ids.py PREFIX EXPECTED.json NAME [--skip I,J]   (documents the reference gets wrong)
import json
import struct
import sys


def read_dataset(prefix):
    with open(prefix + ".idx", "rb") as index:
        data = index.read()
    assert data[:9] == b"MMIDIDX\x00\x00", "bad magic"
    dtype_code = data[17]
    (count,) = struct.unpack_from("<q", data, 18)
    lengths = struct.unpack_from(f"<{count}i", data, 34)
    pointers = struct.unpack_from(f"<{count}q", data, 34 + 4 * count)
    item, fmt = (2, "H") if dtype_code == 8 else (4, "i")
    with open(prefix + ".bin", "rb") as binary:
        tokens = binary.read()
    return [list(struct.unpack_from(f"<{n}{fmt}", tokens, p)) for n, p in zip(lengths, pointers)]


def main():
    prefix, expected_path, name = sys.argv[1:4]
    skip = set()
    if len(sys.argv) > 5 and sys.argv[4] == "--skip":
        skip = {int(i) for i in sys.argv[5].split(",") if i}
    expected = json.load(open(expected_path))[name]
    ours = read_dataset(prefix)
    if len(ours) != len(expected):
        print(f"{name}: {len(ours)} documents, the reference has {len(expected)}")
        return 1
    compared_documents = compared_ids = differing = 0
    for i, (mine, theirs) in enumerate(zip(ours, expected)):
        if i in skip:
            continue
        compared_documents += 1
        compared_ids += len(theirs)
        if mine != theirs:
            differing += 1
            first = next((k for k, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
            print(f"{name}: document {i} differs at id {first}: ours {mine[first:first + 8]}, "
                  f"reference {theirs[first:first + 8]}")
    print(f"{name}: {compared_documents} documents, {compared_ids} ids compared, "
          f"{differing} documents differ" + (f" (skipped {sorted(skip)})" if skip else ""))
    return 1 if differing else 0


sys.exit(main())
