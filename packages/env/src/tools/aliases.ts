/**
 * Per-episode short names for span ids (s1, s2, ...). Small models cannot copy 16-hex ids;
 * with aliases on, observations show the alias and the tools accept either form.
 */
export class SpanAliases {
  private readonly byId = new Map<string, string>();
  private readonly byAlias = new Map<string, string>();

  constructor(readonly enabled: boolean) {}

  /** The name a model sees for a span id: its alias (assigned on first sight) or the id itself. */
  ref(spanId: string): string {
    if (!this.enabled) return spanId;
    let a = this.byId.get(spanId);
    if (!a) {
      a = `s${this.byId.size + 1}`;
      this.byId.set(spanId, a);
      this.byAlias.set(a, spanId);
    }
    return a;
  }

  /** The span id a model meant: an alias shown earlier, or the text itself. */
  resolve(text: string): string {
    const t = text.trim();
    if (!this.enabled) return t;
    return this.byAlias.get(t.toLowerCase()) ?? t;
  }
}

/** A topology's pods as PodAliases needs them, built once per dataset (the pattern has one branch per pod). */
interface PodIndex {
  serviceOf: Map<string, string>;
  /** Every pod name as a whole word, longest first. */
  pattern: RegExp | undefined;
}
const podIndexes = new WeakMap<object, PodIndex>();

function podIndex(pods: readonly { pod: string; service: string }[]): PodIndex {
  const cached = podIndexes.get(pods);
  if (cached) return cached;
  const names = [...new Set(pods.map((p) => p.pod))].sort((a, b) => b.length - a.length);
  const escaped = names.map((n) => n.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  const index: PodIndex = {
    serviceOf: new Map(pods.map((p) => [p.pod, p.service])),
    pattern: names.length ? new RegExp(`(?<![A-Za-z0-9_.-])(?:${escaped.join('|')})(?![A-Za-z0-9_-])`, 'g') : undefined,
  };
  podIndexes.set(pods, index);
  return index;
}

/**
 * Per-episode names for pods: the pod's service and its place among that service's pods in
 * order of first sight in the episode (ts-contacts-service-1). A pod's name carries the hash
 * suffix of one deployment (...-866bd68c97-xcqfx), which a redeploy changes; with aliases on,
 * every pod name in what the model reads is its alias and the tools accept either form, so a
 * policy reads the same text on another day of the same system (and a tiny tokenizer, fitted to
 * one day's pod names, meets no new name: the service is one of its tokens, "-1" two more).
 */
export class PodAliases {
  private readonly byPod = new Map<string, string>();
  private readonly byAlias = new Map<string, string>();
  private readonly seen = new Map<string, number>();
  private readonly index: PodIndex;

  constructor(
    readonly enabled: boolean,
    pods: readonly { pod: string; service: string }[],
  ) {
    this.index = podIndex(pods);
  }

  /** The name a model sees for a pod: its alias (assigned on first sight) or the pod name itself. */
  ref(pod: string): string {
    if (!this.enabled) return pod;
    let a = this.byPod.get(pod);
    if (!a) {
      // A pod the topology does not list still gets a name that carries no hash.
      const service = this.index.serviceOf.get(pod) ?? 'pod';
      const k = (this.seen.get(service) ?? 0) + 1;
      this.seen.set(service, k);
      a = `${service}-${k}`;
      this.byPod.set(pod, a);
      this.byAlias.set(a.toLowerCase(), pod);
    }
    return a;
  }

  /** The pod a model meant: an alias shown earlier, or the text itself. */
  resolve(text: string): string {
    const t = text.trim();
    if (!this.enabled) return t;
    return this.byAlias.get(t.toLowerCase()) ?? t;
  }

  /** Every pod name in a text replaced by its alias, aliases assigned in order of appearance. */
  show(text: string): string {
    if (!this.enabled || !this.index.pattern) return text;
    return text.replace(this.index.pattern, (pod) => this.ref(pod));
  }
}
