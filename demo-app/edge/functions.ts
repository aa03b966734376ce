// Placeholder until sdk-edge's FunctionHost lands: an edge host with no functions.
import { WorkerEntrypoint } from "cloudflare:workers";

export class DemoEdgeFunctions extends WorkerEntrypoint {
  async iiiManifest() {
    return { functions: [], triggers: [] };
  }
  async iiiInvoke(req: { function_id: string }) {
    return { error: { code: "function_not_found", message: `Function ${req.function_id} not found` } };
  }
}
