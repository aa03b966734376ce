// The SDKs as a web app installs them. `npm pack` of protocol, sdk-edge and sdk-browser (their
// `prepack` builds dist/) into a temp dir; a fresh app outside the workspace (its own package.json,
// no workspaces) installs the three tarballs plus Vite and esbuild from the npm cache; one page is
// bundled by `vite build`, one by esbuild, both importing `@iii-edge/sdk-browser` by name. Each is
// served by a static server, opened in Chromium, and becomes a worker (its token comes in the URL
// fragment, and the SDK offers it as the subprotocol `iii.bearer.<token>`). An unmodified iii-sdk
// worker in this process then invokes the page's function through an engine with auth on. The
// tarballs hold built JavaScript and .d.ts only, and a TypeScript file in the app type-checks
// against the shipped .d.ts.
import { execFile } from "node:child_process";
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { registerWorker, type IIIClient } from "iii-sdk";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, startSecureEngine, token } from "@iii-edge/test-support/auth";
import { launchChromium } from "@iii-edge/test-support/chromium";
import { repoRoot, type EngineServer } from "@iii-edge/test-support/engine-server";
import { until } from "@iii-edge/test-support/wait";

const PACKAGES = ["protocol", "sdk-edge", "sdk-browser"];
/** What the app installs besides the tarballs (all in the npm cache the repo's install filled). */
const TOOLS = ["vite@8.3.8", "esbuild@0.28.2", "@types/node@22.20.7"];
const BUNDLERS = ["vite", "esbuild"] as const;
type Bundler = (typeof BUNDLERS)[number];

interface Packed {
  name: string;
  version: string;
  filename: string;
  size: number;
  unpackedSize: number;
  files: { path: string; size: number }[];
}

let engine: EngineServer | undefined;
let ctx: BrowserContext | undefined;
let iii: IIIClient | undefined;
let server: Server | undefined;
let packDir: string;
let app: string;
let packed: Packed[] = [];
let installMode = "offline";
let installWarnings = "";
let staticUrl: string;
const pages = new Map<Bundler, Page>();
const pageErrors: string[] = [];
const timings: Record<string, number> = {};

/** The app's environment: none of the repo's npm config (`npm_config_*`, NODE_OPTIONS with the
 * iii-edge-source condition) nor vitest's, and no repo node_modules/.bin on PATH. */
const appEnv: NodeJS.ProcessEnv = Object.fromEntries(
  Object.entries(process.env)
    .filter(([k]) => !/^(npm_|VITEST|VITE_)/i.test(k) && !["NODE_OPTIONS", "NODE_ENV", "INIT_CWD", "TEST"].includes(k))
    .map(([k, v]) => [
      k,
      k === "PATH"
        ? v!
            .split(path.delimiter)
            .filter((d) => !d.startsWith(repoRoot))
            .join(path.delimiter)
        : v,
    ]),
);

function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd, env, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(" ")} (in ${cwd}) failed: ${err.message}\n${stdout}\n${stderr}`));
      else resolve({ stdout, stderr });
    });
  });
}

async function timed<T>(what: string, fn: () => Promise<T>): Promise<T> {
  const t0 = Date.now();
  try {
    return await fn();
  } finally {
    timings[what] = Date.now() - t0;
  }
}

const files = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(path.join(dir, e.name)) : [path.join(dir, e.name)]));

/** The page both bundlers build: a worker with one zod-typed function, its state in #status. */
const pageScript = (bundler: Bundler) => `import { registerWorker, z } from "@iii-edge/sdk-browser";

const params = new URLSearchParams(location.search);
// #token=… never reaches a server; the SDK sends it as the subprotocol iii.bearer.<token>.
const token = new URLSearchParams(location.hash.slice(1)).get("token") || undefined;
const iii = registerWorker(params.get("engine") ?? "/", { workerName: "${bundler}-page", token, reconnectionConfig: { initialDelayMs: 250 } });
iii.registerFunction("pkg::${bundler}::answer", ({ question }) => ({ answer: question.length * 7, bundler: "${bundler}", inBrowser: typeof document === "object" }), {
  description: "answers from a page bundled by ${bundler}",
  input: z.object({ question: z.string() }),
});
iii.addConnectionStateListener((state) => { document.getElementById("status").textContent = state; });
`;
const pageHtml = (src: string) =>
  `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>fresh app</title></head>\n<body><p id="status">loading</p><script type="module" src="${src}"></script></body></html>\n`;

/** A file in the app that uses the Node/Worker SDK and the protocol through their .d.ts only. */
const CONSUMER_TS = `import { registerWorker, z, IIIError, TriggerAction, type EdgeClient } from "@iii-edge/sdk-edge";
import { connectEngine } from "@iii-edge/sdk-edge/rpc";
import { parseWorkerFrame, ERROR_CODES, type ErrorBody } from "@iii-edge/protocol";
import { mintToken } from "@iii-edge/protocol/token";

