#!/usr/bin/env python3
# Writes a JSON Lines corpus of generated text for tokenizer benchmarks and tests: documents of
# Zipf-distributed pseudo-English words (paragraphs, punctuation, contractions, numbers), with
# code, URLs and the multilingual and emoji documents of the tokenizer fixture mixed in.
# Deterministic in its seed. Usage: make_text_corpus.py OUT.jsonl MEGABYTES [SEED]
import json
import os
import random
import sys

out_path, megabytes = sys.argv[1], float(sys.argv[2])
rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1234)
fixture = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "unit", "tokenizer",
                       "data", "corpus.jsonl")
extras = [json.loads(line)["text"] for line in open(fixture, encoding="utf-8") if line.strip()]

onsets = ["", "b", "c", "d", "f", "g", "h", "l", "m", "n", "p", "r", "s", "t", "v", "w", "st", "tr",
          "ch", "th", "sh", "pl", "br", "gr", "cl", "sp"]
vowels = ["a", "e", "i", "o", "u", "ea", "ou", "io", "ai", "y"]
codas = ["", "", "n", "r", "s", "t", "l", "nd", "st", "ng", "ck", "rt", "m", "x"]
common = ("the of and to in is was that for it with as his on be at by had are but from or have an "
          "they which one you were all we her she there would their will when who him been has more "
          "if no out so said what up its about than into them can only other new some could time").split()
words = common + sorted({"".join(rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas)
                                 for _ in range(rng.choice([1, 1, 1, 2, 2, 3])))
                         for _ in range(30000)})
cumulative_weights = []
total = 0.0
for rank in range(len(words)):
    total += 1.0 / (rank + 1) ** 1.05
    cumulative_weights.append(total)
contractions = ["'s", "'t", "'re", "'ve", "'ll", "'d", "'m"]


def sentence():
    picked = rng.choices(words, cum_weights=cumulative_weights, k=rng.randint(4, 24))
    picked[0] = picked[0].capitalize()
    text = []
    for word in picked:
        roll = rng.random()
        if roll < 0.03:
            word += rng.choice(contractions)
        elif roll < 0.06:
            word = str(rng.randint(0, 10 ** rng.randint(1, 6)))
        elif roll < 0.08:
            word = word.upper()
        elif roll < 0.12:
            word += ","
        text.append(word)
    return " ".join(text) + rng.choice([".", ".", ".", "?", "!", ":", ";", "..."])


def document():
    roll = rng.random()
    if roll < 0.05:
        return rng.choice(extras)
    if roll < 0.10:
        name = rng.choice(words)
        return (f"def {name}(x, y={rng.randint(0, 99)}):\n    \"\"\"{sentence()}\"\"\"\n"
                f"    if x > y:\n        return x * {rng.random():.4f}\n    return [i ** 2 for i in range(y)]\n")
    paragraphs = []
    for _ in range(rng.randint(1, 6)):
        paragraphs.append(" ".join(sentence() for _ in range(rng.randint(1, 8))))
    if rng.random() < 0.2:
        paragraphs.append(f"See https://www.{rng.choice(words)}.org/{rng.choice(words)}?id={rng.randint(1, 9999)}")
    return "\n\n".join(paragraphs)


target = int(megabytes * 1e6)
written = 0
with open(out_path, "w", encoding="utf-8") as out:
    index = 0
    while written < target:
        line = json.dumps({"id": index, "text": document()}, ensure_ascii=False) + "\n"
        out.write(line)
        written += len(line.encode("utf-8"))
        index += 1
print(f"{out_path}: {index} documents, {written / 1e6:.1f} MB")
