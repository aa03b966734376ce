// A form generated from a function's request schema (schema.ts): one labelled control per field,
// fieldsets for nested objects, add/remove for arrays, a select for enums, and a JSON textarea
// for whatever the schema does not describe as fields. Validation runs before anything is sent;
// problems show beside their field and in a summary. The whole payload can be edited as JSON too.
import { useEffect, useId, useState } from "preact/hooks";
import { Button } from "../ui/index.tsx";
import { MAX_FORM_DEPTH, kindOf, resolve, templateOf, validate, type JsonSchema, type Problem } from "./schema.ts";

/** A JSON textarea whose text does not parse (yet): kept in the value so the send is refused. */
export class BadJson {
  readonly text: string;
  readonly message: string;
  constructor(text: string, message: string) {
    this.text = text;
    this.message = message;
  }
}

/** Problems with `value` against `schema`, JSON that does not parse included. */
export function problemsOf(schema: JsonSchema | undefined, value: unknown): Problem[] {
  const bad: Problem[] = [];
  const walk = (v: unknown, path: string) => {
    if (v instanceof BadJson) bad.push({ path, message: `is not JSON: ${v.message}` });
    else if (Array.isArray(v)) v.forEach((x, i) => walk(x, `${path}[${i}]`));
    else if (v && typeof v === "object") for (const [k, x] of Object.entries(v)) walk(x, path ? `${path}.${k}` : k);
  };
  walk(value, "");
  return bad.length ? bad : validate(schema, value);
}

/** Whether `schema` can be shown as fields at the top (else: JSON only). */
export function formable(schema: JsonSchema | undefined): boolean {
  if (!schema) return false;
  const k = kindOf(resolve(schema, schema).schema);
  return k !== "json";
}

interface FieldProps {
  schema: JsonSchema | undefined;
  root: JsonSchema;
  value: unknown;
  onChange: (v: unknown) => void;
  path: string;
  label: string;
  required: boolean;
  problems: Map<string, string>;
  depth: number;
}

export function SchemaFields(props: { schema: JsonSchema; value: unknown; onChange: (v: unknown) => void; problems: Problem[] }) {
  const problems = new Map(props.problems.map((p) => [p.path, p.message]));
  return (
    <FieldFor
      schema={props.schema}
      root={props.schema}
      value={props.value}
      onChange={props.onChange}
      path=""
      label="payload"
      required
      problems={problems}
      depth={0}
    />
  );
}

