// Bundle Auth.js's own browser clients for the compatibility tests
// (tests/browser/test_authjs_clients.py): one IIFE per client that puts getProviders,
// getCsrfToken, getSession, signIn and signOut on `window`.
//
//   node tests/authjs_clients/build.mjs <outdir> <NEXTAUTH_URL>
//
// NEXTAUTH_URL is the app's auth base URL (http://127.0.0.1:<port>/auth). Both clients read
// it, and NEXTAUTH_URL_INTERNAL and VERCEL_URL, from process.env when they load (next-auth
// v4's react/index.js and v5's react.js build `__NEXTAUTH` from them); in the browser they
// use only its path, the base path `/auth`. A bundle still naming `process.env` fails
// the build: a new client version reading another variable must not go unnoticed.
// Prints {"v4": {"file", "package", "version"}, "v5": {…}} as JSON.
import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const [outdir, nextauthUrl] = process.argv.slice(2);
if (!outdir || !/^https?:\/\/[^/]+\/\S+$/.test(nextauthUrl ?? "")) {
  console.error("usage: node tests/authjs_clients/build.mjs <outdir> <NEXTAUTH_URL>");
  process.exit(2);
}

// The entry, and the folder npm installed the client in (v5 under an alias).
const clients = {
  v4: { entry: "v4.js", folder: "next-auth" },
  v5: { entry: "v5.js", folder: "next-auth-v5" },
};

const built = {};
for (const [name, { entry, folder }] of Object.entries(clients)) {
  const pkg = JSON.parse(await readFile(path.join(root, "node_modules", folder, "package.json")));
  const client = { package: pkg.name, version: pkg.version, installedAs: folder };
  const outfile = path.join(path.resolve(outdir), `${name}.js`);
  await esbuild.build({
    absWorkingDir: root,
    entryPoints: [path.join(here, entry)],
    outfile,
    bundle: true,
    format: "iife",
    platform: "browser",
    target: ["es2020"],
    define: {
      "process.env.NEXTAUTH_URL": JSON.stringify(nextauthUrl),
      "process.env.NEXTAUTH_URL_INTERNAL": "undefined",
      "process.env.VERCEL_URL": "undefined",
      "process.env.NODE_ENV": '"production"',
      __AUTHJS_CLIENT__: JSON.stringify(client),
    },
    logLevel: "error",
  });
  const code = await readFile(outfile, "utf8");
  const left = [...new Set(code.match(/process\.env(\.\w+)?/g) ?? [])];
  if (left.length) {
    console.error(`${name}: the bundle still reads ${left.join(", ")}; define it in build.mjs`);
    process.exit(1);
  }
  built[name] = { file: outfile, ...client };
}
console.log(JSON.stringify(built));
