// The traces screen's own layout (prefixed `tr-`; buttons, banners and tables come from the
// shell's ui.css). Rendered in a <style> by the screen. The waterfall keeps its name column and
// track side by side down to phone width, where the name column narrows.
export const TRACES_CSS = `
.tr-screen { display: grid; grid-template-columns: minmax(0, 1fr); gap: .75rem; }
.tr-screen > * { min-width: 0; }
.tr-title { margin: 0; }
.tr-filters { display: flex; flex-wrap: wrap; gap: .5rem; align-items: end; }
.tr-filters label { display: grid; gap: .2rem; font-size: .9rem; }
.tr-filters .tr-check { display: flex; gap: .3rem; align-items: center; }
.tr-muted { opacity: .7; font-size: .85rem; }
.tr-error { color: #dc2626; }
.tr-table { width: 100%; border-collapse: collapse; }
.tr-table th, .tr-table td { text-align: start; padding: .2rem .4rem; vertical-align: top; }
.tr-chip { display: inline-block; width: .7rem; height: .7rem; border-radius: .2rem; vertical-align: middle; }
.tr-status { font-size: .75rem; padding: 0 .4rem; border-radius: 1rem; }
.tr-status-ok { background: #bbf7d0; color: #14532d; }
.tr-status-error { background: #fecaca; color: #7f1d1d; }
.tr-live { background: #bfdbfe; color: #1e3a8a; }
.tr-legend { list-style: none; display: flex; flex-wrap: wrap; gap: .8rem; padding: 0; margin: 0; font-size: .85rem; }
.tr-waterfall { list-style: none; padding: 0; margin: 0; display: grid; gap: 1px; }
.tr-row { position: relative; }
.tr-fold { position: absolute; top: .15rem; z-index: 1; width: 1.1rem; height: 1.1rem; padding: 0; border: 0; background: none; color: inherit; font: inherit; font-size: .75rem; line-height: 1; cursor: pointer; }
.tr-fold:focus-visible { outline: 2px solid #2563eb; }
.tr-row-btn { width: 100%; display: grid; grid-template-columns: minmax(8rem, 20rem) minmax(6rem, 1fr) 5.5rem; gap: .5rem; align-items: center; background: none; border: 0; padding: .15rem .3rem; font: inherit; color: inherit; text-align: start; cursor: pointer; border-radius: .2rem; }
.tr-row-btn:hover, .tr-row-selected .tr-row-btn { background: color-mix(in srgb, currentColor 8%, transparent); }
.tr-row-btn:focus-visible { outline: 2px solid #2563eb; }
.tr-name { display: flex; gap: .35rem; align-items: center; overflow: hidden; white-space: nowrap; }
.tr-span-name { overflow: hidden; text-overflow: ellipsis; font-size: .85rem; }
.tr-row-error .tr-span-name { color: #dc2626; font-weight: 600; }
.tr-track { position: relative; height: .9rem; background: color-mix(in srgb, currentColor 5%, transparent); border-radius: .2rem; }
.tr-bar { position: absolute; top: 0; bottom: 0; border-radius: .2rem; min-width: 2px; }
.tr-row-error .tr-bar { outline: 2px solid #dc2626; }
.tr-bar-open { opacity: .6; background-image: repeating-linear-gradient(45deg, transparent 0 4px, rgba(255,255,255,.4) 4px 8px); }
.tr-dur { font-size: .8rem; text-align: end; font-variant-numeric: tabular-nums; }
.tr-detail { border: 1px solid color-mix(in srgb, currentColor 20%, transparent); border-radius: .4rem; padding: .5rem .8rem; display: grid; gap: .3rem; }
.tr-detail h4, .tr-detail h5 { margin: .3rem 0 0; }
.tr-dl { display: grid; grid-template-columns: auto 1fr; gap: .1rem .6rem; margin: 0; }
.tr-dl dt { opacity: .7; }
.tr-dl dd { margin: 0; }
.tr-attrs { border-collapse: collapse; font-size: .85rem; }
.tr-attrs th { text-align: start; padding-inline-end: .8rem; font-weight: 500; opacity: .8; vertical-align: top; }
.tr-val { white-space: pre-wrap; overflow-wrap: anywhere; }
.tr-events, .tr-logs { margin: 0; padding-inline-start: 1.2rem; font-size: .85rem; }
.tr-log-error, .tr-log-fatal { color: #dc2626; }
@media (max-width: 600px) { .tr-row-btn { grid-template-columns: minmax(6rem, 40%) minmax(4rem, 1fr) 4.5rem; } }
`;
