"""The page's stylesheet (no Gradio import: ui.py passes it to launch as views.CSS)."""

# Light and dark: neutral surfaces and text come from Gradio's theme variables (they switch with `.dark`);
# the coloured states (badges, chips, status) get a `.dark` variant each; text on the fixed pastel token
# backgrounds stays dark in both themes.
CSS = """
.pane { border: 1px solid var(--border-color-primary); border-radius: 8px; overflow: hidden;
  background: var(--block-background-fill); }
.pane-head { display: flex; gap: .6em; align-items: baseline; padding: 6px 10px; color: #fff; flex-wrap: wrap; }
.pane-baseline .pane-head { background: #4C78A8; }
.pane-speculative .pane-head { background: #F58518; }
.pane-title { font-weight: 700; font-size: 1.05em; }
.pane-sub { opacity: .9; font-size: .85em; }
.pane-stats { margin-left: auto; font-size: .85em; font-variant-numeric: tabular-nums; }
.pane-body { display: flex; flex-direction: column-reverse; justify-content: flex-end; /* newest text in view */
  padding: 10px; min-height: 220px; max-height: 420px; overflow-y: auto; white-space: pre-wrap;
  word-break: break-word; font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 13.5px;
  line-height: 1.65; color: var(--body-text-color); }
.pane-body .tok { border-radius: 2px; }
.pane-speculative .pane-body .tok { color: #111; }  /* on the acceptance colours, light in both themes */
.pane-body .tok.start { box-shadow: inset 1px 0 0 rgba(0,0,0,.35); }
.pane-body .tok.prefill { outline: 1px dashed #4f46e5; }
.pane-body .tok.div { text-decoration: underline wavy #dc2626; text-decoration-thickness: 1.5px; background-color: #fecaca; color: #111; }
.pane-speculative .pane-body .tok.div { text-decoration: underline wavy #dc2626; }
.pane-body .tok.eos { color: var(--body-text-color-subdued); font-style: italic; }
.pane-speculative .pane-body .tok.eos { color: #555; }
.legend { display: flex; flex-wrap: wrap; gap: 4px; align-items: center; font-size: 12px; margin-top: 4px;
  color: var(--body-text-color); }
.legend-title { margin-right: 6px; }
.legend .chip { padding: 1px 7px; border-radius: 10px; border: 1px solid rgba(0,0,0,.12); color: #111; }
.legend .chip.prefill { outline: 1px dashed #4f46e5; }
.recorded { padding: 6px 12px; margin-bottom: 6px; border-radius: 8px; border: 1px dashed #a855f7;
            background: #faf5ff; color: #581c87; font-size: 14px; }
.dark .recorded { background: #2e1065; color: #e9d5ff; }
.badge { padding: 10px 14px; border-radius: 8px; font-size: 15px; border: 1px solid; }
.badge .verdict { font-weight: 800; font-size: 18px; margin-right: .4em; }
.badge.idle { background: var(--background-fill-secondary); border-color: var(--border-color-primary);
  color: var(--body-text-color-subdued); }
.badge.running { background: #eff6ff; border-color: #93c5fd; color: #1e3a8a; }
.badge.identical { background: #dcfce7; border-color: #22c55e; color: #14532d; }
.badge.diverged { background: #fff7ed; border-color: #f59e0b; color: #7c2d12; }
.badge.stopped { background: #f3f4f6; border-color: #9ca3af; color: #374151; }
.badge.error { background: #fef2f2; border-color: #ef4444; color: #7f1d1d; }
.dark .badge.running { background: #172554; border-color: #3b82f6; color: #dbeafe; }
.dark .badge.identical { background: #052e16; border-color: #22c55e; color: #bbf7d0; }
.dark .badge.diverged { background: #431407; border-color: #f59e0b; color: #fed7aa; }
.dark .badge.stopped { background: #1f2937; border-color: #6b7280; color: #e5e7eb; }
.dark .badge.error { background: #450a0a; border-color: #ef4444; color: #fecaca; }
.badge .ctx { margin-top: 6px; font-family: ui-monospace, Menlo, monospace; font-size: 13px; white-space: pre-wrap; }
.badge mark.div-b { background: #bfdbfe; color: #111; } .badge mark.div-s { background: #fed7aa; color: #111; }
.badge .why { margin-top: 6px; font-size: 13px; }
.badge .cands { margin-top: 8px; font-size: 12.5px; }
.badge .cands table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
.badge .cands th, .badge .cands td { padding: 1px 8px; border-bottom: 1px solid currentColor; text-align: left;
  border-bottom-color: rgba(127,127,127,.35); }
.badge .cands code { background: none; color: inherit; }
.badge .cands .tie { margin-top: 4px; font-style: italic; }
.explain { padding: 10px 14px; border: 1px solid var(--border-color-primary); border-radius: 8px;
  background: var(--background-fill-secondary); color: var(--body-text-color); font-size: 14px; }
.explain.idle { color: var(--body-text-color-subdued); }
.explain .factors { display: flex; align-items: stretch; gap: 8px; flex-wrap: wrap; }
.explain .factor { flex: 1 1 150px; background: var(--block-background-fill); color: var(--body-text-color);
  border: 1px solid var(--border-color-primary); border-radius: 6px; padding: 6px 10px; }
.explain .factor.good { border-color: #22c55e; } .explain .factor.bad { border-color: #ef4444; }
.explain .f-label { font-size: 12px; color: var(--body-text-color-subdued); text-transform: uppercase; letter-spacing: .03em; }
.explain .f-value { font-size: 22px; font-weight: 800; font-variant-numeric: tabular-nums; color: var(--body-text-color); }
.explain .f-note { font-size: 11.5px; color: var(--body-text-color-subdued); }
.explain .f-bar { position: relative; height: 8px; background: var(--border-color-primary); border-radius: 4px; margin: 4px 0; }
.explain .f-bar span { position: absolute; left: 0; top: 0; bottom: 0; border-radius: 4px; background: #9ca3af; }
.explain .good .f-bar span { background: #22c55e; } .explain .bad .f-bar span { background: #ef4444; }
.explain .f-bar i { position: absolute; top: -3px; bottom: -3px; width: 2px; background: var(--body-text-color); }
.explain .op { align-self: center; font-size: 22px; font-weight: 700; color: var(--body-text-color-subdued); }
.explain .async { margin-top: 6px; display: flex; gap: 6px; flex-wrap: wrap; font-size: 12px; }
.explain .async .chip { padding: 1px 8px; border-radius: 10px; border: 1px solid var(--border-color-primary); }
.explain .async-on { background: #dcfce7; color: #14532d; } .explain .async-off { background: #fee2e2; color: #7f1d1d; }
.dark .explain .async-on { background: #052e16; color: #bbf7d0; } .dark .explain .async-off { background: #450a0a; color: #fecaca; }
.explain .why-sentence { margin-top: 8px; font-weight: 600; }
.explain .expectation { margin-top: 4px; color: var(--body-text-color-subdued); font-size: 13px; }
.repeat-note { margin-top: 6px; padding: 6px 10px; border-left: 3px solid #f59e0b; font-size: 13px; }
.pane-body .waiting { color: var(--body-text-color-subdued); font-style: italic; }
.status { padding: 6px 10px; border-radius: 6px; font-size: 14px; }
.status.ready { background: #f0fdf4; color: #166534; }
.status.loading { background: #fffbeb; color: #92400e; }
.status.loading progress { vertical-align: middle; width: 180px; }
.status.error, .page-error { background: #fef2f2; color: #991b1b; border: 1px solid #fca5a5; }
.dark .status.ready { background: #052e16; color: #bbf7d0; }
.dark .status.loading { background: #451a03; color: #fde68a; }
.dark .status.error, .dark .page-error { background: #450a0a; color: #fecaca; border-color: #b91c1c; }
.page-error { padding: 8px 12px; border-radius: 6px; font-weight: 600; }
#st-prev, #st-next { align-self: center; max-height: 42px; }
.stepper { padding: 8px 12px; border: 1px solid var(--border-color-primary); border-radius: 8px;
  background: var(--block-background-fill); color: var(--body-text-color); font-size: 13.5px; }
.stepper.idle { color: var(--body-text-color-subdued); }
.stepper .st-head { margin-bottom: 6px; }
.stepper .st-time { color: var(--body-text-color-subdued); font-variant-numeric: tabular-nums; }
.stepper .st-text { white-space: pre-wrap; word-break: break-word; font-family: ui-monospace, SFMono-Regular, Menlo, monospace;
  font-size: 13px; line-height: 1.9; padding: 8px; border-radius: 6px; background: var(--background-fill-secondary); }
.stepper .st-sofar { color: var(--body-text-color); }
.stepper .st-drafts { display: inline; }
.stepper .st-tok { padding: 1px 3px; margin: 0 1px; border-radius: 3px; border: 1px solid transparent; color: #111; white-space: pre; }
.stepper .st-accepted { background: #86efac; border-color: #22c55e; }
.stepper .st-rejected { background: #fecaca; border-color: #ef4444; text-decoration: line-through; }
.stepper .st-target { background: #bfdbfe; border-color: #3b82f6; font-weight: 700; }
.stepper .st-greyed { background: transparent; border: 1px dashed #9ca3af; color: #9ca3af; }
.stepper .st-unchecked { border-style: dashed; }
.stepper .st-unchecked-mark { font-size: 0.75em; color: #6b7280; margin: 0 0.3em; }
.stepper .st-emitted { background: #e5e7eb; }
.stepper .st-arrow, .stepper .st-plus { margin: 0 3px; color: var(--body-text-color-subdued); font-weight: 700; }
.stepper .st-unknown, .stepper .st-none { font-style: italic; color: var(--body-text-color-subdued); margin-right: 4px; }
.stepper .st-legend { margin-top: 6px; font-size: 12px; }
.stepper .st-note { margin-top: 6px; font-size: 12.5px; color: var(--body-text-color-subdued); }
.whatif { color: var(--body-text-color); font-size: 13.5px; }
.whatif.idle { color: var(--body-text-color-subdued); padding: 6px 2px; }
.whatif .wi-cards { display: flex; gap: 8px; flex-wrap: wrap; margin-bottom: 6px; }
.whatif .wi-card { flex: 1 1 130px; border: 1px solid var(--border-color-primary); border-radius: 6px; padding: 6px 10px;
  background: var(--block-background-fill); }
.whatif .f-label { font-size: 12px; color: var(--body-text-color-subdued); }
.whatif .f-value { font-size: 20px; font-weight: 800; font-variant-numeric: tabular-nums; }
.whatif .f-note { font-size: 11.5px; color: var(--body-text-color-subdued); }
.lesson-head { padding: 8px 2px; color: var(--body-text-color); }
.lesson-head .lesson-title { font-size: 18px; font-weight: 800; margin-bottom: 4px; }
.lesson-head p { margin: 4px 0; color: var(--body-text-color-subdued); }
.lesson-step { padding: 10px 14px; border: 1px solid var(--border-color-primary); border-radius: 8px;
  background: var(--block-background-fill); color: var(--body-text-color); }
.lesson-count { font-size: 12px; text-transform: uppercase; letter-spacing: .03em; color: var(--body-text-color-subdued); }
.lesson-step-title { font-size: 17px; font-weight: 700; margin: 2px 0 6px; }
.lesson-meta .chip { font-size: 12px; padding: 1px 8px; border-radius: 10px; border: 1px solid var(--border-color-primary); }
.lesson-prompt { margin: 8px 0; padding: 8px 10px; border-radius: 6px; background: var(--background-fill-secondary);
  white-space: pre-wrap; word-break: break-word; font-size: 12.5px; max-height: 180px; overflow-y: auto; }
.lesson-question { font-size: 15px; margin-top: 6px; }
.lesson-look { font-size: 13px; margin-top: 4px; color: var(--body-text-color-subdued); }
.lesson-note { margin-top: 8px; padding: 6px 10px; border-radius: 6px; background: #fffbeb; color: #92400e; font-size: 13px; }
.dark .lesson-note { background: #451a03; color: #fde68a; }
.lesson-progress { padding: 6px 10px; border-radius: 6px; font-size: 13.5px; background: #eff6ff; color: #1e3a8a; }
.lesson-progress.refused { background: #fffbeb; color: #92400e; }
.dark .lesson-progress { background: #172554; color: #dbeafe; } .dark .lesson-progress.refused { background: #451a03; color: #fde68a; }
#lesson-result .explain, #lesson-result .badge { margin-top: 8px; }
.lesson-beside { margin-top: 10px; padding: 8px 12px; border: 1px solid var(--border-color-primary); border-radius: 8px; }
.lesson-beside table { border-collapse: collapse; font-size: 13.5px; margin-bottom: 6px; }
.lesson-beside th, .lesson-beside td { padding: 3px 12px 3px 0; text-align: left; vertical-align: top; }
.lesson-beside td { font-variant-numeric: tabular-nums; font-weight: 600; }
.lesson-beside .why-sentence { margin: 4px 0 8px; font-weight: 600; }
.lesson-more { margin-top: 4px; font-size: 12.5px; color: var(--body-text-color-subdued); }
.lesson-answer { margin-top: 10px; padding: 10px 14px; border-radius: 8px; font-size: 14px; }
.lesson-answer.closed { border: 1px dashed var(--border-color-primary); color: var(--body-text-color-subdued); font-style: italic; }
.lesson-answer.open { border: 1px solid #22c55e; background: #f0fdf4; color: #14532d; }
.dark .lesson-answer.open { background: #052e16; color: #bbf7d0; }
.lesson-answer p { margin: 6px 0 0; }
.room { padding: 8px 12px; border-radius: 8px; font-size: 14px; }
.room.follower { background: #eff6ff; color: #1e3a8a; border: 1px solid #93c5fd; }
.room.presenter { background: #f0fdf4; color: #14532d; border: 1px solid #86efac; }
.dark .room.follower { background: #172554; color: #dbeafe; } .dark .room.presenter { background: #052e16; color: #bbf7d0; }
"""

# Esc stops a run: a keydown hook (installed once, on page load) that clicks whichever Stop button is
# showing and enabled (the Compare tab's, the Lesson tab's); Stop itself does the rest, as a click would.
ESC_STOPS_JS = """() => {
  if (window.__playgroundEsc) return;
  window.__playgroundEsc = true;
  document.addEventListener('keydown', (event) => {
    if (event.key !== 'Escape') return;
    for (const id of ['stop', 'lesson-stop']) {
      const button = document.getElementById(id);
      if (button && !button.disabled && button.offsetParent !== null) button.click();
    }
  });
}"""
