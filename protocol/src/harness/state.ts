// Where a worker keeps a value in engine state: `{scope, key}`, the two fields `state::get|set|
// update|delete` take. Each worker's contract file builds the keys of the scopes that worker owns
// (`approvalState`, `budgetState`, …), so a key's format is written once, next to its scope's name,
// and the owner and every reader it allows build the same key.

/** One value's place in engine state. */
export interface StateKey {
  scope: string;
  key: string;
}
