// The default rank loader in a Worker bundle (package.json "imports" `#default-ranks`, condition
// `workerd`): none. The tables stay out of the script; the Worker's composition passes the loader
// that reads them from its static assets (index.ts), and a Worker without them says so.
import { noRanks, RANK_ASSET_DIR } from "./ranks.ts";

export const defaultRanks = noRanks(
  `a Worker reads the rank tables through its ASSETS binding (${RANK_ASSET_DIR}), and this one was given none`,
);
