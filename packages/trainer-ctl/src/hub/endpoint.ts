/** The hub to talk to and the credentials, from the environment as huggingface_hub reads them: HF_ENDPOINT, HF_TOKEN. */
export interface HubAccess {
  /** Hub root, e.g. https://huggingface.co. */
  endpoint: string;
  token?: string;
}

export function hubAccess(env: NodeJS.ProcessEnv = process.env): HubAccess {
  const endpoint = (env.HF_ENDPOINT ?? 'https://huggingface.co').replace(/\/+$/, '');
  const token = env.HF_TOKEN || env.HUGGING_FACE_HUB_TOKEN || undefined;
  return { endpoint, ...(token ? { token } : {}) };
}
