/**
 * RCAFlow's behaviour trees (../shared/seeds/004, Structured Workflow Definition): the workflow schema and its
 * interpreter. Sequence runs its children in order and succeeds only if all do (it stops at the
 * first failure); Selector runs them in order and succeeds on the first success; Parallel runs
 * every child and succeeds when at least `min_success` of them do (the paper leaves the
 * aggregation open; default all). A leaf is one of the project's tools, played by the policy, or
 * a nested workflow, run on its own branch: the branch is pushed on the stack (its parent
 * suspended) and popped when it ends, its results merged into the parent's workspace.
 * After a Selector and after a branch, the policy gives a confidence c; when c <= theta (0.90),
 * the coordinator re-plans by inserting a step before going on.
 */
import { z } from 'zod';
import { formatZodIssues } from '../../zod-issues';

export type BtNode =
  | { type: 'sequence'; name?: string; children: BtNode[] }
  | { type: 'selector'; name?: string; children: BtNode[] }
  | { type: 'parallel'; name?: string; children: BtNode[]; min_success?: number }
  | { type: 'tool'; name?: string; tool: string }
  | { type: 'workflow'; name?: string; workflow: string };

const nodeName = z
  .string()
  .optional()
  .describe("Label of the node; a tool leaf's step is called by it in the policy's prompt (default: the tool's name). Optional.");
const children = () => z.array(BtNodeSchema).min(1).describe('The child nodes, run in order; at least one.');

export const BtNodeSchema: z.ZodType<BtNode> = z.lazy(() =>
  z
    .discriminatedUnion('type', [
      z
        .object({
          type: z.literal('sequence').describe('Sequence: runs its children in order and succeeds only if all do (RCAFlow).'),
          name: nodeName,
          children: children(),
        })
        .strict(),
      z
        .object({
          type: z
            .literal('selector')
            .describe(
              'Selector: runs its children in order and succeeds on the first success; the policy then gives a confidence (RCAFlow).',
            ),
          name: nodeName,
          children: children(),
        })
        .strict(),
      z
        .object({
          type: z.literal('parallel').describe('Parallel: runs every child and succeeds when at least min_success of them do (RCAFlow).'),
          name: nodeName,
          children: children(),
          /** Children that must succeed for the Parallel to succeed. Default all. */
          min_success: z
            .number()
            .int()
            .min(1)
            .optional()
            .describe('Children that must succeed for the Parallel to succeed (the paper leaves the aggregation open). Default all.'),
        })
        .strict(),
      z
        .object({
          type: z.literal('tool').describe('Leaf: one call of a project tool, played by the policy.'),
          name: nodeName,
          tool: z.string().min(1).describe('Registry name of the tool the policy calls at this leaf, e.g. search_traces.'),
        })
        .strict(),
      z
        .object({
          type: z.literal('workflow').describe("Leaf: a nested workflow, run on its own branch and merged into the parent's workspace."),
          name: nodeName,
          workflow: z.string().min(1).describe("Name of the sub-workflow to run, a key of the workflow file's workflows."),
        })
        .strict(),
    ])
    .describe("A behaviour-tree node, by type: sequence, selector, parallel, tool or workflow (RCAFlow's Structured Workflow Definition)."),
);

/** A workflow file: the root tree and the named sub-workflows its leaves may run. */
export const WorkflowSchema = z
  .object({
    name: z.string().min(1).describe('Name of the workflow, the first branch on the stack.'),
    root: BtNodeSchema.describe('The root node of the behaviour tree.'),
    workflows: z
      .record(z.string(), BtNodeSchema)
      .default({})
      .describe('Named sub-workflows that workflow leaves run, each a behaviour-tree node; none may nest itself. Default none.'),
  })
  .strict()
  .superRefine((w, ctx) => {
    const check = (n: BtNode, path: (string | number)[], seen: string[]): void => {
      if (n.type === 'workflow') {
        if (!(n.workflow in w.workflows)) ctx.addIssue({ code: 'custom', path, message: `unknown workflow "${n.workflow}"` });
        else if (seen.includes(n.workflow)) ctx.addIssue({ code: 'custom', path, message: `workflow "${n.workflow}" nests itself` });
        else check(w.workflows[n.workflow], ['workflows', n.workflow], [...seen, n.workflow]);
      }
      if (n.type === 'parallel' && n.min_success !== undefined && n.min_success > n.children.length) {
        ctx.addIssue({ code: 'custom', path: [...path, 'min_success'], message: 'min_success exceeds the number of children' });
      }
      if ('children' in n) n.children.forEach((c, i) => check(c, [...path, 'children', i], seen));
    };
    check(w.root, ['root'], []);
  });
