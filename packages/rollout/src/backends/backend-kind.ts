/** What a backend kind gives the registry (registry.ts): its name, settings schema and opener. */
import type { z } from 'zod';
import type { GenerationBackend } from './types';

export interface BackendKind {
  name: string;
  /** Settings schema (zod, strict); `open` receives them parsed. */
  settings: z.ZodType;
  /** `log` takes the backend's own reports (replicas leaving and joining rotation). */
  open(settings: unknown, log?: (line: string) => void): Promise<GenerationBackend>;
}
