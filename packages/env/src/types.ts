/**
 * Contracts of the environment: the on-disk dataset once loaded, failure cases, tools,
 * episodes and policies. Every other package builds on these shapes; change them only
 * with every user in view.
 */

/** Granularity of a root cause. Nezha labels pods; AIOps-2022 labels service, pod or node. */
export type Level = 'service' | 'pod' | 'node';

/** One span, normalised from any source format. Times are Unix microseconds. */
export interface Span {
  trace_id: string;
  span_id: string;
  /** null for a trace's entry span. */
  parent_id: string | null;
  service: string;
  pod: string;
  /** Host of the pod, when the source tells it. */
  node?: string;
  operation: string;
  start_us: number;
  duration_us: number;
  /** 'unset' where the source has no status (Nezha). */
  status: 'ok' | 'error' | 'unset';
  /** The raw status code, when the source has one. */
  status_code?: string;
}

/** Indexed access to spans; every lookup is O(1) or O(result), never a scan. */
export interface TraceStore {
  readonly size: number;
  span(spanId: string): Span | undefined;
  /** Direct children of a span, in start-time order. Empty for a leaf or unknown span. */
  children(spanId: string): Span[];
  trace(traceId: string): Span[];
  traceIds(): Iterable<string>;
  /** Entry span (parent_id null) of a trace. */
  entry(traceId: string): Span | undefined;
}

/** One metric time series of one component. Timestamps in Unix seconds, ascending. */
export interface MetricSeries {
  component: string;
  level: Level;
  name: string;
  ts: Float64Array;
  values: Float64Array;
}

export interface MetricStore {
  /** All series of a component (service, pod or node name). */
  series(component: string): MetricSeries[];
  components(): string[];
}

export type LogLevel = 'error' | 'warn' | 'info';

export interface LogRecord {
  ts_us: number;
  service: string;
  pod: string;
  node?: string;
  level: LogLevel;
  template_id: number;
  trace_id?: string;
  span_id?: string;
}

export interface LogTemplate {
  id: number;
  /** Masked message (numbers, ids, times replaced by placeholders). */
  template: string;
  /** One raw line that produced the template. */
  example: string;
}

export interface LogStore {
  /** Records of a service or pod in [fromUs, toUs], optionally only the given levels. */
  query(component: string, fromUs: number, toUs: number, levels?: LogLevel[]): LogRecord[];
  template(id: number): LogTemplate | undefined;
  /**
   * Usual rate of a template for a service, in lines per minute, measured where that
   * service is not at fault; undefined when there is no baseline.
   */
  baselineRate(service: string, templateId: number): number | undefined;
  /** Every template a service logs where it is not at fault, with its usual lines per minute. */
  usualTemplates(service: string): { templateId: number; ratePerMin: number }[];
}

/** Which services, pods and nodes exist and how they relate. */
export interface Topology {
  services: string[];
  pods: { pod: string; service: string; node?: string }[];
  nodes: string[];
  serviceOfPod(pod: string): string | undefined;
  /** Resolve a name the model wrote (service, pod or node, exact or unambiguous) to components. */
  resolve(name: string): { level: Level; service?: string; pod?: string; node?: string } | undefined;
}

/** A root cause as answered by a policy or given as ground truth. */
export interface RootCause {
  node?: string;
  service?: string;
  pod?: string;
  reason?: string;
  /** Fault type the policy names (e.g. cpu_contention), for graders over (component, type) pairs. */
  type?: string;
  /** Occurrence time the policy names, "YYYY-MM-DD HH:MM:SS" (OpenRCA's answer field). */
  time?: string;
}

export interface GroundTruth extends RootCause {
  /** The level at which the dataset labels this fault. */
  level: Level;
}

export interface Fault {
  id: string;
  truth: GroundTruth;
  type: string;
  /** Fault window, Unix microseconds. */
  start_us: number;
  end_us: number;
  /** Data-quality remarks found while importing (e.g. inject_timestamp disagreement). */
  notes: string[];
  /** Number of cases derived for this fault, and why there are none when 0. */
  case_count: number;
  no_case_reason?: string;
}

/** One anomalous request inside a fault window: what an episode is played on. */
export interface Case {
  id: string;
  fault_id: string;
  trace_id: string;
  entry_span_id: string;
  /** Entry span start, Unix microseconds. */
  timestamp_us: number;
  entry_duration_us: number;
  /** Why the request counts as anomalous (the rule's name and its measured figure). */
  anomaly: { rule: string; reason: string; score: number };
  truth: GroundTruth;
}

/**
 * Fault-free statistics the tools distil observations with: usual duration of a child
 * under its parent context, usual children pattern. Keys are built by the dataset module.
 */
export interface Baseline {
  /** Usual duration (mean, std, count) of spans like this one (same context), µs. */
  duration(span: Span): { meanUs: number; stdUs: number; count: number } | undefined;
  /** Usual set of child (service, operation) signatures below spans like this one. */
  childPattern(span: Span): Map<string, number> | undefined;
}

export interface DatasetMeta {
  name: string;
  format: string;
  format_version: number;
  source: string;
  created_at: string;
  /** Settings the importer ran with (anomaly rule, caps, windows). */
  settings: Record<string, unknown>;
  /** What the source lacked and the import went around (absent in datasets imported before gaps were kept). */
  gaps?: DatasetGaps;
  /** Service that front-end-wide series were attached to, and how it was chosen (formats that have such series). */
  frontend?: { service: string; chosen_by: string };
}

