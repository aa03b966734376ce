// Large and form-encoded http request bodies through `npm start`, read by unmodified iii-sdk@0.22.1
// handlers. Past the frame bound (1 MiB) a body with a Content-Length is streamed through the
// `request_body` channel as it arrives (as iii does) up to HTTP_MAX_BODY_BYTES (here lowered to 12
// MiB to show it is configurable; 16 MiB by default); past that, or past 1 MiB without a declared
// length, it is refused with 413 before any function runs. Form bodies reach the function the way
// iii passes them: the raw bytes in `request_body`, `body` null.
import { createHash, randomBytes } from "node:crypto";
import nodeHttp from "node:http";
import { http } from "@iii-dev/helpers/http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSecureEngine } from "@iii-edge/test-support/auth";
import type { EngineServer } from "@iii-edge/test-support/engine-server";
import { until, worker, type Worker } from "./sdk.ts";

const MiB = 1024 * 1024;
/** This engine's HTTP_MAX_BODY_BYTES. */
const MAX_BODY = 12 * MiB;
/** The size iii's own upload tests use (under its 16 MiB bound, multipart framing included). */
const UPLOAD = 8 * MiB;

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

/**
 * POST `total` bytes in 64 KiB chunks at a bounded pace until the engine answers, and what it
 * answered with how much had been sent by then. (Paced: a client that outruns the local dev server
 * sees a reset instead of an early answer.)
 */
function pacedUpload(
  url: string,
  headers: Record<string, string>,
  total: number,
  /** Stop sending (without ending the body) after this many bytes and wait for the answer: one
   * that only comes once the whole body is in then never comes, whatever the machine's speed. */
  pauseAt = total,
): Promise<{ status: number; body: string; sentWhenAnswered: number }> {
  return new Promise((resolve, reject) => {
    let sent = 0;
    let answered = false;
    const req = nodeHttp.request(url, { method: "POST", headers: { "content-type": "application/octet-stream", ...headers } });
    req.on("response", (res) => {
      answered = true;
      const sentWhenAnswered = sent;
      let body = "";
      res.on("data", (d: Buffer) => (body += d));
      res.on("end", () => {
        req.destroy();
        resolve({ status: res.statusCode ?? 0, body, sentWhenAnswered });
      });
    });
    req.on("error", (e) => {
      if (!answered) reject(e);
    });
    const chunk = Buffer.alloc(64 * 1024, 1);
    void (async () => {
      while (!answered && sent < Math.min(total, pauseAt)) {
        sent += chunk.length;
        if (!req.write(chunk)) await new Promise((r) => req.once("drain", r));
        await new Promise((r) => setTimeout(r, 2));
      }
      if (!answered && sent >= total) req.end();
    })();
  });
}

