#!/usr/bin/env python3
# Writes a JSON Lines corpus of random text for the live reference comparison: pieces of many
# scripts, marks, emoji, symbols and digits mixed with contractions in every case, runs of
# white space (the exotic kinds too: NEL, NBSP, U+180E, BOM, line/paragraph separators) and
# special-token text. Deterministic in its seed. Usage: make_fuzz_corpus.py OUT.jsonl [DOCUMENTS]
import json
import random
import sys

out_path = sys.argv[1]
documents = int(sys.argv[2]) if len(sys.argv) > 2 else 400
rng = random.Random(5)
ranges = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF),
          (0x590, 0x5FF), (0x600, 0x6FF), (0x900, 0x97F), (0x980, 0x9FF), (0xE00, 0xE7F),
          (0x1100, 0x11FF), (0x3040, 0x30FF), (0x4E00, 0x4E80), (0xAC00, 0xAC80),
          (0x1F300, 0x1F64F), (0x1F900, 0x1F9FF), (0x2000, 0x206F), (0x2100, 0x214F),
          (0x2150, 0x218F), (0x2460, 0x24FF), (0xFF00, 0xFFEF), (0x1D400, 0x1D7FF),
          (0x10400, 0x1044F)]
pieces = ["'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'ve", "'VE", "'m", "'M", "'ll", "'LL", "'d",
          "'D", "'", "\n", "\r\n", "\t", " ", "  ", "   ", "\u00a0", "\u3000", "\u2003", "\u200d",
          "\ufe0f", "0", "123", "4567", "<|endoftext|>", "\u0085", "\u180e", "\ufeff", "\u2028",
          "\u2029", "\u000b", "\u000c", "\u001c", "\u200b", " \u0085"]
with open(out_path, "w", encoding="utf-8") as out:
    for _ in range(documents):
        parts = []
        for _ in range(rng.randint(1, 60)):
            if rng.random() < 0.35:
                parts.append(rng.choice(pieces))
            else:
                low, high = rng.choice(ranges)
                parts.append("".join(chr(rng.randint(low, high)) for _ in range(rng.randint(1, 6))))
        out.write(json.dumps({"text": "".join(parts)}) + "\n")
