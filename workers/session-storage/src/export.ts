// `session-tree::export`: one path of a session rendered as JSON, Markdown or a standalone HTML
// page. Pure functions over the entries read by src/tree.ts. Every entry on the path is rendered
// (messages, custom messages, summaries); image data is never copied out, only its type and size.
// HTML escapes every text it writes, attribute values included, and carries no script.
import type { ExportFormat } from "@iii-edge/protocol/harness";

export interface ExportEntry {
  entry_id: string;
  parent_id: string | null;
  kind: string;
  timestamp: number;
  /** The stored body: an AgentMessage for message / custom_message entries. */
  body: unknown;
}
export interface ExportDocument {
  session_id: string;
  display_name?: string;
  cwd?: string;
  leaf_id: string | null;
  entries: ExportEntry[];
}

export const CONTENT_TYPES: Record<ExportFormat, string> = {
  json: "application/json; charset=utf-8",
  markdown: "text/markdown; charset=utf-8",
  html: "text/html; charset=utf-8",
};

type Json = Record<string, unknown>;
const isJson = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

/** A JSON value as readable text (arguments, results, custom content). */
function jsonText(v: unknown): string {
  if (typeof v === "string") return v;
  try {
    return JSON.stringify(v, null, 2) ?? String(v);
  } catch {
    return String(v);
  }
}

function when(ts: number): string | undefined {
  return Number.isFinite(ts) && ts > 0 ? new Date(ts).toISOString() : undefined;
}

// ------------------------------------------------------------------ one neutral shape for both text formats

/** A piece of an entry: prose (the message's own text), code (JSON, results), or a note. */
type Part = { type: "text"; text: string } | { type: "code"; text: string; lang: string; label?: string } | { type: "note"; text: string };
interface Section {
  entry_id: string;
  title: string;
  role: string;
  time?: string;
  parts: Part[];
}

function blockParts(content: unknown): Part[] {
  if (typeof content === "string") return [{ type: "text", text: content }];
  if (!Array.isArray(content))
    return content === undefined || content === null ? [] : [{ type: "code", text: jsonText(content), lang: "json" }];
  const parts: Part[] = [];
  for (const b of content) {
    if (!isJson(b)) continue;
    switch (b.type) {
      case "text":
        parts.push({ type: "text", text: str(b.text) ?? "" });
        break;
      case "thinking":
        parts.push({ type: "code", text: str(b.text) ?? "", lang: "text", label: "thinking" });
        break;
      case "image": {
        const data = str(b.data);
        parts.push({ type: "note", text: `[image ${str(b.mime) ?? "?"}${data ? `, ${Math.floor((data.length * 3) / 4)} bytes` : ""}]` });
        break;
      }
      case "function_call":
        parts.push({
          type: "code",
          text: jsonText(b.arguments),
          lang: "json",
          label: `call ${str(b.function_id) ?? "?"} (${str(b.id) ?? "?"})`,
        });
        break;
      case "function_result":
        parts.push({
          type: "code",
          text: blockParts(b.content)
            .map((p) => p.text)
            .join("\n"),
          lang: "text",
          label: `result of ${str(b.function_call_id) ?? "?"}`,
        });
        break;
      default:
        parts.push({ type: "code", text: jsonText(b), lang: "json", label: String(b.type) });
    }
  }
  return parts;
}

function sectionOf(e: ExportEntry): Section {
  const b = isJson(e.body) ? e.body : {};
  const base = { entry_id: e.entry_id, time: when(e.timestamp) };
  if (e.kind === "message" || e.kind === "custom_message") {
    const role = str(b.role) ?? "unknown";
    switch (role) {
      case "user":
        return { ...base, role, title: "User", parts: blockParts(b.content) };
      case "assistant": {
        const who = [str(b.model), str(b.provider)].filter((x) => x !== undefined && x !== "").join(" · ");
        const parts = blockParts(b.content);
        if (b.stop_reason === "error" || b.stop_reason === "aborted")
          parts.push({ type: "note", text: `[${String(b.stop_reason)}${str(b.error_message) ? `: ${str(b.error_message)}` : ""}]` });
        return { ...base, role, title: who ? `Assistant (${who})` : "Assistant", parts };
      }
      case "function_result": {
        const parts: Part[] = [
          {
            type: "code",
            text: blockParts(b.content)
              .map((p) => p.text)
              .join("\n"),
            lang: "text",
          },
        ];
        if (b.details !== undefined && b.details !== null)
          parts.push({ type: "code", text: jsonText(b.details), lang: "json", label: "details" });
        return { ...base, role, title: `Function result: ${str(b.function_id) ?? "?"}${b.is_error === true ? " (error)" : ""}`, parts };
      }
      case "custom": {
        const display = str(b.display);
        return {
          ...base,
          role,
          title: `Note: ${str(b.custom_type) ?? "custom"}`,
          parts: display !== undefined ? [{ type: "text", text: display }] : [{ type: "code", text: jsonText(b.content), lang: "json" }],
        };
      }
      default:
        return { ...base, role, title: role, parts: [{ type: "code", text: jsonText(e.body), lang: "json" }] };
    }
  }
  // compaction (its record in `content`), branch_summary and kinds added later: their summary,
  // else the body.
  const summary = str(b.summary) ?? (isJson(b.content) ? str(b.content.summary) : undefined);
  return {
    ...base,
    role: e.kind,
    title: e.kind === "compaction" ? "Compaction summary" : e.kind === "branch_summary" ? "Branch summary" : e.kind,
    parts: summary !== undefined ? [{ type: "text", text: summary }] : [{ type: "code", text: jsonText(e.body), lang: "json" }],
  };
}

