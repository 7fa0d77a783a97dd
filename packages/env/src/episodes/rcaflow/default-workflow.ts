/**
 * The initial workflow (RCAFlow's start from OpenRCA's RCA-agent rules: preprocess, anomaly
 * detection, fault identification, localisation) over the project's tools: open the request's
 * trace, identify the fault trace-first or metric-first (a Selector), then localise on a branch
 * with logs and the trace below the suspect. The three stages run as a Parallel that needs one
 * success: a request whose first spans look normal still gets identified and localised.
 */
import { parseWorkflow, type Workflow } from './tree';

export const DEFAULT_WORKFLOW: Workflow = parseWorkflow(
  {
    name: 'rca',
    root: {
      type: 'parallel',
      min_success: 1,
      children: [
        { type: 'tool', name: 'anomaly detection: open the request', tool: 'search_traces' },
        {
          type: 'selector',
          name: 'fault identification',
          children: [
            { type: 'tool', name: 'fault identification: the trace below the suspect', tool: 'search_traces' },
            { type: 'tool', name: 'fault identification: metrics of the suspect', tool: 'search_fluctuating_metrics' },
          ],
        },
        { type: 'workflow', name: 'localisation', workflow: 'localise' },
      ],
    },
    workflows: {
      localise: {
        type: 'parallel',
        min_success: 1,
        children: [
          { type: 'tool', name: 'localisation: logs of the suspect', tool: 'search_logs' },
          { type: 'tool', name: 'localisation: the trace below the suspect', tool: 'search_traces' },
        ],
      },
    },
  },
  'default rcaflow workflow',
);
