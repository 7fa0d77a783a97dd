/** The `openai` backend kind: any OpenAI-compatible server (vLLM in deployment). */
import type { BackendKind } from '../backend-kind';
import { OpenAIBackend, openaiSettingsSchema, type OpenAISettings } from './backend';

export { OpenAIBackend, openaiSettingsSchema, type OpenAISettings } from './backend';
export { JsonHttpClient, HttpError, Semaphore, type CallOptions } from './http';

export const openaiKind: BackendKind = {
  name: 'openai',
  settings: openaiSettingsSchema,
  open: async (s) => new OpenAIBackend(s as OpenAISettings),
};
