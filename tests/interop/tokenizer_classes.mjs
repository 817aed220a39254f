// Asks the Rust reference (tokenizers, whose patterns run on Oniguruma) which code points each one-character
// pattern matches, for the C++ tokenizer's pattern translation test.
// usage: node tokenizer_classes.mjs OUT.json PATTERN...
//   OUT.json receives {PATTERN: [[first, last], ...]}: the matching code points as inclusive ranges.
import { writeFileSync } from "node:fs";
import rust from "tokenizers";

const [outPath, ...patterns] = process.argv.slice(2);

// A Split pre-tokenizer that keeps only the matches (invert + Removed): each match is one piece.
function matchingCodePoints(pattern) {
  const json = {
    version: "1.0", added_tokens: [], normalizer: null, post_processor: null, decoder: null,
    pre_tokenizer: { type: "Split", pattern: { Regex: pattern }, behavior: "Removed", invert: true },
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
             fuse_unk: false, byte_fallback: false, vocab: { a: 0 }, merges: [] },
  };
  const preTokenizer = rust.Tokenizer.fromString(JSON.stringify(json)).getPreTokenizer();
  const ranges = [];
  for (let base = 0; base < 0x110000; base += 0x10000) {
    let text = "";
    for (let c = base; c < base + 0x10000; ++c) {
      if (c < 0xd800 || c > 0xdfff) text += String.fromCodePoint(c);
    }
    for (const [piece] of preTokenizer.preTokenizeString(text)) {
      for (const char of piece) {
        const c = char.codePointAt(0);
        const last = ranges[ranges.length - 1];
        if (last && last[1] + 1 === c) last[1] = c;
        else ranges.push([c, c]);
      }
    }
  }
  return ranges;
}

const result = {};
for (const pattern of patterns) result[pattern] = matchingCodePoints(pattern);
writeFileSync(outPath, JSON.stringify(result));
console.log(`classified every code point for ${patterns.length} patterns`);
