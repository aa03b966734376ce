// This tab is a worker: the functions it registers (a person confirms, a chart from data it is
// sent, facts only the browser knows, a greeting), how to call them from anywhere, the last chart
// drawn, and a log of the calls received and from whom.
import { useEffect, useState } from "preact/hooks";
import { useLive } from "../../app/live.ts";
import { tabWorker } from "../../app/tab.ts";
import type { ChartData, LoggedCall } from "../../app/tab-worker.ts";
import { listAll, type WorkerEntry } from "../../app/engine.ts";
import type { ScreenProps } from "../../app/types.ts";
import { Badge, Button, Json, Panel, Table } from "../../ui/index.tsx";

function useTab() {
  const tab = tabWorker();
  const [, force] = useState(0);
  useEffect(() => tab.subscribe(() => force((n) => n + 1)), [tab]);
  return tab;
}

export default function TabScreen({ iii, navigate }: ScreenProps) {
  const tab = useTab();
  const workers = useLive(() => listAll<WorkerEntry>(iii, "engine::workers::list", "workers"), [], { events: ["workers"] });
  const names = new Map((workers.data ?? []).map((w) => [w.id, w.name]));
  const who = (id: string | null) =>
    id === null
      ? "unknown (an HTTP caller or a non-object payload)"
      : id === iii.workerId
        ? "this tab"
        : names.get(id)
          ? `${names.get(id)} (${id.slice(0, 8)})`
          : id;
  const origin = location.origin;
  const fns = [
    {
      id: tab.fn("confirm"),
      what: "asks you to confirm, here, and answers the caller with your choice",
      example: { question: "Deploy to production?" },
    },
    {
      id: tab.fn("chart"),
      what: "draws a bar chart of the data it is sent, below",
      example: {
        title: "Requests per hour",
        points: [
          { label: "09", value: 12 },
          { label: "10", value: 30 },
          { label: "11", value: 21 },
        ],
      },
    },
    { id: tab.fn("facts"), what: "answers what only this browser knows: time zone, languages, screen, online", example: {} },
    { id: tab.fn("greet"), what: "greets the caller by name", example: { name: "curl" } },
  ];
  const self = async (fn: string, payload: unknown) => {
    try {
      await iii.trigger({ function_id: fn, payload });
    } catch {
      // shown in the log
    }
  };
  return (
    <div class="screen tab">
      <h1 class="sr-only">This tab is a worker</h1>
      <Panel
        id="tab-panel"
        title="This tab is a worker"
        hint={
          <>
            This page connected to the engine as worker <code id="tab-worker-name">{tab.prefix}</code> and registered the functions below.
            The backend, another tab, a Worker or <code>curl</code> calls them like any other function; the call travels over this tab's
            WebSocket.
          </>
        }
      >
        <Table
          id="tab-functions"
          caption="Functions this tab registers"
          rows={fns}
          rowKey={(f) => f.id}
          columns={[
            {
              key: "id",
              label: "Function",
              render: (f) => (
                <a
                  href={`#/catalog?fn=${encodeURIComponent(f.id)}`}
                  onClick={(e) => {
                    e.preventDefault();
                    navigate(`/catalog?fn=${encodeURIComponent(f.id)}`);
                  }}
                >
                  <code data-tab-fn={f.id}>{f.id}</code>
                </a>
              ),
            },
            { key: "what", label: "What it does", render: (f) => f.what },
            {
              key: "try",
              label: "Call it",
              render: (f) => (
                <Button onClick={() => self(f.id, f.example)} aria-label={`Call ${f.id} from this tab`}>
                  call from here
                </Button>
              ),
            },
          ]}
        />
        <p class="hint">
          From a shell (with auth on, add <code>-H "Authorization: Bearer $III_TOKEN"</code>):
        </p>
        <pre
          id="curl"
          class="json"
        >{`curl -s ${origin}/_iii/invoke -d '${JSON.stringify({ function_id: tab.fn("facts"), payload: {} })}'`}</pre>
      </Panel>
      <Panel
        id="chart-panel"
        title="Last chart drawn"
        hint={
          <>
            Drawn by <code>{tab.fn("chart")}</code> from the points it was sent.
          </>
        }
      >
        {tab.chart ? (
          <Chart chart={tab.chart} who={who} />
        ) : (
          <p class="empty">
            No chart yet: call <code>{tab.fn("chart")}</code>.
          </p>
        )}
      </Panel>
      <Panel id="calls-panel" title="Calls received" count={tab.calls.length}>
        <p>
          Calls received: <strong id="invoked">{tab.calls.length}</strong>
        </p>
        <CallLog calls={tab.calls} who={who} />
      </Panel>
    </div>
  );
}

