// Streams one file from a hub with the @huggingface/hub npm client (its Xet path for Xet files) and prints
// "SIZE SHA256". Used by the Xet download benchmark as the reference client.
//   node npm_xet_download.mjs HUB_URL REPO PATH
import { createHash } from "node:crypto";
import { downloadFile } from "@huggingface/hub";

const [hubUrl, repo, path] = process.argv.slice(2);
console.debug = () => {};
const blob = await downloadFile({ repo, path, hubUrl, parallelDownloads: true });
if (!blob) throw new Error(`${path} was not found`);
const hash = createHash("sha256");
let size = 0;
for await (const piece of blob.stream()) {
  hash.update(piece);
  size += piece.length;
}
console.log(`${size} ${hash.digest("hex")}`);
