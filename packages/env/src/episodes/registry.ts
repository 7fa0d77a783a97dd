/**
 * Registry of episode protocols. Each protocol is one file that calls `registerProtocol`;
 * builtin.ts imports them.
 */
import type { EpisodeRecord } from '../types';
import type { EpisodeSession } from './session';
import type { EpisodeSettings } from './settings';

export interface Protocol {
  name: string;
  /** Plays the episode on a started session (no messages yet) and returns its record. */
  play(session: EpisodeSession, settings: EpisodeSettings): Promise<EpisodeRecord>;
}

const protocols = new Map<string, Protocol>();

export function registerProtocol(p: Protocol): void {
  if (protocols.has(p.name)) throw new Error(`protocol ${p.name} registered twice`);
  protocols.set(p.name, p);
}

export function getProtocol(name: string): Protocol | undefined {
  return protocols.get(name);
}

export function protocolNames(): string[] {
  return [...protocols.keys()];
}
