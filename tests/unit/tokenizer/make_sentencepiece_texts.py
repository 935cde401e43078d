#!/usr/bin/env python3
# Decodes the committed SentencePiece reference ids (data/expected_ids_sentencepiece.json) with
# python3-sentencepiece and data/spm_tiny.model, each document's ids whole and without their last
# id, and writes data/expected_texts_sentencepiece.json (or OUT.json).
# Usage: make_sentencepiece_texts.py [OUT.json]
import json
import os
import sys

import sentencepiece

data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
processor = sentencepiece.SentencePieceProcessor(model_file=os.path.join(data, "spm_tiny.model"))
ids = json.load(open(os.path.join(data, "expected_ids_sentencepiece.json")))["sentencepiece"]
texts = {"sentencepiece": [processor.decode(i) for i in ids],
         "sentencepiece_truncated": [processor.decode(i[:-1]) for i in ids]}
out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(data, "expected_texts_sentencepiece.json")
with open(out_path, "w", encoding="utf-8") as out:
    json.dump(texts, out)
    out.write("\n")
print(f"sentencepiece texts: {len(ids)} documents")
