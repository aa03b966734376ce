// The built-in rules: the text of the repo-root iii-permissions.yaml, used when no file and no
// III_PERMISSIONS is given (test/default-permissions.test.ts keeps the two identical).
export const DEFAULT_PERMISSIONS_YAML = `# iii-permissions.yaml: which functions the model may call through agent_trigger.
# Read by the policy worker (workers/policy, policy::check_permissions). Calls workers make to each
# other are not checked here; only calls made on behalf of the model are.
#
# Rules are read top to bottom and the FIRST rule that matches decides:
#   - state::get                 allow this exact function id
#   - 'models::*'                allow every id the glob matches ('*' = any characters, anchored;
#                                every other character is literal)
#   - '!state::set'              deny (quote it: an unquoted ! starts a YAML tag)
#   - rule_id: no-etc-writes     the object form: an id for the rule, a function (exact or glob),
#     function: shell::fs::write action allow or deny, and argument constraints that must ALL hold
#     action: deny               (each is { equals: <value> }, deep equality, or
#     args:                      { matches: '<regex>' }, a JavaScript regex on a string argument)
#       path: { matches: '^/etc/' }
# A call that no rule matches is not run until a person decides: the turn parks and waits for
# approval::resolve {session_id, function_call_id, decision: allow|deny}.
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
  # agents from delegating, delete these three lines ('!harness::*' below then denies them).
  - harness::spawn
  - harness::join
  - harness::children

  # ---- The kernel: denied to the model outright, never asked about. These would let it approve
  # its own calls, read or rewrite the policy, impersonate the harness, rewrite the state the
  # harness runs on, or reach credentials and providers directly.
  - '!approval::*'                  # approval::resolve: approving its own parked calls
  - '!policy::*'                    # policy::check_permissions: probing the policy
  - '!hook-fanout::*'               # hook-fanout::publish_collect: speaking for the harness's hooks
  - '!state::set'                   # state writes: turn records, approvals, run requests
  - '!state::update'
  - '!state::delete'
  - '!stream::set'                  # stream writes: forging agent::events for the UI
  - '!stream::update'
  - '!stream::delete'
  - '!stream::send'
  - '!publish'                      # topics the harness listens on
  - '!iii::durable::publish'
  - '!engine::queue::enqueue'       # queue turn-step and friends
  - '!iii::queue::*'
  - '!engine::channels::*'          # attaching to provider streams
  - '!engine::register_trigger'     # wiring functions to triggers
  - '!engine::unregister_trigger'
  - '!engine::workers::register'
  - '!engine::edge::refresh'
  - '!auth::*'                      # credentials: get/set/delete tokens, logins
  - '!provider::*'                  # model providers, bypassing the harness
  - '!run::*'                       # run::start, run::steer: starting or steering runs
  - '!turn::*'                      # the turn state machine's steps
  - '!harness::*'                   # the harness ingress
  - '!provisioning::*'              # system prompts and sandboxes of runs
  - '!session-tree::*'              # rewriting transcripts
  - '!session-inbox::*'             # injecting steering messages

  # ---- Read-only introspection: allowed without asking, except the stored (encrypted) credentials.
  - rule_id: no-credential-reads
    function: 'state::*'
    action: deny
    args:
      scope: { matches: '^auth' }   # auth-credentials keeps its tokens in scope auth_credentials
  - state::get
  - state::list
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
