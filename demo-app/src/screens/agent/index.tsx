// Placeholder until the agent screen lands (owned by the console's agent helper).
import type { ScreenProps } from "../../app/types.ts";

export default function Screen(_props: ScreenProps) {
  return <p>The agent screen is not built yet.</p>;
}