const iii: EdgeClient = registerWorker("ws://127.0.0.1:8787/", { workerName: "typed", headers: { Authorization: "Bearer t" } });
iii.registerFunction("math::add", ({ a, b }) => ({ sum: a + b }), { input: z.object({ a: z.number(), b: z.number() }) });
export const sum: Promise<{ sum: number }> = iii.trigger<{ a: number; b: number }, { sum: number }>({ function_id: "math::add", payload: { a: 1, b: 2 } });
export const voided = iii.trigger({ function_id: "math::add", payload: {}, action: TriggerAction.Void() });
const body: ErrorBody = { code: ERROR_CODES[0], message: "m" };
export const err: IIIError = IIIError.relayed(body);
export const own: IIIError = IIIError.custom("card_declined", "the bank said no");
export const typed: IIIError = new IIIError("forbidden", "no");
export const parsed = parseWorkerFrame('{"type":"ping"}');
export const minted: Promise<string> = mintToken("secret", { sub: "me", ns: ["*"] }, 60);
declare const ENGINE: Parameters<typeof connectEngine>[0]; // a Worker's env.ENGINE binding
export const viaRpc: Promise<number> = connectEngine(ENGINE, { namespace: "default" }).trigger<unknown, number>({ function_id: "math::add", payload: {} });
// The declarations are real types, not \`any\`: each of these must be an error.
// @ts-expect-error a code outside the closed sets goes through IIIError.custom
new IIIError("card_declined", "x");
// @ts-expect-error the url is a string
registerWorker(42);
// @ts-expect-error connectEngine wants a namespace with getByName
connectEngine("nope");
// @ts-expect-error a call names its function
iii.trigger({ payload: {} });
`;

async function prepareApp(): Promise<void> {
  packDir = mkdtempSync(path.join(tmpdir(), "iii-edge-tarballs-"));
  // One npm run: each package's prepack builds its dist/ (scripts/build-package.mjs), then packs.
  const pack = await timed("npm pack (build + pack)", () =>
    run("npm", ["pack", ...PACKAGES.flatMap((p) => ["--workspace", p]), "--pack-destination", packDir, "--json"], repoRoot),
  );
  packed = JSON.parse(pack.stdout);

  app = mkdtempSync(path.join(tmpdir(), "iii-edge-fresh-app-"));
  writeFileSync(
    path.join(app, "package.json"),
    JSON.stringify({ name: "fresh-app", version: "0.0.0", private: true, type: "module", allowScripts: { esbuild: true } }, null, 2),
  );
  const specs = [...packed.map((p) => path.join(packDir, p.filename)), ...TOOLS];
  const flags = ["--no-audit", "--no-fund", "--loglevel=warn"];
  const installed = await timed("npm install", async () => {
    try {
      return await run("npm", ["install", "--offline", ...flags, ...specs], app, appEnv);
    } catch (e) {
      // npm 11 resolves with full packuments; the cache may hold only abbreviated ones (what a
      // lockfile install leaves). Then the metadata comes from the registry, tarballs from the cache.
      if (!String(e).includes("ENOTCACHED")) throw e;
      installMode = "prefer-offline (packuments not cached)";
      return run("npm", ["install", "--prefer-offline", ...flags, ...specs], app, appEnv);
    }
  });
  installWarnings = installed.stderr.trim();

  // Vite: an index.html and its module, `vite build` with relative asset URLs (served under /vite/).
  mkdirSync(path.join(app, "vite-page"));
  writeFileSync(path.join(app, "vite-page", "main.js"), pageScript("vite"));
  writeFileSync(path.join(app, "vite-page", "index.html"), pageHtml("./main.js"));
  const vite = await timed("vite build", () =>
    run(
      process.execPath,
      [path.join(app, "node_modules/vite/bin/vite.js"), "build", "vite-page", "--base", "./", "--logLevel", "warn"],
      app,
      appEnv,
    ),
  );
  if (vite.stdout.trim() || vite.stderr.trim()) console.log(`[vite build]\n${vite.stdout}${vite.stderr}`);

  // esbuild: one bundle beside a hand-written index.html.
  mkdirSync(path.join(app, "esbuild-page", "dist"), { recursive: true });
  writeFileSync(path.join(app, "esbuild-page", "main.js"), pageScript("esbuild"));
  writeFileSync(path.join(app, "esbuild-page", "dist", "index.html"), pageHtml("./app.js"));
  await timed("esbuild", () =>
    run(
      path.join(app, "node_modules/.bin/esbuild"),
      ["esbuild-page/main.js", "--bundle", "--format=esm", "--minify", "--log-level=warning", "--outfile=esbuild-page/dist/app.js"],
      app,
      appEnv,
    ),
  );

  // A static server for the two bundles: /vite/… and /esbuild/… (each page's dist/ only).
  const roots: Record<string, string> = { vite: path.join(app, "vite-page", "dist"), esbuild: path.join(app, "esbuild-page", "dist") };
  const TYPES: Record<string, string> = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript",
    ".css": "text/css",
    ".map": "application/json",
  };
  server = createServer((req, res) => {
    const [, which = "", ...rest] = new URL(req.url ?? "/", "http://x").pathname.split("/");
    const root = roots[which];
    const file = root && path.join(root, ...rest.map(decodeURIComponent));
    try {
      if (!file?.startsWith(root + path.sep) || !statSync(file).isFile()) throw new Error("not found");
      res.writeHead(200, { "content-type": TYPES[path.extname(file)] ?? "application/octet-stream" }).end(readFileSync(file));
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
  staticUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function openPage(bundler: Bundler): Promise<void> {
  const page = await ctx!.newPage();
  page.on("pageerror", (e) => pageErrors.push(`[${bundler}] ${String(e)}`));
  page.on("console", (m) => m.type() === "error" && pageErrors.push(`[${bundler} console] ${m.text()}`));
  const tabToken = await token(`${bundler}-page`);
  await page.goto(`${staticUrl}/${bundler}/index.html?engine=${encodeURIComponent(`${engine!.wsUrl}/`)}#token=${tabToken}`);
  await until(
    async () => (await page.locator("#status").textContent()) === "connected",
    `the ${bundler} page connected (errors: ${pageErrors.join("; ")})`,
    20_000,
  );
  pages.set(bundler, page);
}