function FieldFor(p: FieldProps) {
  const { schema: s, nullable } = resolve(p.schema, p.root, p.depth);
  const kind = p.depth > MAX_FORM_DEPTH ? "json" : kindOf(s);
  const id = useId();
  const problem = p.problems.get(p.path);
  const errId = problem ? `${id}-err` : undefined;
  const describe = s.description ? `${id}-desc` : undefined;
  const describedBy = [describe, errId].filter(Boolean).join(" ") || undefined;
  const label = (
    <label for={id}>
      <code>{p.label}</code>
      {p.required ? (
        <span class="req" aria-hidden="true">
          {" "}
          *
        </span>
      ) : (
        <span class="opt"> (optional)</span>
      )}
      {s.type && <span class="type"> {Array.isArray(s.type) ? s.type.join("|") : s.type}</span>}
    </label>
  );
  const help = (
    <>
      {s.description && (
        <small id={describe} class="hint">
          {s.description}
        </small>
      )}
      {problem && (
        <small id={errId} class="error">
          {p.path || "payload"} {problem}
        </small>
      )}
    </>
  );
  const common = {
    id,
    "aria-describedby": describedBy,
    "aria-invalid": problem ? ("true" as const) : undefined,
    "aria-required": p.required ? ("true" as const) : undefined,
    "data-path": p.path,
  };

  if (kind === "object") {
    const obj = (p.value && typeof p.value === "object" && !Array.isArray(p.value) ? p.value : {}) as Record<string, unknown>;
    const required = new Set(s.required ?? []);
    const set = (k: string, v: unknown) => {
      const next = { ...obj };
      if (v === undefined) delete next[k];
      else next[k] = v;
      p.onChange(next);
    };
    const body = Object.entries(s.properties ?? {}).map(([k, sub]) => (
      <FieldFor
        key={k}
        schema={sub}
        root={p.root}
        value={obj[k]}
        onChange={(v) => set(k, v)}
        path={p.path ? `${p.path}.${k}` : k}
        label={k}
        required={required.has(k)}
        problems={p.problems}
        depth={p.depth + 1}
      />
    ));
    if (p.depth === 0)
      return (
        <div class="form-fields" data-path="">
          {body.length ? body : <p class="hint">This function takes an empty object.</p>}
          {help}
        </div>
      );
    if (p.value === undefined && !p.required) {
      return (
        <div class="field">
          <span class="field-label">
            <code>{p.label}</code> <span class="opt">(optional object)</span>
          </span>
          <Button variant="link" onClick={() => p.onChange(templateOf(s, p.root, p.depth))}>
            Add {p.label}
          </Button>
        </div>
      );
    }
    return (
      <fieldset class="nested" data-path={p.path}>
        <legend>
          <code>{p.label}</code>
          {!p.required && (
            <Button variant="link" onClick={() => p.onChange(undefined)} aria-label={`Remove ${p.label}`}>
              remove
            </Button>
          )}
        </legend>
        {body}
        {help}
      </fieldset>
    );
  }

  if (kind === "array") {
    const items = Array.isArray(p.value) ? p.value : [];
    const itemSchema = s.items as JsonSchema;
    return (
      <fieldset class="nested" data-path={p.path}>
        <legend>
          <code>{p.label}</code> <span class="type">array</span>
          {!p.required && <span class="opt"> (optional)</span>}
        </legend>
        {items.map((v, i) => (
          <div class="array-item" key={i}>
            <FieldFor
              schema={itemSchema}
              root={p.root}
              value={v}
              onChange={(nv) => p.onChange(items.map((x, j) => (j === i ? nv : x)))}
              path={`${p.path}[${i}]`}
              label={`${p.label}[${i}]`}
              required
              problems={p.problems}
              depth={p.depth + 1}
            />
            <Button variant="link" onClick={() => p.onChange(items.filter((_, j) => j !== i))} aria-label={`Remove ${p.label}[${i}]`}>
              remove
            </Button>
          </div>
        ))}
        <Button onClick={() => p.onChange([...items, templateOf(itemSchema, p.root, p.depth + 1)])}>Add to {p.label}</Button>
        {help}
      </fieldset>
    );
  }

  if (kind === "enum") {
    const options = "const" in s ? [s.const] : (s.enum ?? []);
    const idx = options.findIndex((o) => JSON.stringify(o) === JSON.stringify(p.value));
    return (
      <div class="field">
        {label}
        <select
          {...common}
          value={idx < 0 ? "" : String(idx)}
          onChange={(e) => {
            const v = (e.currentTarget as HTMLSelectElement).value;
            p.onChange(v === "" ? undefined : options[Number(v)]);
          }}
        >
          {(!p.required || idx < 0) && <option value="">{p.required ? "choose…" : "(not set)"}</option>}
          {options.map((o, i) => (
            <option key={i} value={String(i)}>
              {typeof o === "string" ? o : JSON.stringify(o)}
            </option>
          ))}
        </select>
        {help}
      </div>
    );
  }

  if (kind === "boolean") {
    if (p.required && !nullable) {
      return (
        <div class="field field-inline">
          <input
            type="checkbox"
            {...common}
            checked={p.value === true}
            onChange={(e) => p.onChange((e.currentTarget as HTMLInputElement).checked)}
          />
          {label}
          {help}
        </div>
      );
    }
    return (
      <div class="field">
        {label}
        <select
          {...common}
          value={p.value === true ? "true" : p.value === false ? "false" : ""}
          onChange={(e) => {
            const v = (e.currentTarget as HTMLSelectElement).value;
            p.onChange(v === "" ? undefined : v === "true");
          }}
        >
          <option value="">(not set)</option>
          <option value="true">true</option>
          <option value="false">false</option>
        </select>
        {help}
      </div>
    );
  }

  if (kind === "number" || kind === "integer") {
    return (
      <div class="field">
        {label}
        <input
          type="number"
          inputMode={kind === "integer" ? "numeric" : "decimal"}
          step={kind === "integer" ? 1 : "any"}
          min={s.minimum}
          max={s.maximum}
          {...common}
          value={typeof p.value === "number" ? String(p.value) : ""}
          onInput={(e) => {
            const t = (e.currentTarget as HTMLInputElement).value;
            p.onChange(t === "" ? undefined : Number(t));
          }}
        />
        {help}
      </div>
    );
  }

  if (kind === "string") {
    const long = (s.maxLength ?? 0) > 200 || /text|prompt|content|body|message/i.test(p.label);
    const onInput = (e: Event) => {
      const t = (e.currentTarget as HTMLInputElement | HTMLTextAreaElement).value;
      p.onChange(t === "" && !p.required ? undefined : t);
    };
    return (
      <div class="field">
        {label}
        {long ? (
          <textarea rows={3} {...common} value={typeof p.value === "string" ? p.value : ""} onInput={onInput} />
        ) : (
          <input
            type={(s.format === "email" ? "email" : s.format === "uri" ? "url" : "text") as "text"}
            {...common}
            minLength={s.minLength}
            maxLength={s.maxLength}
            value={typeof p.value === "string" ? p.value : ""}
            onInput={onInput}
          />
        )}
        {help}
      </div>
    );
  }

  if (kind === "null")
    return (
      <div class="field">
        <span class="field-label">
          <code>{p.label}</code> is always null
        </span>
      </div>
    );

  // Anything else: JSON.
  return (
    <div class="field">
      {label}
      <JsonArea {...common} value={p.value} onChange={p.onChange} rows={3} />
      {help}
    </div>
  );
}

/** A textarea holding JSON: parsed on every edit; text that does not parse becomes a BadJson. */
export function JsonArea({
  value,
  onChange,
  rows = 6,
  ...rest
}: {
  value: unknown;
  onChange: (v: unknown) => void;
  rows?: number;
  id?: string;
  "aria-describedby"?: string;
  "aria-label"?: string;
  "data-path"?: string;
}) {
  const asText = (v: unknown) => (v instanceof BadJson ? v.text : v === undefined ? "" : JSON.stringify(v, null, 2));
  const [text, setText] = useState(asText(value));
  // Follow changes made elsewhere (the form view, a new template) unless they are this text's.
  useEffect(() => {
    if (value instanceof BadJson) return;
    try {
      if (text.trim() !== "" && JSON.stringify(JSON.parse(text)) === JSON.stringify(value)) return;
    } catch {
      // fall through: replace
    }
    setText(asText(value));
  }, [value]);
  return (
    <textarea
      {...rest}
      class="json-input"
      rows={rows}
      spellcheck={false}
      value={text}
      onInput={(e) => {
        const t = (e.currentTarget as HTMLTextAreaElement).value;
        setText(t);
        if (t.trim() === "") return onChange(undefined);
        try {
          onChange(JSON.parse(t));
        } catch (err) {
          onChange(new BadJson(t, err instanceof Error ? err.message : String(err)));
        }
      }}
    />
  );
}
