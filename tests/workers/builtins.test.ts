// Built-in functions and trigger types in workerd, through the engine Worker (the cases:
// builtins.case.ts, also run on the engine core in tests/unit/builtins.test.ts).
import { exports } from "cloudflare:workers";
import "./wire.ts";
import { builtinsCases } from "./builtins.case.ts";

builtinsCases({
  invokeHttp: (body) => exports.default.fetch("http://localhost/_iii/invoke", { method: "POST", body: JSON.stringify(body) }),
});