beforeAll(async () => {
  const t0 = Date.now();
  // The engine boots and Chromium launches while the packages are packed, installed and bundled.
  const results = await Promise.allSettled([
    startSecureEngine().then((e) => (engine = e)),
    prepareApp(),
    timed("chromium", () => launchChromium()).then((c) => (ctx = c)),
  ]);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed) throw failed.reason;
  timings["engine + app + chromium ready"] = Date.now() - t0;
  // OTel off: iii-sdk's /otel socket sends no headers and would be refused (401) over and over.
  iii = registerWorker(`${engine!.wsUrl}/`, {
    workerName: "iii-sdk-packages",
    enableMetricsReporting: false,
    otel: { enabled: false },
    headers: bearer(await token("iii-sdk-packages")),
    reconnectionConfig: { initialDelayMs: 250, maxDelayMs: 1_000 },
  });
  for (const b of BUNDLERS) await timed(`open ${b} page`, () => openPage(b));
  const summary = packed
    .map((p) => `  ${p.filename}: ${p.files.length} files, ${p.size} B packed, ${p.unpackedSize} B unpacked`)
    .join("\n");
  console.log(
    `[packages] install: ${installMode}\n${summary}\n[packages] timings (ms): ${JSON.stringify(timings)}${installWarnings ? `\n[npm install]\n${installWarnings}` : ""}`,
  );
});

afterAll(async () => {
  await ctx?.close();
  await iii?.shutdown();
  await engine?.stop();
  await new Promise((r) => (server ? server.close(r) : r(undefined)));
  for (const d of [app, packDir, engine?.stateDir]) if (d) rmSync(d, { recursive: true, force: true });
});

