// The built-in rules: the text of the repo-root iii-permissions.yaml, used when no file and no
// III_PERMISSIONS is given (test/default-permissions.e2e.test.ts keeps the two identical).
export const DEFAULT_PERMISSIONS_YAML = `# iii-permissions.yaml: which functions the model may call through agent_trigger.
# Read by the policy worker (workers/policy, policy::check_permissions). Calls workers make to each
# other are not checked here; only calls made on behalf of the model are.
#
# Rules are read top to bottom and the FIRST rule that matches decides:
#   - state::get                 allow this exact function id
#   - 'models::*'                allow every id the glob matches ('*' = any characters, anchored;
#                                every other character is literal)
#   - '!shell::fs::write'        deny (quote it: an unquoted ! starts a YAML tag)
#   - rule_id: no-etc-writes     the object form: an id for the rule, a function (exact or glob),
#     function: shell::fs::write action allow or deny, and argument constraints that must ALL hold
#     action: deny               (each is { equals: <value> }, deep equality, or
#     args:                      { matches: '<regex>' }, a JavaScript regex on a string argument)
#       path: { matches: '^/etc/' }
# A call that no rule matches is not run until a person decides: the turn parks and waits for
# approval::resolve {session_id, function_call_id, decision: allow|deny}.
#
# Under the rules is a floor that no file lowers, checked before any rule is read:
#   - The kernel is closed to the model. A function registered with metadata \`model: "never"\` is
#     never run for it: the harness's own workers mark every function of theirs where they register
#     it (runs, turns, approvals, this policy, credentials, providers, prompts, transcripts,
#     budgets, hooks, models::register), and the engine marks every built-in but its reads (state
#     and stream writes, publish, queues, channels, bindings, traces). No rule opens them, not '*'.
#   - State and stream reads reach only the calling session's own data: state scope
#     \`session:<session_id>\` (and \`session:<session_id>:…\`), stream groups named by its session id.
#     Other sessions' turn records, run requests and transcripts are refused. Name further scopes a
#     model may read under \`state_scopes:\` and streams under \`stream_names:\` (lists of names or globs).
#   - A call the rules allow without asking runs on its own only when the function is served by the
#     engine, by the deployed Worker, or by a principal that \`trusted:\` names for its id. Served by
#     anyone else (a tenant that registered an id nobody held), it waits for a person instead.
#     Without \`trusted:\`, the principal trusted is \`anonymous\`: every connection of the open local
#     engine (\`npm start\` without AUTH_SECRET). With AUTH_SECRET set, name your services' \`sub\`s:
#
#       trusted:
#         'directory::*': [directory-svc]   # the token sub of the process that serves these
#         'weather::*': [weather-app, anonymous]
#
# The file is reloaded when it changes (the policy worker in Node) or passed to the Worker by
# npm start. A file that does not parse or validate is refused and the rules in force stay.
version: 1
rules:
  # ---- Sub-agents (workers/sub-agents): an agent may delegate part of its task on its own. Spawning
  # grants nothing the agent does not have: the child's calls meet these same rules (what needs a
  # person still waits for one, and the wait shows on the parent's event stream), an isolated run's
  # children are isolated, and the tree is bounded (3 deep, 8 running per session, 32 per run, the
  # parent's max_turns and budget). join and children reach only the caller's own sub-agents. To keep
  # agents from delegating, delete these three lines (each call then waits for a person).
  - harness::spawn
  - harness::join
  - harness::children

  # ---- Reads, allowed without asking: the session's own state and streams (see the floor above),
  # the models catalog, the function catalog, and the skills directory.
  - state::get
  - state::list
  - state::list_keys
  - stream::get
  - stream::list
  - stream::list_items
  - 'models::*'                     # models::list, models::get, models::supports
  - engine::functions::list
  - engine::functions::info
  - 'directory::skills::*'

  # ---- Sandbox workers (workers/sandbox-host): sandbox::spawn_worker has no rule on purpose, so
  # every call of it waits for a person. The worker it starts adds functions to the live catalog
  # that any worker, tab or agent can then call. An allow rule for 'sandbox::*' added below would
  # let the model do this on its own: allow sandbox::exec and friends by name instead.

  # Anything else needs a person's approval. Add allow rules below for what your agents may do on
  # their own, for example:
  #
  # - rule_id: tmp-writes
  #   function: shell::fs::write
  #   action: allow
  #   args:
  #     path: { matches: '^/tmp/' }
`;
