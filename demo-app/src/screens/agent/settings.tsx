// Which provider and model a new turn uses, and the provider's key. The key field is write-only:
// it goes to the credentials worker (`auth::set_token`), which stores it encrypted and never hands
// it back to a page; what the page sees is `auth::status` (configured, from where, a label).
import type { BudgetView, Model } from "@iii-edge/protocol/harness";
import { useEffect, useState } from "preact/hooks";
import { problem, type AuthStatusView, type Harness } from "./calls.ts";

export interface RunSettings {
  provider: string;
  model: string;
  budget_id: string;
}

const SETTINGS_KEY = "iii-console-agent-settings";

export function loadSettings(): RunSettings {
  try {
    const s = JSON.parse(localStorage.getItem(SETTINGS_KEY) ?? "{}") as Partial<RunSettings>;
    return { provider: s.provider ?? "", model: s.model ?? "", budget_id: s.budget_id ?? "" };
  } catch {
    return { provider: "", model: "", budget_id: "" };
  }
}
export function saveSettings(s: RunSettings): void {
  try {
    localStorage.setItem(SETTINGS_KEY, JSON.stringify(s));
  } catch {
    // private mode: settings last for this page only
  }
}

export function SettingsPanel(props: {
  api: Harness;
  online: boolean;
  settings: RunSettings;
  onChange: (s: RunSettings) => void;
  onConfigured: (configured: string[] | undefined) => void;
}) {
  const { api, settings } = props;
  const [models, setModels] = useState<Model[]>([]);
  const [configured, setConfigured] = useState<string[] | undefined>();
  const [status, setStatus] = useState<AuthStatusView>();
  const [budgets, setBudgets] = useState<BudgetView[]>([]);
  const [key, setKey] = useState("");
  const [msg, setMsg] = useState<{ kind: "ok" | "error"; text: string }>();
  const [loadError, setLoadError] = useState<string>();
  const [reload, setReload] = useState(0);

  useEffect(() => {
    if (!props.online) return;
    let alive = true;
    (async () => {
      try {
        const [m, p] = await Promise.all([api.models(), api.providers()]);
        if (!alive) return;
        setModels(m ?? []);
        setConfigured(p?.providers ?? []);
        props.onConfigured(p?.providers ?? []);
        setLoadError(undefined);
        // A first visit picks a configured provider and its first model.
        if (!settings.provider || !settings.model) {
          const provider = settings.provider || p?.providers?.[0] || m?.[0]?.provider || "";
          const model = settings.model || m?.find((x) => x.provider === provider)?.id || "";
          if (provider !== settings.provider || model !== settings.model) props.onChange({ ...settings, provider, model });
        }
      } catch (e) {
        if (alive) setLoadError(problem(e));
      }
      api.budgets().then(
        (b) => alive && setBudgets(b?.budgets ?? []),
        () => alive && setBudgets([]),
      );
    })();
    return () => {
      alive = false;
    };
  }, [props.online, reload]);

  useEffect(() => {
    if (!props.online || !settings.provider) return;
    let alive = true;
    api.authStatus(settings.provider).then(
      (s) => alive && setStatus(s),
      () => alive && setStatus(undefined),
    );
    return () => {
      alive = false;
    };
  }, [props.online, settings.provider, reload]);

  const providers = [...new Set([...models.map((m) => m.provider), ...(configured ?? [])])].sort();
  const providerModels = models.filter((m) => m.provider === settings.provider);

  const saveKey = async (e: Event) => {
    e.preventDefault();
    if (!key.trim()) return;
    setMsg(undefined);
    try {
      await api.setKey(settings.provider, key.trim());
      setKey("");
      setMsg({ kind: "ok", text: `Key for ${settings.provider} stored by the credentials worker.` });
      setReload((n) => n + 1);
    } catch (err) {
      setMsg({ kind: "error", text: problem(err) });
    }
  };
  const newBudget = async () => {
    try {
      const b = await api.createBudget(5, "console");
      props.onChange({ ...settings, budget_id: b.budget_id });
      setReload((n) => n + 1);
    } catch (err) {
      setMsg({ kind: "error", text: problem(err) });
    }
  };

  return (
    <section class="ac-settings" aria-labelledby="ac-settings-h">
      <h3 id="ac-settings-h">Model</h3>
      {loadError && (
        <p role="alert" class="ac-error">
          Could not read the models catalog: {loadError}
        </p>
      )}
      <div class="ac-row">
        <label>
          Provider
          <select
            id="agent-provider"
            value={settings.provider}
            onChange={(e) => {
              const provider = (e.target as HTMLSelectElement).value;
              props.onChange({ ...settings, provider, model: models.find((m) => m.provider === provider)?.id ?? "" });
            }}
          >
            {providers.length === 0 && <option value="">(none)</option>}
            {providers.map((p) => (
              <option key={p} value={p}>
                {p}
                {configured?.includes(p) ? "" : " (no key)"}
              </option>
            ))}
          </select>
        </label>
        <label>
          Model
          <select
            id="agent-model"
            value={settings.model}
            onChange={(e) => props.onChange({ ...settings, model: (e.target as HTMLSelectElement).value })}
          >
            {providerModels.length === 0 && settings.model && <option value={settings.model}>{settings.model}</option>}
            {providerModels.map((m) => (
              <option key={m.id} value={m.id}>
                {m.display_name ?? m.id}
              </option>
            ))}
          </select>
        </label>
        <label>
          Budget
          <select
            id="agent-budget"
            value={settings.budget_id}
            onChange={(e) => props.onChange({ ...settings, budget_id: (e.target as HTMLSelectElement).value })}
          >
            <option value="">none</option>
            {budgets.map((b) => (
              <option key={b.budget_id} value={b.budget_id}>
                {b.name ?? b.budget_id} (${b.remaining_usd.toFixed(2)} left)
              </option>
            ))}
            {settings.budget_id && !budgets.some((b) => b.budget_id === settings.budget_id) && (
              <option value={settings.budget_id}>{settings.budget_id}</option>
            )}
          </select>
        </label>
        <button type="button" class="btn btn-secondary" onClick={() => void newBudget()}>
          New $5 budget
        </button>
      </div>
      <p class="ac-muted" id="agent-key-status">
        {status
          ? status.configured
            ? `${settings.provider}: key configured (${status.source}${status.label ? `, ${status.label}` : ""})`
            : `${settings.provider}: no key${status.problem ? ` — ${status.problem}` : ""}`
          : ""}
      </p>
      <form class="ac-row" onSubmit={(e) => void saveKey(e)}>
        <label>
          API key for {settings.provider || "the provider"}
          <input
            type="password"
            autocomplete="off"
            spellcheck={false}
            value={key}
            onInput={(e) => setKey((e.target as HTMLInputElement).value)}
            placeholder="stored write-only"
          />
        </label>
        <button type="submit" class="btn btn-secondary" disabled={!key.trim() || !settings.provider}>
          Store key
        </button>
      </form>
      {msg && (
        <p role={msg.kind === "error" ? "alert" : "status"} class={msg.kind === "error" ? "ac-error" : "ac-ok"}>
          {msg.text}
        </p>
      )}
    </section>
  );
}
