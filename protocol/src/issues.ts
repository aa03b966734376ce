// How a schema's refusal is put into words, once for every package: `path: message` for the first
// issue (or each, joined by "; "), the path dotted (`messages.0.role`). A refusal at the root has no
// path: it reads as the message alone, or as `root: message` where the caller names the whole value.

/** What a schema's failure carries: zod's `ZodError`, taken structurally so callers need no zod type. */
export interface SchemaIssues {
  readonly issues: readonly { readonly path: readonly PropertyKey[]; readonly message: string }[];
}

export interface IssueFormat {
  /** Every issue, joined by "; " (default: the first only; one is usually enough to fix the input). */
  all?: boolean;
  /** What an issue at the root is called (`request`, `RBAC`); absent: the message stands alone. */
  root?: string;
}

/** The issues of a failed parse as one line; "invalid" when it carries none. */
export function formatIssues(error: SchemaIssues, format: IssueFormat = {}): string {
  const picked = format.all ? error.issues : error.issues.slice(0, 1);
  if (picked.length === 0) return "invalid";
  return picked
    .map((i) => {
      const where = i.path.map(String).join(".") || format.root;
      return where ? `${where}: ${i.message}` : i.message;
    })
    .join("; ");
}
