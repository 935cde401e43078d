#!/usr/bin/env python3
# Trains a small unigram SentencePiece model (700 pieces, byte fallback) on the fixture corpus,
# deterministically (one thread, input order kept), and writes the ids python3-sentencepiece gives
# each document. Default: data/spm_tiny.model with identity normalization (small enough to commit)
# and data/expected_ids_sentencepiece.json.
# Usage: make_sentencepiece_fixture.py [--normalization nmt_nfkc] [--out DIR]
import argparse
import io
import json
import os

import sentencepiece

here = os.path.dirname(os.path.abspath(__file__))
parser = argparse.ArgumentParser()
parser.add_argument("--normalization", default="identity")
parser.add_argument("--out", default=os.path.join(here, "data"))
args = parser.parse_args()
documents = [json.loads(line)["text"]
             for line in open(os.path.join(here, "data", "corpus.jsonl"), encoding="utf-8") if line.strip()]
model = io.BytesIO()
sentencepiece.SentencePieceTrainer.train(
    sentence_iterator=iter([line for text in documents for line in text.split("\n") if line.strip()]),
    model_writer=model, vocab_size=700, model_type="unigram", byte_fallback=True,
    character_coverage=0.9995, num_threads=1, hard_vocab_limit=False, shuffle_input_sentence=False,
    normalization_rule_name=args.normalization, minloglevel=2)
os.makedirs(args.out, exist_ok=True)
model_path = os.path.join(args.out, "spm_tiny.model")
with open(model_path, "wb") as out:
    out.write(model.getvalue())
processor = sentencepiece.SentencePieceProcessor(model_file=model_path)
expected = {"sentencepiece": [processor.encode(text) for text in documents],
            "eos_id": processor.eos_id(), "vocab_size": processor.get_piece_size()}
with open(os.path.join(args.out, "expected_ids_sentencepiece.json"), "w") as out:
    json.dump(expected, out)
    out.write("\n")
print(f"sentencepiece ({args.normalization}): {len(documents)} documents, vocabulary "
      f"{expected['vocab_size']}, eos {expected['eos_id']}")
