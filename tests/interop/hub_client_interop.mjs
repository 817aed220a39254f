// Drives the @huggingface/hub npm client against the test hub and a cache folder.
//   node hub_client_interop.mjs download HUB_URL CACHE_DIR REPO         → prints the snapshot folder
//   node hub_client_interop.mjs read     HUB_URL CACHE_DIR REPO COMMIT  → reads every cached file of the
//     commit through the client's own cache lookup, prints "path sha256" lines
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { downloadFileToCacheDir, scanCacheDir, snapshotDownload } from "@huggingface/hub";

const [mode, hubUrl, cacheDir, repo, commit] = process.argv.slice(2);
console.debug = () => {};  // the client logs every download on stdout

if (mode === "download") {
  console.log(await snapshotDownload({ repo, hubUrl, cacheDir }));
} else if (mode === "read") {
  const scan = await scanCacheDir(cacheDir);
  if (scan.warnings.length) throw new Error(`cache scan warnings: ${scan.warnings.map(String).join("; ")}`);
  const cached = scan.repos.find((r) => r.id.name === repo);
  if (!cached) throw new Error(`${repo} is not in the cache`);
  const revision = cached.revisions.find((r) => r.commitOid === commit);
  if (!revision) throw new Error(`${commit} is not cached`);
  console.log(`refs ${revision.refs.join(",")}`);
  for (const file of revision.files) {
    const relative = file.path.slice(revision.path.length + 1);
    // With a commit revision the client answers from the cache, without asking the hub.
    const path = await downloadFileToCacheDir({ repo, path: relative, revision: commit, hubUrl, cacheDir });
    const digest = createHash("sha256").update(await readFile(path)).digest("hex");
    console.log(`${relative} ${digest}`);
  }
} else {
  throw new Error(`unknown mode ${mode}`);
}
