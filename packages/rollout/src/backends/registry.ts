/**
 * Backends by name. A run config names one as `{ kind: <name>, ...settings }`; adding a
 * backend is adding its file and its line in `kinds`.
 */
import type { BackendKind } from './backend-kind';
import type { GenerationBackend } from './types';
import { onnxKind } from './onnx/index';
import { openaiKind } from './openai/index';
import { vllmKind } from './vllm/index';
import { formatZodIssues } from '@thinkfl/env';

const kinds = new Map<string, BackendKind>([onnxKind, openaiKind, vllmKind].map((k) => [k.name, k]));

export function backendNames(): string[] {
  return [...kinds.keys()];
}

/** Validates a backend config and opens the backend; errors name the config path (`where`). */
export async function openBackend(config: unknown, where = 'backend', log?: (line: string) => void): Promise<GenerationBackend> {
  if (typeof config !== 'object' || config === null || Array.isArray(config)) throw new Error(`${where}: must be an object with a 'kind'`);
  const { kind, ...rest } = config as Record<string, unknown>;
  const k = typeof kind === 'string' ? kinds.get(kind) : undefined;
  if (!k) throw new Error(`${where}.kind: unknown backend ${JSON.stringify(kind)} (known: ${backendNames().join(', ')})`);
  const r = k.settings.safeParse(rest);
  if (!r.success) throw new Error(formatZodIssues(r.error, where));
  return k.open(r.data, log);
}
