// The frame fuzz at full size on the engine core served in this process: 10 000 hostile frames
// over 4 sockets, the cases of tests/workers/fuzz.case.ts (workerd runs a smoke of the same suite
// beside the front door's HTTP fuzz). The seed is printed; FUZZ_SEED=<n> replays a run.
import { fuzzSeed } from "@iii-edge/test-support/fuzz-input";
import { frameFuzzCases, useFuzzBaseline } from "../workers/fuzz.case.ts";
import { useNodeEngine } from "./node-wire.ts";

const SEED = fuzzSeed(process.env.FUZZ_SEED);

useNodeEngine();
frameFuzzCases(useFuzzBaseline("engine core", SEED), SEED, { frames: 10_000, batch: 500, sockets: 4 });
