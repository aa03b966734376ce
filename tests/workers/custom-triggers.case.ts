// Worker-provided trigger types (protocol/README.md §3.6–3.10, §8.10): bindings parked until a
// provider exists, delivered when one appears, the provider's errors forwarded to the binding's
// owner, and unregistertrigger forwarded to the provider. One suite of cases run on both engines:
// in workerd (custom-triggers.test.ts) and on the engine core in-process
// (tests/unit/custom-triggers.test.ts).
import { afterEach, describe, expect, it } from "vitest";
import { Wires, sleep, type Frame } from "./wire-core.ts";

export function customTriggerCases(): void {
  const wires = new Wires();
  afterEach(() => wires.closeAll());

  const regs = async (w: Awaited<ReturnType<Wires["connect"]>>, type: string) =>
    ((await w.ok("engine::registered-triggers::list", { trigger_type: type })) as { registered_triggers: Frame[] }).registered_triggers;

  describe("custom trigger types", () => {
    it("parks a binding to an unknown type (no error, no reply) and delivers it when a provider registers the type", async () => {
      const binding = {
        type: "registertrigger",
        id: "ct-park",
        trigger_type: "ct::late",
        function_id: "ct::fn",
        config: { path: "/x" },
        metadata: { m: 1 },
      };
      const owner = await wires.connect();
      // The provider gets the binding as it was registered, without the sender's message_type.
      owner.send({ ...binding, message_type: "registertrigger" });
      await owner.ok("state::list_groups");
      expect(owner.frames.filter((f) => f.type !== "workerregistered" && f.type !== "invocationresult")).toEqual([]);
      expect(await regs(owner, "ct::late")).toEqual([expect.objectContaining({ id: "ct-park", status: "parked" })]);

      const provider = await wires.connect();
      provider.send({ type: "registertriggertype", id: "ct::late", description: "arrives late" });
      expect(await provider.next((f) => f.type === "registertrigger")).toEqual(binding);
      expect(await regs(owner, "ct::late")).toEqual([expect.objectContaining({ id: "ct-park", status: "active" })]);
      // The provider acknowledges success: nothing reaches the owner.
      provider.send({ type: "triggerregistrationresult", id: "ct-park", trigger_type: "ct::late", function_id: "ct::fn" });
      await sleep(50);
      expect(owner.all("triggerregistrationresult")).toEqual([]);
    });

    it("forwards a new binding to a live provider at once, and a missing config as null", async () => {
      const provider = await wires.connect();
      provider.send({ type: "registertriggertype", id: "ct::live", description: "live" });
      await provider.ok("state::list_groups");
      const owner = await wires.connect();
      owner.send({ type: "registertrigger", id: "ct-live", trigger_type: "ct::live", function_id: "ct::fn" });
      expect(await provider.next((f) => f.type === "registertrigger")).toEqual({
        type: "registertrigger",
        id: "ct-live",
        trigger_type: "ct::live",
        function_id: "ct::fn",
        config: null,
      });
    });

    it("forwards the provider's triggerregistrationresult error to the binding's owner and parks the binding", async () => {
      const provider = await wires.connect();
      provider.send({ type: "registertriggertype", id: "ct::picky", description: "refuses some configs" });
      const owner = await wires.connect();
      owner.send({
        type: "registertrigger",
        id: "ct-rejected",
        trigger_type: "ct::picky",
        function_id: "ct::fn",
        config: { reject: true },
      });
      await provider.next((f) => f.type === "registertrigger" && f.id === "ct-rejected");
      const error = { code: "trigger_registration_failed", message: "config.reject was set" };
      // A non-provider cannot spoof it.
      const stranger = await wires.connect();
      // The binding's result, as the provider sends it and the owner gets it.
      const result = { type: "triggerregistrationresult", id: "ct-rejected", trigger_type: "ct::picky", function_id: "ct::fn" };
      stranger.send({ ...result, error: { code: "x", message: "spoofed" } });
      await stranger.ok("state::list_groups");
      expect(owner.all("triggerregistrationresult")).toEqual([]);

      provider.send({ ...result, error, message_type: "triggerregistrationresult" });
      expect(await owner.next((f) => f.type === "triggerregistrationresult")).toEqual({ ...result, error });
      expect(await regs(owner, "ct::picky")).toEqual([expect.objectContaining({ id: "ct-rejected", status: "parked" })]);
      // A restarted provider gets the parked binding again.
      await provider.close();
      const provider2 = await wires.connect();
      provider2.send({ type: "registertriggertype", id: "ct::picky", description: "again" });
      expect(await provider2.next((f) => f.type === "registertrigger")).toMatchObject({ id: "ct-rejected" });
    });

    it("forwards unregistertrigger to the provider (owner unregisters, and owner disconnects)", async () => {
      const provider = await wires.connect();
      provider.send({ type: "registertriggertype", id: "ct::unreg", description: "t" });
      const owner = await wires.connect();
      owner.send({ type: "registertrigger", id: "ct-u1", trigger_type: "ct::unreg", function_id: "ct::fn", config: {} });
      owner.send({ type: "registertrigger", id: "ct-u2", trigger_type: "ct::unreg", function_id: "ct::fn", config: {} });
      await provider.next((f) => f.type === "registertrigger" && f.id === "ct-u2");
      // Another worker may not remove it (iii-edge checks ownership; 0.22.1 did not).
      const stranger = await wires.connect();
      stranger.send({ type: "unregistertrigger", id: "ct-u1", trigger_type: "ct::unreg" });
      expect((await stranger.next((f) => f.type === "error")).error.code).toBe("forbidden");

      owner.send({ type: "unregistertrigger", id: "ct-u1", trigger_type: "ct::unreg", message_type: "unregistertrigger" });
      expect(await provider.next((f) => f.type === "unregistertrigger")).toEqual({
        type: "unregistertrigger",
        id: "ct-u1",
        trigger_type: "ct::unreg",
      });
      await owner.close();
      expect(await provider.next((f) => f.type === "unregistertrigger")).toEqual({
        type: "unregistertrigger",
        id: "ct-u2",
        trigger_type: "ct::unreg",
      });
      expect(await regs(provider, "ct::unreg")).toEqual([]);
    });

    it("parks other workers' bindings when the provider disconnects and re-delivers them to the next provider; drops bindings of gone owners", async () => {
      const p1 = await wires.connect();
      p1.send({ type: "registertriggertype", id: "ct::moving", description: "t" });
      const owner = await wires.connect();
      const goneOwner = await wires.connect();
      owner.send({ type: "registertrigger", id: "ct-m1", trigger_type: "ct::moving", function_id: "ct::fn", config: { n: 1 } });
      goneOwner.send({ type: "registertrigger", id: "ct-m2", trigger_type: "ct::moving", function_id: "ct::fn", config: { n: 2 } });
      await p1.next((f) => f.type === "registertrigger" && f.id === "ct-m2");
      await p1.close();
      await sleep(30);
      expect((await regs(owner, "ct::moving")).map((t) => [t.id, t.status])).toEqual([
        ["ct-m1", "parked"],
        ["ct-m2", "parked"],
      ]);
      await goneOwner.close();
      const p2 = await wires.connect();
      p2.send({ type: "registertriggertype", id: "ct::moving", description: "t2" });
      await p2.ok("state::list_groups");
      expect(p2.all("registertrigger").map((f) => f.id)).toEqual(["ct-m1"]);
      // The provider's type is listed under its new owner.
      const types = ((await p2.ok("engine::triggers::list")) as { triggers: Frame[] }).triggers;
      expect(types.find((t) => t.id === "ct::moving")).toMatchObject({ worker_name: p2.workerId, description: "t2" });
    });

    it("re-sending a registertrigger with the same id (the SDK's reconnect replay) replaces it and re-delivers it", async () => {
      const provider = await wires.connect();
      provider.send({ type: "registertriggertype", id: "ct::replay", description: "t" });
      const owner = await wires.connect();
      owner.send({ type: "registertrigger", id: "ct-r", trigger_type: "ct::replay", function_id: "ct::fn", config: { v: 1 } });
      owner.send({ type: "registertrigger", id: "ct-r", trigger_type: "ct::replay", function_id: "ct::fn", config: { v: 2 } });
      await provider.next((f) => f.type === "registertrigger" && f.config?.v === 2);
      expect((await regs(owner, "ct::replay")).map((t) => t.config)).toEqual([{ v: 2 }]);
    });
  });
}