/** A stretch of time without data of one kind, Unix microseconds, half-open. */
export interface TimeGap {
  from_us: number;
  to_us: number;
  /** What is missing there (file names, as the source lays them out). */
  what: string;
  /** Requests the source's own index lists for the stretch, when it has one. */
  requests?: number;
}

/** A fault whose window touches a trace gap, and what that cost. */
export interface FaultGap {
  fault_id: string;
  /** Seconds of the fault window inside trace gaps / with trace data. */
  missing_sec: number;
  recorded_sec: number;
  /** Cases derived from the data that is there. */
  cases: number;
  /**
   * Cases the missing stretch would have added: the fault's anomalous requests per recorded
   * second times the missing seconds, within the per-fault cap. null when nothing of the window
   * was recorded (no rate to go by).
   */
  cases_lost: number | null;
}

/** Everything a source lacked that the import went around; empty lists when nothing was. */
export interface DatasetGaps {
  /** The format's fault-free data was missing: what, and what the baseline came from instead. */
  baseline?: { missing: string; fallback: string };
  traces: TimeGap[];
  logs: TimeGap[];
  /** Other missing parts, each saying what is missing and what the dataset lacks for it. */
  parts: string[];
  faults: FaultGap[];
}

export interface Dataset {
  meta: DatasetMeta;
  traces: TraceStore;
  metrics: MetricStore;
  logs: LogStore;
  topology: Topology;
  baseline: Baseline;
  faults: Fault[];
  cases: Case[];
}

// ---------------------------------------------------------------- tools and episodes

/** JSON Schema (draft 2020-12 subset) of a tool's arguments, as shown to a model. */
export type JsonSchema = Record<string, unknown>;

export interface ToolSpec {
  name: string;
  description: string;
  parameters: JsonSchema;
}

/** What a tool returns: text for the model, structured data for scripted policies and graders. */
export interface Observation {
  ok: boolean;
  text: string;
  data?: unknown;
  error?: string;
  /** True when the text was cut to the size limit (the text says what was cut). */
  truncated: boolean;
  /** Components (services, pods, nodes) that appear in the result. */
  components: string[];
}

/** A tool call as parsed from an assistant message. */
export interface ParsedToolCall {
  name: string;
  arguments: unknown;
  /** The source form it was parsed from. */
  format: 'hermes' | 'openai' | 'react' | 'llama3_json';
  raw: string;
}

/** OpenAI-style tool call attached to an assistant message. */
export interface OpenAIToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  tool_calls?: OpenAIToolCall[];
  tool_call_id?: string;
  name?: string;
}

/** The next assistant message a policy produces. */
export interface AssistantMessage {
  content: string;
  tool_calls?: OpenAIToolCall[];
}

export interface ToolCallRecord {
  /** 0-based index of the assistant turn that made the call. */
  turn: number;
  name: string;
  arguments: unknown;
  observation: Observation;
}

/** Per assistant turn: what the format grader needs. */
export interface TurnRecord {
  turn: number;
  /** Tools offered on this turn. */
  offered: string[];
  parsed: boolean;
  /** The parsed call named an offered tool. */
  offered_tool: boolean;
  /** Arguments validated against that tool's schema. */
  args_valid: boolean;
  error?: string;
}

export interface PathStep {
  tool: string;
  /** Canonical JSON of the arguments (sorted keys), for de-duplication. */
  args: string;
  /** Components named in the arguments or the result of this step. */
  components: string[];
}

export interface EpisodeRecord {
  case_id: string;
  protocol: string;
  messages: ChatMessage[];
  tool_calls: ToolCallRecord[];
  turns: TurnRecord[];
  parse_errors: { turn: number; message: string; raw: string }[];
  /** The final ranked answer; null when the episode ended without a valid print_results. */
  answer: RootCause[] | null;
  /** Tool steps in order (print_results excluded). */
  path: PathStep[];
  stop_reason: 'answered' | 'forced_answer' | 'no_answer' | 'policy_error';
  /** The policy's error message when stop_reason is 'policy_error'. */
  error?: string;
  timing: { started_at: number; wall_ms: number };
}

/** What a policy sees when asked for its next message. */
export interface PolicyContext {
  case: Case;
  messages: ChatMessage[];
  tools: ToolSpec[];
  /** Structured results of the calls so far (for scripted policies). */
  toolCalls: ToolCallRecord[];
  turn: number;
  /** True on the forced final turn, where only print_results is offered. */
  final: boolean;
  /** D_max of the episode (its settings' d_max): tool turns before the forced print_results turn. */
  d_max: number;
  /**
   * Structured form of what the protocol itself showed in its latest prompt (oracl's sketch,
   * knowledgemind's scoring request, rcaflow's workflow step), for scripted policies; the text
   * in `messages` says the same to a model. Undefined where the protocol shows nothing of its own.
   */
  environment?: unknown;
  /**
   * A text as the model reads it (pod names as their per-episode aliases when
   * tool_settings.pod_aliases is on), for scripted policies that write names into their messages,
   * so that teacher conversations name pods as the observations do. Undefined: shown as written.
   */
  show?: (text: string) => string;
}

export interface Policy {
  readonly name: string;
  next(ctx: PolicyContext): Promise<AssistantMessage>;
}