// ------------------------------------------------------------------ formats

function renderJson(doc: ExportDocument): string {
  const entries = doc.entries.map((e) => {
    const out: Json = { entry_id: e.entry_id, parent_id: e.parent_id, kind: e.kind, timestamp: e.timestamp };
    if (e.kind === "message" || e.kind === "custom_message") out.message = e.body;
    else out.data = e.body;
    return out;
  });
  const head: Json = { session_id: doc.session_id };
  if (doc.display_name !== undefined) head.display_name = doc.display_name;
  if (doc.cwd !== undefined) head.cwd = doc.cwd;
  return `${JSON.stringify({ ...head, leaf_id: doc.leaf_id, entries }, null, 2)}\n`;
}

/** A fence longer than any run of backticks in `text`, so the block cannot be closed early. */
function fence(text: string): string {
  let longest = 0;
  for (const m of text.matchAll(/`+/g)) longest = Math.max(longest, m[0].length);
  return "`".repeat(Math.max(3, longest + 1));
}
const inlineCode = (s: string): string => {
  const f = "`".repeat(Math.max(1, ...Array.from(s.matchAll(/`+/g), (m) => m[0].length + 1)));
  return f.length > 1 ? `${f} ${s} ${f}` : `\`${s}\``;
};

function renderMarkdown(doc: ExportDocument): string {
  const lines: string[] = [`# ${doc.display_name ?? `Session ${doc.session_id}`}`, ""];
  lines.push(
    `Session ${inlineCode(doc.session_id)} · ${doc.entries.length} entries · leaf ${doc.leaf_id === null ? "none" : inlineCode(doc.leaf_id)}${doc.cwd ? ` · cwd ${inlineCode(doc.cwd)}` : ""}`,
    "",
  );
  for (const s of doc.entries.map(sectionOf)) {
    lines.push("---", "", `## ${s.title}`, "", `_${[s.time, `entry ${inlineCode(s.entry_id)}`].filter(Boolean).join(" · ")}_`, "");
    for (const p of s.parts) {
      if (p.type === "text") lines.push(p.text, "");
      else if (p.type === "note") lines.push(`_${p.text}_`, "");
      else {
        if (p.label) lines.push(`**${p.label}**`, "");
        const f = fence(p.text);
        lines.push(`${f}${p.lang}`, p.text, f, "");
      }
    }
  }
  return `${lines.join("\n").trimEnd()}\n`;
}

const HTML_ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
/** Text and attribute values alike: the five characters HTML gives meaning to. */
export const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);

const STYLE = `body{font:15px/1.5 system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#1d1d1f}
header p,.meta{color:#6e6e73;font-size:.85em}article{border-top:1px solid #ddd;padding:.5rem 0}
h2{font-size:1rem;margin:.5rem 0 .25rem}.text{white-space:pre-wrap}pre{background:#f5f5f7;padding:.5rem;overflow:auto;white-space:pre-wrap}
.role-user h2{color:#0a58ca}.role-assistant h2{color:#198754}.role-function_result h2{color:#6f42c1}.note{font-style:italic;color:#6e6e73}`;

function renderHtml(doc: ExportDocument): string {
  const title = escapeHtml(doc.display_name ?? `Session ${doc.session_id}`);
  const out: string[] = [
    "<!doctype html>",
    '<html lang="en">',
    `<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${title}</title><style>${STYLE}</style></head>`,
    "<body>",
    `<header><h1>${title}</h1><p>Session <code>${escapeHtml(doc.session_id)}</code> · ${doc.entries.length} entries · leaf ${doc.leaf_id === null ? "none" : `<code>${escapeHtml(doc.leaf_id)}</code>`}${doc.cwd ? ` · cwd <code>${escapeHtml(doc.cwd)}</code>` : ""}</p></header>`,
    "<main>",
  ];
  for (const s of doc.entries.map(sectionOf)) {
    const id = escapeHtml(s.entry_id);
    const cls = escapeHtml(s.role.replace(/[^A-Za-z0-9_-]/g, "_"));
    const meta = [s.time ? `<time datetime="${escapeHtml(s.time)}">${escapeHtml(s.time)}</time>` : undefined, `entry <code>${id}</code>`]
      .filter(Boolean)
      .join(" · ");
    out.push(
      `<article class="entry role-${cls}" id="entry-${id}" data-entry-id="${id}">`,
      `<h2>${escapeHtml(s.title)}</h2>`,
      `<p class="meta">${meta}</p>`,
    );
    for (const p of s.parts) {
      if (p.type === "text") out.push(`<div class="text">${escapeHtml(p.text)}</div>`);
      else if (p.type === "note") out.push(`<p class="note">${escapeHtml(p.text)}</p>`);
      else
        out.push(
          `${p.label ? `<p class="meta">${escapeHtml(p.label)}</p>` : ""}<pre><code class="language-${escapeHtml(p.lang)}">${escapeHtml(p.text)}</code></pre>`,
        );
    }
    out.push("</article>");
  }
  out.push("</main>", "</body>", "</html>", "");
  return out.join("\n");
}

export function renderExport(doc: ExportDocument, format: ExportFormat): string {
  return format === "json" ? renderJson(doc) : format === "markdown" ? renderMarkdown(doc) : renderHtml(doc);
}
