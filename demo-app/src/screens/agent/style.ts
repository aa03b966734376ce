// The agent screen's own layout (the shell's ui.css styles buttons, banners and fields; class
// names here are prefixed `ac-`). A string the screen renders in a <style>, so the screen needs no
// bundler CSS handling of its own. One column at phone width.
export const AGENT_CSS = `
.ac-screen { display: grid; gap: .75rem; }
.ac-title { margin: 0; }
.ac-layout { display: grid; gap: 1rem; grid-template-columns: minmax(9rem, 12rem) minmax(0, 1fr) minmax(14rem, 20rem); align-items: start; }
@media (max-width: 900px) { .ac-layout { grid-template-columns: minmax(0, 1fr); } }
.ac-row { display: flex; flex-wrap: wrap; gap: .5rem; align-items: end; }
.ac-row label, .ac-composer label { display: grid; gap: .2rem; font-size: .9rem; }
.ac-settings { display: grid; gap: .4rem; }
.ac-settings h3, .ac-side h3 { margin: 0 0 .3rem; font-size: 1rem; }
.ac-sessions ul { list-style: none; padding: 0; margin: .5rem 0; display: grid; gap: .2rem; }
.ac-sessions [aria-current="page"] .ac-session-title { font-weight: 700; }
.ac-session-btn { display: grid; gap: .05rem; text-align: start; text-decoration: none; padding: .25rem .3rem; width: 100%; }
.ac-session-title { text-decoration: underline; overflow-wrap: anywhere; }
.ac-session-meta { font-size: .75rem; color: var(--muted); display: flex; flex-wrap: wrap; gap: .25rem; align-items: baseline; }
.ac-session-id { font-size: .75rem; }
.ac-main { display: grid; gap: .6rem; min-width: 0; }
.ac-session-head { display: flex; flex-wrap: wrap; gap: .5rem; align-items: baseline; }
.ac-session-head h3 { margin: 0; font-size: 1rem; }
.ac-transcript { display: grid; gap: .5rem; max-height: 60vh; overflow: auto; padding: .25rem; border: 1px solid color-mix(in srgb, currentColor 15%, transparent); border-radius: .4rem; }
.ac-msg { padding: .4rem .6rem; border-radius: .4rem; background: color-mix(in srgb, currentColor 5%, transparent); }
.ac-msg-user { background: color-mix(in srgb, #3b82f6 12%, transparent); }
.ac-msg-error { outline: 1px solid #dc2626; }
.ac-role { font-size: .75rem; opacity: .7; display: block; }
.ac-text { margin: .2rem 0 0; white-space: pre-wrap; overflow-wrap: anywhere; }
.ac-thinking { margin: .2rem 0 0; white-space: pre-wrap; font-style: italic; opacity: .7; }
.ac-streaming .ac-text::after { content: "▍"; opacity: .5; }
.ac-call { border: 1px solid color-mix(in srgb, currentColor 20%, transparent); border-radius: .4rem; padding: .4rem .6rem; display: grid; gap: .3rem; }
.ac-call-awaiting { border-color: #d97706; }
.ac-call-error { border-color: #dc2626; }
.ac-call-head { display: flex; gap: .5rem; align-items: baseline; flex-wrap: wrap; }
.ac-kv { display: grid; gap: .1rem; }
.ac-kv-label { font-size: .75rem; opacity: .7; }
.ac-pre { margin: 0; max-height: 12rem; overflow: auto; font-size: .8rem; white-space: pre-wrap; overflow-wrap: anywhere; }
.ac-status { font-size: .75rem; padding: 0 .4rem; border-radius: 1rem; background: color-mix(in srgb, currentColor 10%, transparent); }
.ac-status-awaiting, .ac-status-function_awaiting_approval { background: #fde68a; color: #78350f; }
.ac-status-error, .ac-status-failed { background: #fecaca; color: #7f1d1d; }
.ac-status-done, .ac-status-stopped { background: #bbf7d0; color: #14532d; }
.ac-approval { display: flex; gap: .5rem; align-items: center; flex-wrap: wrap; }
.ac-muted { opacity: .7; font-size: .85rem; }
.ac-error { color: #dc2626; }
.ac-ok { color: #15803d; }
.ac-notice { font-size: .85rem; opacity: .8; margin: 0; }
.ac-composer { display: grid; gap: .4rem; }
.ac-composer textarea { width: 100%; box-sizing: border-box; font: inherit; }
.ac-aside { display: grid; gap: 1rem; min-width: 0; }
.ac-side { display: grid; gap: .3rem; }
.ac-dl { display: grid; grid-template-columns: auto 1fr; gap: .1rem .6rem; margin: 0; }
.ac-dl dt { opacity: .7; }
.ac-dl dd { margin: 0; }
.ac-branches { list-style: none; padding-inline-start: .8rem; margin: 0; border-inline-start: 2px solid color-mix(in srgb, currentColor 15%, transparent); }
.ac-tree-root { padding-inline-start: 0; border: 0; }
.ac-entries { list-style: none; padding: 0; margin: 0; display: grid; gap: .1rem; }
.ac-entry { font-size: .8rem; display: flex; gap: .3rem; flex-wrap: wrap; align-items: baseline; }
.ac-entry-active .ac-entry-role { font-weight: 700; }
.ac-entry-preview { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; max-width: 12rem; }
.ac-fork { font-size: .75rem; }
.ac-children { list-style: none; padding: 0; margin: 0; display: grid; gap: .3rem; }
`;