function CallLog({ calls, who }: { calls: LoggedCall[]; who: (id: string | null) => string }) {
  return (
    <Table
      id="call-log"
      caption="Calls this tab received, newest first"
      rows={calls}
      rowKey={(c) => `${c.at}-${c.function_id}-${calls.indexOf(c)}`}
      empty="No calls yet."
      columns={[
        {
          key: "at",
          label: "When",
          render: (c) => <time dateTime={new Date(c.at).toISOString()}>{new Date(c.at).toLocaleTimeString()}</time>,
        },
        { key: "fn", label: "Function", render: (c) => <code>{c.function_id.split("::").pop()}</code> },
        {
          key: "from",
          label: "From",
          render: (c) => (
            <span class="caller" data-caller={c.caller ?? ""}>
              {who(c.caller)}
            </span>
          ),
        },
        {
          key: "outcome",
          label: "Outcome",
          render: (c) => (
            <Badge kind={c.outcome === "ok" ? "ok" : c.outcome === "error" ? "error" : "warn"}>
              {c.outcome}
              {c.ms !== undefined ? ` · ${c.ms.toFixed(0)} ms` : ""}
            </Badge>
          ),
        },
        {
          key: "payload",
          label: "Payload → result",
          wide: true,
          render: (c) => (
            <details>
              <summary>show</summary>
              <Json value={{ payload: c.payload, result: c.result }} />
            </details>
          ),
        },
      ]}
    />
  );
}

/** A bar chart as inline SVG: one bar per point, scaled to the largest value. */
function Chart({ chart, who }: { chart: ChartData; who: (id: string | null) => string }) {
  const W = 600;
  const H = 240;
  const pad = { top: 16, bottom: 36, left: 40, right: 8 };
  const max = Math.max(1, ...chart.points.map((p) => Math.abs(p.value)));
  const bw = (W - pad.left - pad.right) / chart.points.length;
  const y = (v: number) => pad.top + (H - pad.top - pad.bottom) * (1 - Math.max(0, v) / max);
  return (
    <figure class="chart" id="chart">
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-labelledby="chart-title">
        <title id="chart-title">
          {chart.title}: {chart.points.map((p) => `${p.label} ${p.value}`).join(", ")}
        </title>
        <line x1={pad.left} x2={W - pad.right} y1={y(0)} y2={y(0)} class="axis" />
        <text x={pad.left - 6} y={y(max) + 4} class="tick" text-anchor="end">
          {max}
        </text>
        <text x={pad.left - 6} y={y(0) + 4} class="tick" text-anchor="end">
          0
        </text>
        {chart.points.map((p, i) => (
          <g key={i}>
            <rect class="bar" x={pad.left + i * bw + bw * 0.1} width={bw * 0.8} y={y(p.value)} height={Math.max(0, y(0) - y(p.value))}>
              <title>{`${p.label}: ${p.value}`}</title>
            </rect>
            <text x={pad.left + i * bw + bw / 2} y={H - pad.bottom + 16} class="label" text-anchor="middle">
              {p.label}
            </text>
          </g>
        ))}
      </svg>
      <figcaption>
        {chart.title} — sent by {who(chart.caller)} at {new Date(chart.at).toLocaleTimeString()}
      </figcaption>
    </figure>
  );
}