describe("http request bodies", () => {
  let engine: EngineServer;
  let w: Worker;
  const calls: Record<string, number> = {};
  const count = (id: string) => (calls[id] = (calls[id] ?? 0) + 1);

  beforeAll(async () => {
    engine = await startSecureEngine({ HTTP_MAX_BODY_BYTES: String(MAX_BODY) });
    w = await worker(engine.wsUrl, "bodies");
    // The upload handler of iii's own suite: stream request_body in, answer with what arrived.
    w.registerFunction(
      "bodies::upload",
      http(async (req, res) => {
        count("upload");
        const chunks: Buffer[] = [];
        for await (const chunk of req.request_body.stream) chunks.push(chunk as Buffer);
        const all = Buffer.concat(chunks);
        res.status(200);
        res.headers({ "content-type": "application/json" });
        res.stream.end(
          Buffer.from(JSON.stringify({ size: all.length, sha256: sha256(all), body: req.body ?? null, chunks: chunks.length })),
        );
      }),
    );
    w.registerTrigger({ type: "http", function_id: "bodies::upload", config: { api_path: "bodies/upload", http_method: "POST" } });
    w.registerFunction(
      "bodies::multipart",
      http(async (req, res) => {
        const chunks: Buffer[] = [];
        for await (const chunk of req.request_body.stream) chunks.push(chunk as Buffer);
        const raw = Buffer.concat(chunks);
        const type = String(req.headers["content-type"] ?? "");
        const boundary = /boundary=([^\s;]+)/.exec(type)?.[1] ?? "";
        const text = raw.toString("latin1");
        // The file part's bytes: between its headers' blank line and the next boundary.
        const fileStart = text.indexOf("\r\n\r\n", text.indexOf('filename="handbook.pdf"')) + 4;
        const fileEnd = text.indexOf(`\r\n--${boundary}`, fileStart);
        res.status(200);
        res.headers({ "content-type": "application/json" });
        res.stream.end(
          Buffer.from(
            JSON.stringify({
              boundary: boundary.length > 0,
              title: text.includes("Test Document"),
              description: text.includes("A test upload"),
              size: raw.length,
              file_sha256: sha256(raw.subarray(fileStart, fileEnd)),
            }),
          ),
        );
      }),
    );
    w.registerTrigger({ type: "http", function_id: "bodies::multipart", config: { api_path: "bodies/multipart", http_method: "POST" } });
    w.registerFunction(
      "bodies::form",
      http(async (req, res) => {
        const params = new URLSearchParams((await req.request_body.readAll()).toString("utf8"));
        res.status(200);
        res.headers({ "content-type": "application/json" });
        res.stream.end(
          Buffer.from(
            JSON.stringify({ name: params.get("name"), email: params.get("email"), age: params.get("age"), body: req.body ?? null }),
          ),
        );
      }),
    );
    w.registerTrigger({ type: "http", function_id: "bodies::form", config: { api_path: "bodies/form", http_method: "POST" } });
    await until(
      async () => (await fetch(`${engine.url}/bodies/upload`, { method: "POST", body: "ready?" })).status === 200,
      "the upload route",
    );
  });
  afterAll(async () => {
    await w?.shutdown();
    await engine?.stop();
  });

  it("an 8 MiB binary upload streams through request_body byte for byte (a PDF upload, as iii's suite does)", async () => {
    const file = randomBytes(UPLOAD);
    const res = await fetch(`${engine.url}/bodies/upload`, { method: "POST", headers: { "content-type": "application/pdf" }, body: file });
    expect(res.status).toBe(200);
    const got = (await res.json()) as { size: number; sha256: string; body: unknown; chunks: number };
    expect(got).toMatchObject({ size: UPLOAD, sha256: sha256(file), body: null });
    // Streamed as it arrived (64 KiB items), not one buffered frame.
    expect(got.chunks).toBeGreaterThan(1);
  });

  it("just past the frame bound streams too; at the bound it is one item, as before", async () => {
    for (const size of [MiB + 1, MiB]) {
      const file = randomBytes(size);
      const got = (await (
        await fetch(`${engine.url}/bodies/upload`, { method: "POST", headers: { "content-type": "application/octet-stream" }, body: file })
      ).json()) as { size: number; sha256: string; chunks: number };
      expect(got).toMatchObject({ size, sha256: sha256(file) });
      if (size === MiB) expect(got.chunks).toBe(1);
    }
  });

  it("a multipart/form-data upload with fields and an 8 MiB file arrives whole", async () => {
    const file = randomBytes(UPLOAD);
    const form = new FormData();
    form.append("title", "Test Document");
    form.append("description", "A test upload");
    form.append("file", new Blob([file]), "handbook.pdf");
    const res = await fetch(`${engine.url}/bodies/multipart`, { method: "POST", body: form });
    expect(res.status).toBe(200);
    const got = (await res.json()) as { boundary: boolean; title: boolean; description: boolean; size: number; file_sha256: string };
    expect(got).toMatchObject({ boundary: true, title: true, description: true, file_sha256: sha256(file) });
    expect(got.size).toBeGreaterThan(UPLOAD);
  });

  it("an application/x-www-form-urlencoded body is answered at once: raw in request_body, body null (as iii passes it)", async () => {
    const t0 = Date.now();
    const res = await fetch(`${engine.url}/bodies/form`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ name: "John Doe", email: "john@example.com", age: "30" }).toString(),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ name: "John Doe", email: "john@example.com", age: "30", body: null });
    expect(Date.now() - t0).toBeLessThan(2_000); // before: until the client's 30 s timeout
  });

  it("a declared length over HTTP_MAX_BODY_BYTES is refused 413 at once, before anything runs", async () => {
    const before = calls.upload ?? 0;
    const out = await pacedUpload(
      `${engine.url}/bodies/upload`,
      { "content-length": String(MAX_BODY + 1) },
      MAX_BODY + 1,
      MAX_BODY / 4 - 64 * 1024,
    );
    expect(out.status).toBe(413);
    expect(JSON.parse(out.body)).toMatchObject({
      error: { code: "value_too_large", message: expect.stringContaining("HTTP_MAX_BODY_BYTES") },
    });
    // Answered long before the client had sent it (at most the first MiB is read, and dropped).
    expect(out.sentWhenAnswered).toBeLessThan(MAX_BODY / 4);
    expect(calls.upload ?? 0).toBe(before);
  });

  it("a chunked body (no Content-Length) over 1 MiB is refused 413 and told to send its length", async () => {
    const before = calls.upload ?? 0;
    const out = await pacedUpload(`${engine.url}/bodies/upload`, {}, 4 * MiB);
    expect(out.status).toBe(413);
    expect(JSON.parse(out.body)).toMatchObject({
      error: { code: "value_too_large", message: expect.stringMatching(/without a Content-Length/) },
    });
    expect(calls.upload ?? 0).toBe(before);
  });
});