export type Workflow = z.infer<typeof WorkflowSchema>;

/** Parses a workflow (JSON already read); errors name the path inside it. */
export function parseWorkflow(input: unknown, where = 'workflow'): Workflow {
  const r = WorkflowSchema.safeParse(input);
  if (r.success) return r.data;
  throw new Error(`invalid ${where}: ${formatZodIssues(r.error, where)}`);
}

export interface Branch {
  name: string;
  /** What the branch's leaves found (tool and success), merged into the parent when it ends. */
  workspace: { tool: string; success: boolean }[];
}

/** What running a tree needs from outside: playing a leaf, asking for a confidence, re-planning. */
export interface BtRuntime {
  /** Plays a tool leaf; true when it succeeded (found what the step looks for). */
  leaf(node: Extract<BtNode, { type: 'tool' }>, stack: readonly Branch[]): Promise<boolean>;
  /** The policy's confidence in [0, 1] after a Selector or a branch. */
  confidence(after: 'selector' | 'branch', node: BtNode, stack: readonly Branch[]): Promise<number>;
  /** Re-planning: one inserted step; true when it succeeded. */
  replan(stack: readonly Branch[]): Promise<boolean>;
  /** False once the episode must stop (turn budget, policy error): the tree then fails fast. */
  alive(): boolean;
}

export interface BtRunOptions {
  /** Re-plan when the confidence is at most this. RCAFlow: 0.90. */
  theta: number;
}

export class BtInterpreter {
  readonly stack: Branch[] = [];
  /** Every checkpoint: where, the confidence, and whether it re-planned (for tests and records). */
  readonly checkpoints: { after: 'selector' | 'branch'; confidence: number; replanned: boolean }[] = [];

  constructor(
    private readonly workflow: Workflow,
    private readonly rt: BtRuntime,
    private readonly opts: BtRunOptions,
  ) {}

  async run(): Promise<boolean> {
    this.stack.push({ name: this.workflow.name, workspace: [] });
    const ok = await this.node(this.workflow.root);
    return ok;
  }

  private async checkpoint(after: 'selector' | 'branch', node: BtNode): Promise<void> {
    if (!this.rt.alive()) return;
    const c = await this.rt.confidence(after, node, this.stack);
    const replanned = c <= this.opts.theta;
    this.checkpoints.push({ after, confidence: c, replanned });
    if (replanned && this.rt.alive()) await this.rt.replan(this.stack);
  }

  private async node(n: BtNode): Promise<boolean> {
    if (!this.rt.alive()) return false;
    switch (n.type) {
      case 'tool': {
        const ok = await this.rt.leaf(n, this.stack);
        this.stack.at(-1)!.workspace.push({ tool: n.tool, success: ok });
        return ok;
      }
      case 'sequence': {
        for (const c of n.children) if (!(await this.node(c))) return false;
        return true;
      }
      case 'selector': {
        let ok = false;
        for (const c of n.children) {
          if (await this.node(c)) {
            ok = true;
            break;
          }
        }
        await this.checkpoint('selector', n);
        return ok;
      }
      case 'parallel': {
        let wins = 0;
        for (const c of n.children) if (await this.node(c)) wins++;
        return wins >= (n.min_success ?? n.children.length);
      }
      case 'workflow': {
        const branch: Branch = { name: n.workflow, workspace: [] };
        this.stack.push(branch);
        const ok = await this.node(this.workflow.workflows[n.workflow]);
        this.stack.pop();
        this.stack.at(-1)!.workspace.push(...branch.workspace);
        await this.checkpoint('branch', n);
        return ok;
      }
    }
  }
}
