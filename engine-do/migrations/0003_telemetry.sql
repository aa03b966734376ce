-- Observability (engine-do/src/core/telemetry): spans and log records of every namespace,
-- the engine's own and what workers send on /otel, queryable across namespaces (a trace crosses
-- them). Times in microseconds (INTEGER, exact in a JS number); `doc` is the rest of the record as
-- JSON (attributes, events, status message / body, attributes), `bytes` its size for the byte bound.
CREATE TABLE IF NOT EXISTS spans (
  trace_id TEXT NOT NULL,
  span_id TEXT NOT NULL,
  parent_span_id TEXT,
  namespace TEXT NOT NULL,
  name TEXT NOT NULL,
  kind TEXT,
  start_us INTEGER NOT NULL,
  end_us INTEGER NOT NULL,
  status TEXT NOT NULL,
  service_name TEXT NOT NULL,
  function_id TEXT,
  session_id TEXT,
  doc TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  PRIMARY KEY (trace_id, span_id)
);
CREATE INDEX IF NOT EXISTS spans_by_start ON spans (start_us);
CREATE INDEX IF NOT EXISTS spans_by_function ON spans (function_id, start_us) WHERE function_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS spans_by_session ON spans (session_id, start_us) WHERE session_id IS NOT NULL;

CREATE TABLE IF NOT EXISTS logs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  namespace TEXT NOT NULL,
  trace_id TEXT,
  span_id TEXT,
  time_us INTEGER NOT NULL,
  severity_number INTEGER,
  severity_text TEXT NOT NULL,
  service_name TEXT NOT NULL,
  doc TEXT NOT NULL,
  bytes INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS logs_by_time ON logs (time_us);
CREATE INDEX IF NOT EXISTS logs_by_trace ON logs (trace_id, time_us) WHERE trace_id IS NOT NULL;
