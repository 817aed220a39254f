// Downloads one file from the test hub with the @huggingface/hub npm client's downloadFile, which speaks
// Xet for Xet files (file info on resolve, read token, V2 reconstruction, multi-range gateway fetches).
//   node xet_hub_interop.mjs HUB_URL REPO PATH [--serial] [--token T] [--slice START END]
// prints "CLASS SIZE SHA256" of what it read (CLASS is XetBlob when the Xet path was taken).
import { createHash } from "node:crypto";
import { downloadFile } from "@huggingface/hub";

const [hubUrl, repo, path, ...options] = process.argv.slice(2);
const option = (name) => options.indexOf(name);
console.debug = () => {};

const accessToken = option("--token") >= 0 ? options[option("--token") + 1] : undefined;
let blob = await downloadFile({
  repo,
  path,
  hubUrl,
  accessToken,
  parallelDownloads: option("--serial") < 0,
});
if (!blob) throw new Error(`${path} was not found`);
const kind = blob.constructor.name;
if (option("--slice") >= 0) {
  const at = option("--slice");
  blob = blob.slice(Number(options[at + 1]), Number(options[at + 2]));
}
const bytes = new Uint8Array(await blob.arrayBuffer());
console.log(`${kind} ${bytes.length} ${createHash("sha256").update(bytes).digest("hex")}`);
