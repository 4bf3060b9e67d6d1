// Run the islands' unit tests: bundle each *.test.js(x) with esbuild (JSX), then run them
// with node's own test runner in a jsdom window (see dom.js). Exit code is node --test's.
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const testDir = path.join(root, "ui-src/test");
// Inside the repository, so the bundles' bare imports resolve from node_modules.
const outdir = path.join(root, "node_modules/.cache/ui-tests");
const entries = readdirSync(testDir).filter((f) => /\.test\.jsx?$/.test(f)).map((f) => path.join(testDir, f));

await esbuild.build({
  entryPoints: entries,
  bundle: true,
  platform: "node",
  format: "esm",
  jsx: "automatic",
  packages: "external",
  outdir,
  logLevel: "warning",
});
const outputs = entries.map((f) => path.join(outdir, path.basename(f).replace(/\.jsx?$/, ".js")));
const run = spawnSync(
  process.execPath,
  ["--import", path.join(testDir, "dom.js"), "--test", "--test-reporter=spec", ...outputs],
  { stdio: "inherit", cwd: root },
);
process.exit(run.status ?? 1);
