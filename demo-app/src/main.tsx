// The console's entry: connect this tab as a worker, register what it does as one, render the shell.
import { render } from "preact";
import { App } from "./app/App.tsx";
import { ConsoleConnection } from "./app/connection.ts";
import { setConnection } from "./app/live.ts";
import { setTabWorker } from "./app/tab.ts";
import { TabWorker } from "./app/tab-worker.ts";
import "./ui/ui.css";

const conn = new ConsoleConnection();
setConnection(conn);
const tab = new TabWorker(conn.iii, conn.workerName);
setTabWorker(tab);
// For the browser console and the tests: `await iii.trigger({function_id: "state::list_groups"})`.
Object.assign(window, { iii: conn.iii, iiiFetch: (path: string, init?: RequestInit) => conn.fetch(path, init), iiiConsole: { conn, tab } });
render(<App conn={conn} tab={tab} />, document.getElementById("app")!);
