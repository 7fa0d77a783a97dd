/** The `vllm` backend kind: vLLM servers (or `trainer-ctl serve` replicas) with LoRA weight sync over HTTP. */
import type { BackendKind } from '../backend-kind';
import { VllmBackend } from './backend';
import { vllmSettingsSchema, type VllmSettings } from './settings';

export { VllmBackend, stopTokenIds } from './backend';
export { vllmSettingsSchema, type VllmSettings } from './settings';
export { MANIFEST_FILE, manifestDigest, verifyManifest, writeManifest, type Manifest } from './manifest';
export { ReplicaSleep, SleepClient } from './sleep';

export const vllmKind: BackendKind = {
  name: 'vllm',
  settings: vllmSettingsSchema,
  open: async (s, log) => new VllmBackend(s as VllmSettings, log),
};
