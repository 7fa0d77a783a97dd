// The run report's page script (runs in the browser; uPlot is inlined before it). Reads the
// report data from the #report-data JSON block and draws the curves, the evaluation tables
// and the transcript browser. Plain DOM, no network.
(() => {
  'use strict';
  const data = JSON.parse(document.getElementById('report-data').textContent);
  const STAGES = ['priming', 'exploration', 'refinement'];
  const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#7f7f7f', '#bcbd22'];
  const series = data.series;

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return e;
  }
  const fmt = (x, d) => (x === null || x === undefined || Number.isNaN(x) ? '-' : Number(x).toFixed(d === undefined ? 3 : d));
  // An evaluation's validity by fault type, "; by fault type: exception 1.00 (2), ..."; empty for files written before it.
  const byType = (t) =>
    t && Object.keys(t).length
      ? `; by fault type: ${Object.entries(t)
          .map(([type, v]) => `${type} ${fmt(v.format_valid, 2)} (${v.cases})`)
          .join(', ')}`
      : '';

  // One line over the run's global step: the GRPO stages' series of `suffix` joined (their steps do not overlap).
  function stageLine(suffix) {
    const pts = [];
    for (const s of STAGES) for (const p of series[`${s}/${suffix}`] || []) pts.push(p);
    return pts;
  }
  const graders = [
    ...new Set(
      Object.keys(series)
        .map((t) => /^(?:priming|exploration|refinement)\/graders\/([^/]+)\/mean$/.exec(t))
        .filter(Boolean)
        .map((m) => m[1]),
    ),
  ];

  const scale = (k) => (pts) => pts.map((p) => ({ x: p.x, y: p.y === null ? null : p.y * k }));
  const CHARTS = [
    {
      title: 'Reward and graders (mean, std)',
      lines: [
        ['reward mean', stageLine('reward/mean')],
        ['reward std', stageLine('reward/std')],
        ...graders.flatMap((g) => [
          [`${g} mean`, stageLine(`graders/${g}/mean`)],
          [`${g} std`, stageLine(`graders/${g}/std`)],
        ]),
      ],
    },
    {
      title: 'Format validity, answered, zero-variance share',
      lines: [
        ['format validity', stageLine('format_valid')],
        ['answered', stageLine('answered')],
        ['zero-variance groups', stageLine('zero_variance_share')],
      ],
    },
    {
      title: 'KL, clip fraction, entropy',
      lines: [
        ['kl', stageLine('train/kl')],
        ['clip fraction', stageLine('train/clip_fraction')],
        ['dual clip fraction', stageLine('train/dual_clip_fraction')],
        ['entropy', stageLine('train/entropy')],
      ],
    },
    {
      title: 'Loss (GRPO and SFT)',
      lines: [
        ['grpo loss', stageLine('train/loss')],
        ['pg loss', stageLine('train/pg_loss')],
        ['kl loss', stageLine('train/kl_loss')],
        ['sft loss', series['sft/train/loss'] || []],
      ],
    },
    {
      title: 'Advantages',
      lines: [
        ['mean', stageLine('advantage/mean')],
        ['std', stageLine('advantage/std')],
        ['min', stageLine('advantage/min')],
        ['max', stageLine('advantage/max')],
      ],
    },
    {
      title: 'Length (tokens per episode)',
      lines: [
        ['response', stageLine('response_tokens')],
        ['total', stageLine('total_tokens')],
      ],
    },
    { title: 'Tool calls per episode', lines: [['tool calls', stageLine('tool_calls')]] },
    {
      title: 'Training cases played greedily (logging.track)',
      lines: [
        ['format validity', series['track/format_valid'] || []],
        ['per-request MRR (service)', series['track/per_request/service/mrr'] || []],
        ['per-fault MRR (service)', series['track/per_fault/service/mrr'] || []],
        ['R@1 per request (service)', series['track/per_request/service/R@1'] || []],
      ],
    },
    {
      title: 'Time per step (s)',
      lines: [
        ['generation', scale(1e-3)(stageLine('timing/rollout_ms'))],
        ['grading', scale(1e-3)(stageLine('timing/grade_ms'))],
        ['update', scale(1e-3)(stageLine('timing/update_ms'))],
        ['sft update', scale(1e-3)(series['sft/timing/update_ms'] || [])],
      ],
    },
  ];

  const charts = [];
  function lineChart(parent, title, lines, xValues) {
    const used = lines.filter(([, pts]) => pts.length > 0);
    if (!used.length) return;
    const xs = [...new Set(used.flatMap(([, pts]) => pts.map((p) => p.x)))].sort((a, b) => a - b);
    const ys = used.map(([, pts]) => {
      const at = new Map(pts.map((p) => [p.x, p.y]));
      return xs.map((x) => (at.has(x) ? at.get(x) : null));
    });
    const box = el('div', { class: 'chart' });
    parent.append(box);
    const opts = {
      title,
      width: 560,
      height: 260,
      scales: { x: { time: false } },
      // Steps and evaluations are whole numbers: no ticks between them.
      axes: [
        {
          label: xValues ? '' : 'step',
          incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000],
          ...(xValues ? { values: (_u, ticks) => ticks.map((t) => xValues[t] || '') } : {}),
        },
        {},
      ],
      series: [
        { label: 'step' },
        ...used.map(([label], i) => ({
          label,
          stroke: COLORS[i % COLORS.length],
          width: 2,
          points: { show: xs.length < 40 },
          spanGaps: true,
        })),
      ],
    };
    charts.push(new uPlot(opts, [xs, ...ys], box));
  }

  const curves = document.getElementById('curves');
  for (const c of CHARTS) lineChart(curves, c.title, c.lines);
  if (!curves.children.length) curves.append(el('p', {}, 'No steps logged yet.'));

  // Held-out evaluation per stage: the trained policy and the scripted baselines on the same cases.
  const evals = document.getElementById('evals');
  const SCOPES = [
    ['per_request', 'per request'],
    ['per_fault', 'per fault'],
    ['per_fault_vote', 'per fault by vote'],
  ];
  for (const e of data.evals) {
    const level = e.levels[0];
    const head = el(
      'tr',
      {},
      el('th', {}, 'policy'),
      ...SCOPES.flatMap(([, label]) => ['R@1', 'R@3', 'R@5', 'MRR'].map((m) => el('th', {}, `${label} ${m}`))),
    );
    const rows = e.rows.map((r, i) =>
      el(
        'tr',
        { class: i === 0 ? 'policy' : 'baseline' },
        el('td', {}, r.policy),
        ...SCOPES.flatMap(([scope]) => {
          const s = r.summary[scope]?.[level];
          return s
            ? [fmt(s.recall[1], 2), fmt(s.recall[3], 2), fmt(s.recall[5], 2), fmt(s.mrr, 3)].map((v) => el('td', {}, v))
            : [1, 2, 3, 4].map(() => el('td', {}, '-'));
        }),
      ),
    );
    evals.append(
      el('h3', {}, `after ${e.name}: policy v${e.policy_version}, ${e.cases} held-out cases, ${level} level`),
      el('p', {}, `format validity ${fmt(e.format_valid, 2)}, answered ${fmt(e.answered, 2)}${byType(e.format_valid_by_type)}`),
      el('table', { class: 'eval' }, el('thead', {}, head), el('tbody', {}, ...rows)),
    );
  }
  if (data.evals.length) {
    const names = data.evals.map((e) => e.name);
    const policies = data.evals[0].rows.map((r) => r.policy);
    const lines = policies.map((p, i) => [
      i === 0 ? 'trained policy' : p,
      data.evals.map((e, x) => ({
        x,
        y: e.rows.find((r) => (i === 0 ? r === e.rows[0] : r.policy === p))?.summary?.per_fault?.[e.levels[0]]?.mrr ?? null,
      })),
    ]);
    lineChart(document.getElementById('eval-chart'), 'Held-out per-fault MRR by stage', lines, names);
  } else evals.append(el('p', {}, 'No evaluation yet.'));

  // Transcript browser: pick a case, then an episode.
  const byCase = new Map();
  for (const [i, ep] of data.episodes.entries()) {
    if (!byCase.has(ep.case_id)) byCase.set(ep.case_id, []);
    byCase.get(ep.case_id).push(i);
  }
  const caseSelect = document.getElementById('case');
  const list = document.getElementById('episode-list');
  const view = document.getElementById('episode');
  const rc = (a) => (a?.length ? a.map((x) => x.pod || x.service || x.node).join(', ') : 'none');
  function showEpisode(i) {
    const ep = data.episodes[i];
    view.replaceChildren(
      el('p', {}, `${ep.tag}, reward ${fmt(ep.reward)}, ${ep.tool_calls} tool calls, ${ep.stop_reason}`),
      el('p', {}, 'answer: ', el('b', {}, rc(ep.answer)), ' truth: ', el('b', {}, rc(ep.truth ? [ep.truth] : null))),
      ...ep.messages.map((m) =>
        el(
          'div',
          { class: `msg ${m.role}` },
          el('div', { class: 'role' }, m.role),
          el('pre', {}, m.content || JSON.stringify(m.tool_calls || '')),
        ),
      ),
    );
  }
  function showCase(id) {
    list.replaceChildren(
      ...(byCase.get(id) || []).map((i) => {
        const ep = data.episodes[i];
        return el(
          'li',
          { onclick: () => showEpisode(i) },
          `${ep.tag}: reward ${fmt(ep.reward)}, ${ep.tool_calls} calls, answer ${rc(ep.answer)} (truth ${rc(ep.truth ? [ep.truth] : null)})`,
        );
      }),
    );
    const first = (byCase.get(id) || [])[0];
    if (first !== undefined) showEpisode(first);
  }
  for (const [id, idx] of byCase) caseSelect.append(el('option', { value: id }, `${id} (${idx.length})`));
  caseSelect.addEventListener('change', () => showCase(caseSelect.value));
  if (byCase.size) showCase(caseSelect.value);
  else view.append(el('p', {}, 'No episodes logged (logging.episodes_per_step is 0).'));

  window.reportReady = { charts: charts.length, episodes: data.episodes.length, evals: data.evals.length };
})();
