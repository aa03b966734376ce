// Placeholder until the traces screen lands (owned by the console's traces helper).
import type { ScreenProps } from "../../app/types.ts";

export default function Screen(_props: ScreenProps) {
  return <p>The traces screen is not built yet.</p>;
}
