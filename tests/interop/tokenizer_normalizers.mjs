// Runs the Rust reference's normalizers (tokenizers) on every code point and on given strings, for the
// C++ tokenizer's normalizer test.
// usage: node tokenizer_normalizers.mjs PROBES.json OUT.json
//   PROBES.json is an array of strings. OUT.json receives, per normalizer (nfc, nfd, nfkc, nfkd,
//   strip_accents, lowercase): {changed: [[code point, normalized], ...] for every code point the
//   normalizer changes, probes: [normalized probe, ...]}.
import { readFileSync, writeFileSync } from "node:fs";
import rust from "tokenizers";

const [probesPath, outPath] = process.argv.slice(2);
const probes = JSON.parse(readFileSync(probesPath, "utf8"));
const normalizers = {
  nfc: rust.nfcNormalizer(),
  nfd: rust.nfdNormalizer(),
  nfkc: rust.nfkcNormalizer(),
  nfkd: rust.nfkdNormalizer(),
  strip_accents: rust.stripAccentsNormalizer(),
  lowercase: rust.lowercase(),
};

const result = {};
for (const [name, normalizer] of Object.entries(normalizers)) {
  const changed = [];
  for (let c = 0; c < 0x110000; ++c) {
    if (c >= 0xd800 && c <= 0xdfff) continue;
    const text = String.fromCodePoint(c);
    const normalized = normalizer.normalizeString(text);
    if (normalized !== text) changed.push([c, normalized]);
  }
  result[name] = { changed, probes: probes.map((text) => normalizer.normalizeString(text)) };
}
writeFileSync(outPath, JSON.stringify(result));
console.log(`normalized every code point and ${probes.length} probes with ${Object.keys(normalizers).length} normalizers`);
