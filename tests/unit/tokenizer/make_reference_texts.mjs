// Decodes the committed reference ids (data/expected_ids_small.json) with the reference
// tokenizers: Hugging Face tokenizers' decode (ByteLevel decoder, special tokens kept) and
// tiktoken's decode, each document's ids whole and without their last id (which may cut a UTF-8
// character: both references then give U+FFFD), and writes data/expected_texts_small.json.
// Usage: node make_reference_texts.mjs NODE_MODULES [OUT.json]
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const [modulesDir, outFile] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(modulesDir), 'index.js'));
const { Tokenizer } = require('@anush008/tokenizers');
const { Tiktoken } = require('tiktoken/lite');
const data = path.join(path.dirname(fileURLToPath(import.meta.url)), 'data');
const ids = JSON.parse(fs.readFileSync(path.join(data, 'expected_ids_small.json'), 'utf8'));

const texts = {};
async function hfTexts(member, tokenizerFile) {
  const tokenizer = Tokenizer.fromFile(path.join(data, tokenizerFile));
  const decode = (list) => tokenizer.decode(list, false);
  texts[member] = await Promise.all(ids[member].map(decode));
  texts[`${member}_truncated`] = await Promise.all(ids[member].map((list) => decode(list.slice(0, -1))));
}
await hfTexts('small_gpt2', 'small_gpt2_tokenizer.json');
await hfTexts('small_gpt2_hf_prefix_space', 'small_gpt2_tokenizer.json');
await hfTexts('small_qwen2_style_hf', 'small_qwen2_style_tokenizer.json');
await hfTexts('small_llama3_style_hf', 'small_llama3_style_tokenizer.json');

// tiktoken over the committed ranks (ranks 0.. in order: the lite format's one line).
const ranks = fs.readFileSync(path.join(data, 'small_cl100k.tiktoken'), 'utf8').split('\n').filter(Boolean)
  .map((line) => line.split(' ')).sort((a, b) => Number(a[1]) - Number(b[1]));
ranks.forEach(([, rank], i) => { if (Number(rank) !== i) throw new Error(`rank ${rank} at ${i}`); });
const encoder = new Tiktoken('! 0 ' + ranks.map(([token]) => token).join(' '), {}, "'s");
const utf8 = new TextDecoder('utf-8');
const member = 'small_cl100k_tiktoken';
texts[member] = ids[member].map((list) => utf8.decode(encoder.decode(Uint32Array.from(list))));
texts[`${member}_truncated`] = ids[member].map((list) => utf8.decode(encoder.decode(Uint32Array.from(list.slice(0, -1)))));
encoder.free();

fs.writeFileSync(outFile ?? path.join(data, 'expected_texts_small.json'), JSON.stringify(texts) + '\n');
console.log(`reference texts: ${Object.keys(texts).join(', ')}`);
