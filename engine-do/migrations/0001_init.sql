-- Global, queryable records shared by every namespace's engine object.

-- Dead letters: messages whose handler failed past max_retries (queues and durable subscribers).
CREATE TABLE IF NOT EXISTS dead_letters (
  id TEXT PRIMARY KEY,
  namespace TEXT NOT NULL,
  queue TEXT NOT NULL,
  function_id TEXT NOT NULL,
  data TEXT NOT NULL,
  attempts INTEGER NOT NULL,
  last_error TEXT NOT NULL,
  enqueued_at INTEGER NOT NULL,
  failed_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS dead_letters_by_queue ON dead_letters (namespace, queue, failed_at);