describe("the packed SDKs", () => {
  it("hold built ESM JavaScript and .d.ts, no TypeScript sources; exports, main and types point into them", () => {
    expect(packed.map((p) => p.name).sort()).toEqual(["@iii-edge/protocol", "@iii-edge/sdk-browser", "@iii-edge/sdk-edge"]);
    const versions = new Map(packed.map((p) => [p.name, p.version]));
    for (const p of packed) {
      const paths = p.files.map((f) => f.path);
      expect(
        paths.filter((f) => /\.(ts|mts|cts|tsx)$/.test(f) && !f.endsWith(".d.ts")),
        p.name,
      ).toEqual([]);
      expect(
        paths.filter((f) => !["package.json", "README.md"].includes(f) && !/^dist\/.+\.(js|d\.ts)$/.test(f)),
        p.name,
      ).toEqual([]);
      for (const js of paths.filter((f) => f.endsWith(".js")))
        expect(paths, `${p.name}: ${js} has declarations`).toContain(js.replace(/\.js$/, ".d.ts"));

      const dir = path.join(app, "node_modules", p.name);
      expect(lstatSync(dir).isSymbolicLink(), `${p.name} is a copy, not a link into the repo`).toBe(false);
      const manifest = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8"));
      expect(manifest.private).toBeUndefined();
      expect(manifest.type).toBe("module");
      expect(paths).toContain(manifest.main.replace(/^\.\//, ""));
      expect(paths).toContain(manifest.types.replace(/^\.\//, ""));
      for (const [sub, target] of Object.entries<Record<string, string>>(manifest.exports)) {
        // `iii-edge-source` is the repo's own condition (sources); consumers never set it.
        const conditions = Object.keys(target);
        expect(
          conditions.filter((c) => !["iii-edge-source", "types", "default"].includes(c)),
          `${p.name} ${sub}`,
        ).toEqual([]);
        expect(conditions.indexOf("types"), `${p.name} ${sub}: types before default`).toBeLessThan(conditions.indexOf("default"));
        expect(paths, `${p.name} ${sub} types`).toContain(target.types!.replace(/^\.\//, ""));
        expect(paths, `${p.name} ${sub} default`).toContain(target.default!.replace(/^\.\//, ""));
      }
      // Each other by version, as a registry would serve them.
      for (const [dep, range] of Object.entries<string>(manifest.dependencies ?? {}))
        if (dep.startsWith("@iii-edge/")) expect(range, `${p.name} → ${dep}`).toBe(versions.get(dep));
      // The rewrite of `./x.ts` specifiers: none left in the shipped JavaScript or declarations.
      for (const f of files(path.join(dir, "dist")))
        expect(readFileSync(f, "utf8"), path.relative(dir, f)).not.toMatch(/(from\s*|import\s*\(\s*)["']\.{1,2}\/[^"']*\.ts["']/);
    }
    const edge = JSON.parse(readFileSync(path.join(app, "node_modules/@iii-edge/sdk-edge/package.json"), "utf8"));
    const browser = JSON.parse(readFileSync(path.join(app, "node_modules/@iii-edge/sdk-browser/package.json"), "utf8"));
    expect(edge.dependencies["@iii-edge/protocol"]).toBe(versions.get("@iii-edge/protocol"));
    expect(browser.dependencies).toMatchObject({
      "@iii-edge/protocol": versions.get("@iii-edge/protocol"),
      "@iii-edge/sdk-edge": versions.get("@iii-edge/sdk-edge"),
    });
  });

  it("type-check a TypeScript consumer of sdk-edge and protocol against the shipped .d.ts (nodenext and bundler resolution)", async () => {
    writeFileSync(path.join(app, "consumer.ts"), CONSUMER_TS);
    const compilerOptions = {
      target: "es2022",
      module: "nodenext",
      moduleResolution: "nodenext",
      lib: ["es2023"],
      types: ["node"],
      strict: true,
      noEmit: true,
      skipLibCheck: false,
    };
    writeFileSync(path.join(app, "tsconfig.json"), JSON.stringify({ compilerOptions, files: ["consumer.ts"] }, null, 2));
    const tsc = path.join(repoRoot, "node_modules", ".bin", "tsc");
    await run(tsc, ["-p", "tsconfig.json", "--noEmit"], app, appEnv);
    await run(tsc, ["-p", "tsconfig.json", "--noEmit", "--module", "preserve", "--moduleResolution", "bundler"], app, appEnv);
  });

  for (const bundler of BUNDLERS) {
    it(`a page bundled by ${bundler} is a worker that the unmodified iii-sdk invokes through the engine`, async () => {
      expect(pages.get(bundler), `${bundler} page open`).toBeDefined();
      const fn = `pkg::${bundler}::answer`;
      const r = await until(() => iii!.trigger({ function_id: fn, payload: { question: "six" } }), `${fn} callable`, 15_000);
      expect(r).toEqual({ answer: 21, bundler, inBrowser: true });
      // The bundled zod validates the input in the page.
      const bad = await iii!.trigger({ function_id: fn, payload: { question: 6 } }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(bad).toMatchObject({ code: "invalid_input" });
      expect(pageErrors).toEqual([]);
    });
  }
});
