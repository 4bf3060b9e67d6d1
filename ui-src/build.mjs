// Bundle the React islands and htmx into webapp/static/dist with content-hashed names, and
// write manifest.json (logical name -> file) for webapp/ui/assets.py.
//
//   node ui-src/build.mjs [outdir]
//
// The output is deterministic (same sources and lockfile -> same bytes), which is what lets
// tests/test_front_end.py rebuild into a temporary folder and compare it with the committed one.
import { mkdir, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const outdir = path.resolve(process.argv[2] ?? path.join(root, "webapp/static/dist"));

// Logical names the templates ask for -> their sources.
const entries = {
  chooser: "ui-src/chooser/main.jsx",
  "error-page": "ui-src/error-page/main.jsx",
  htmx: "ui-src/htmx.js",
  passkey: "ui-src/passkey/main.js",
  "page-tools": "ui-src/page-tools.js",
};

await rm(outdir, { recursive: true, force: true });
await mkdir(outdir, { recursive: true });

const result = await esbuild.build({
  absWorkingDir: root,
  entryPoints: entries,
  bundle: true,
  // ES modules with code splitting: React is one shared chunk, not a copy per island.
  format: "esm",
  splitting: true,
  minify: true,
  target: ["es2020"],
  jsx: "automatic",
  define: { "process.env.NODE_ENV": '"production"' },
  outdir,
  entryNames: "[name]-[hash]",
  chunkNames: "chunks/[name]-[hash]",
  metafile: true,
  logLevel: "warning",
});

const bySource = Object.fromEntries(Object.entries(entries).map(([name, src]) => [src, name]));
const manifest = {};
for (const [file, output] of Object.entries(result.metafile.outputs)) {
  const name = bySource[output.entryPoint];
  if (name) manifest[name] = path.relative(outdir, path.resolve(root, file));
}
const sorted = Object.fromEntries(Object.entries(manifest).sort());
await writeFile(path.join(outdir, "manifest.json"), JSON.stringify(sorted, null, 2) + "\n");
