# The same Sink under bare workerd (no wrangler, no proxy, no inspector unless asked for): see
# inspector.mjs, which sets the port (--socket-addr http=…) and the storage dir (--directory-path disk=…).
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [ (name = "main", worker = .sink), (name = "disk", disk = (path = "/tmp", writable = true)) ],
  sockets = [ (name = "http", address = "127.0.0.1:8080", http = (), service = "main") ],
);

const sink :Workerd.Worker = (
  modules = [ (name = "sink.js", esModule = embed "sink.js") ],
  compatibilityDate = "2026-10-01",
  bindings = [ (name = "SINK", durableObjectNamespace = "Sink") ],
  durableObjectNamespaces = [ (className = "Sink", uniqueKey = "ws-sink", enableSql = true) ],
  durableObjectStorage = (localDisk = "disk"),
);
