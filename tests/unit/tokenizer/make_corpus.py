#!/usr/bin/env python3
# Writes data/corpus.jsonl, the tokenizer fixture: documents holding what byte-level BPE and its
# references disagree on when done wrong (scripts, digits, emoji and ZWJ, combining marks, runs of
# white space, contractions in every case, special-token text, long pieces, JSON escapes).
import json
import os

documents = [
    "Hello world! This is a simple sentence.",
    " Hello world, with a leading space.",
    "I'm sure you'll see they've done it. He'd say it's John's, we're fine.",
    "DON'T WON'T I'M YOU'RE WE'VE HE'D SHE'LL IT'S You'Re We'Ve I'M 'S 's 'T 'LL 'Ll 'lL 're 'rE",
    "Привет, мир! Ελληνικά γράμματα. Ünïcödé façade naïve coöperate Straße ǅemal ǈubljana",
    "日本語のテキストと漢字。中文文本，标点！ 한국어 문장입니다. ภาษาไทยไม่มีช่องว่าง",
    "العربية نص مع أرقام ١٢٣٤٥٦٧٨٩٠ و עברית טקסט, हिन्दी देवनागरी ०१२३४५६, বাংলা ১২৩",
    "Numbers: 1234567890 12.5% 3,000,000 0.000001 ½ ² ³ Ⅻ ① 𝟙𝟚𝟛 ٣.١٤ 2024-01-31T12:34:56Z",
    "Emoji: 👋🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🇯🇵🇫🇷 a😀b 😀😀😀 🧑🏿‍🚀 #️⃣ 1️⃣",
    "Combining: e\u0301 a\u0308 n\u0303 vs é ä ñ; Z̷̢͎a̴l̶g̵o̸ t̶e̷x̵t; Å Å; ḁ̴̛; \u0301leading mark",
    "Spaces:  two   three    four\t\ttabs\n\nnewlines\n\n\n three\r\nCRLF \r\n mixed  \n  \n",
    "   leading spaces and trailing spaces   ",
    "\n\n\nonly newlines first",
    "Unicode spaces: a\u00a0b\u2003c\u3000d\u2009e\u202ff\u205fg\u1680h\u2028i\u2029j \u00a0 k\u200bl",
    "Special text: <|endoftext|> in the middle <|endoftext|>and<|fim_prefix|><|endofprompt|> </s> <s>",
    "def square(x):\n    return x ** 2  # comment\n\n\tif x:\n\t\tpass\n\nprint(f\"{square(3)=}\")\n",
    "{\"json\": [1, 2, 3], \"nested\": {\"a\": null}} <html><body class='x'>&amp; &#169;</body></html>",
    "Long: " + " " * 120 + "x" + "-" * 90 + "y" + "abcdefghij" * 20 + " " + "9" * 70 + "\t" * 60,
    "Mixed:hello,world;foo.bar!baz?qux...---___===+++***///\\\\|||@@@###$$$%%%^^^&&&",
    "URLs https://example.com/path?query=1&b=2#frag and mail a.b@example.org, C:\\Windows\\path",
    "Punctuation runs: !!!??? ... …… —– «quotes» „quotes“ 'single' \"double\" (paren) [bracket]",
    "",
    " ",
    "\t",
    "x",
    "Mathematical: ∀x∈ℝ, ∃y: x² + y² = z²; ∑_{i=1}^{n} i = n(n+1)/2; ≤ ≥ ≠ ≈ ∞ √ ∫",
    "Case: HELLO Hello hello hELLO ÀÉÎÕÜ àéîõü ΑΒΓ αβγ ÅNGSTRÖM",
    "Astral: 𐍈𐌰𐌻 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𓀀𓀁 𠀀𠀁 🀄 ꙮ",
    "Repeated: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa ababababababababab",
    "Edge spaces: a\u0085b \u0085 c\u180ed \u180e e\ufefff \ufeff g\u000bh\u000ci \u001c j\u001fk",
    "Long s and Kelvin: it'\u017f '\u017f \u212a 'K",
    "Tools: <tool_call>{\"name\": \"f\"}</tool_call><tool_call> Hello world, hello, cello world",
    "The end.\n",
]

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "data", "corpus.jsonl"), "w", encoding="utf-8", newline="\n") as out:
    for index, text in enumerate(documents):
        # Every other line escapes all non-ASCII (astral characters as surrogate pairs).
        out.write(json.dumps({"id": index, "text": text, "meta": {"n": index}},
                             ensure_ascii=(index % 2 == 1)) + "\n")
print(f"wrote {len(documents)} documents")
