/** Services, pods and nodes, and resolution of a name a model wrote to a component. */
import type { Level, Topology } from '../../types';

export interface PodInfo {
  pod: string;
  service: string;
  node?: string;
}

export interface TopologyData {
  services: string[];
  pods: PodInfo[];
  nodes: string[];
}

type Resolved = { level: Level; service?: string; pod?: string; node?: string };

export class StaticTopology implements Topology {
  readonly services: string[];
  readonly pods: PodInfo[];
  readonly nodes: string[];
  private readonly podIndex = new Map<string, PodInfo>();
  private readonly exact = new Map<string, Resolved>();

  constructor(d: TopologyData) {
    this.services = d.services;
    this.pods = d.pods;
    this.nodes = d.nodes;
    for (const n of d.nodes) this.exact.set(n.toLowerCase(), { level: 'node', node: n });
    for (const p of d.pods) {
      this.podIndex.set(p.pod, p);
      this.exact.set(p.pod.toLowerCase(), { level: 'pod', pod: p.pod, service: p.service, ...(p.node ? { node: p.node } : {}) });
    }
    for (const s of d.services) this.exact.set(s.toLowerCase(), { level: 'service', service: s });
  }

  serviceOfPod(pod: string): string | undefined {
    return this.podIndex.get(pod)?.service;
  }

  nodeOfPod(pod: string): string | undefined {
    return this.podIndex.get(pod)?.node;
  }

  podsOf(service: string): PodInfo[] {
    return this.pods.filter((p) => p.service === service);
  }

  /**
   * Exact name first (case-insensitive); then a name that is a prefix of exactly one pod
   * (a pod name cut short) or names exactly one service once decorations are ignored
   * ('contacts', 'ts-contacts', 'contacts-service').
   */
  resolve(name: string): Resolved | undefined {
    const q = name.trim().toLowerCase();
    if (!q) return undefined;
    const hit = this.exact.get(q);
    if (hit) return hit;
    const pods = this.pods.filter((p) => p.pod.toLowerCase().startsWith(q));
    if (pods.length === 1 && q.length > pods[0].service.length) return this.exact.get(pods[0].pod.toLowerCase());
    const bare = (s: string) =>
      s
        .toLowerCase()
        .replace(/^ts-/, '')
        .replace(/-service$/, '');
    const services = this.services.filter((s) => bare(s) === bare(q));
    if (services.length === 1) return { level: 'service', service: services[0] };
    return undefined;
  }
}
