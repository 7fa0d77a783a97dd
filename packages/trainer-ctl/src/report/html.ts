/**
 * The run report as one self-contained HTML file: uPlot (the kept charting library, from
 * node_modules) and the page script inlined, the data as a JSON block; it opens offline.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { ReportData } from './data';

const require = createRequire(import.meta.url);
const asset = (spec: string) => readFileSync(require.resolve(spec), 'utf8');

/** JSON that cannot close the <script> element it sits in. */
const scriptJson = (x: unknown) => JSON.stringify(x).replace(/</g, '\\u003c');
const escapeHtml = (s: string) => s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);

const STYLE = `
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; } h3 { font-size: 1.05em; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, 580px); gap: 12px; }
table.eval { border-collapse: collapse; font-variant-numeric: tabular-nums; }
table.eval th, table.eval td { border: 1px solid #ddd; padding: 2px 6px; text-align: right; }
table.eval td:first-child { text-align: left; } tr.policy { font-weight: bold; background: #eef5ff; }
#transcripts { display: grid; grid-template-columns: 420px 1fr; gap: 12px; } #case { max-width: 360px; }
#episode-list li { cursor: pointer; margin: 2px 0; } #episode-list li:hover { background: #eef5ff; }
.msg { border-left: 3px solid #ccc; margin: 6px 0; padding-left: 8px; } .msg.assistant { border-color: #1f77b4; } .msg.tool { border-color: #2ca02c; }
.msg .role { font-weight: bold; font-size: 0.85em; color: #555; } .msg pre { white-space: pre-wrap; margin: 0; max-height: 18em; overflow: auto; }
`;

export function reportHtml(data: ReportData): string {
  const title = `run ${data.run}`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${escapeHtml(title)}</title>
<style>${asset('uplot/dist/uPlot.min.css')}${STYLE}</style>
</head>
<body>
<h1>${escapeHtml(title)}</h1>
<p>${escapeHtml(data.run_dir)}: ${data.updates} updates, ${data.done ? 'complete' : 'in progress'}; report written ${escapeHtml(data.created_at)}</p>
<h2>Per-step curves</h2>
<div id="curves" class="charts"></div>
<h2>Held-out evaluation per stage, against the scripted baselines on the same cases</h2>
<div id="eval-chart" class="charts"></div>
<div id="evals"></div>
<h2>Transcripts</h2>
<div id="transcripts">
<div><label>case <select id="case"></select></label><ul id="episode-list"></ul></div>
<div id="episode"></div>
</div>
<script>${asset('uplot/dist/uPlot.iife.min.js')}</script>
<script id="report-data" type="application/json">${scriptJson(data)}</script>
<script>${readFileSync(join(import.meta.dirname, 'app.js'), 'utf8')}</script>
</body>
</html>
`;
}
