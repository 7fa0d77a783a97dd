/**
 * Keeps a rollout worker's generation backend on a published policy version: before a job of
 * version v runs, the backend must hold version v or newer. Waiting for the version and loading
 * it share one hard deadline; concurrent jobs share one load.
 */
import { withTimeout } from '../queue/with-timeout';
import type { PolicyRef, PolicyRegistry } from '../queue/policy-registry';

/** Loads a published policy into the backend (opening the backend on the first call). */
export type PolicyLoader = (ref: PolicyRef) => Promise<void>;

export class PolicySync {
  private loaded?: PolicyRef;
  private chain: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly registry: PolicyRegistry,
    private readonly load: PolicyLoader,
    /** Hard limit of one sync (wait for the version + load it), ms. */
    private readonly timeoutMs: number,
    private readonly log: (line: string) => void = () => undefined,
  ) {}

  /** The version the backend holds now, if any. */
  get version(): number | undefined {
    return this.loaded?.version;
  }

  /** Makes sure the backend holds `version` or newer; resolves with the version it holds. */
  async ensure(version: number): Promise<number> {
    if (this.loaded && this.loaded.version >= version) return this.loaded.version;
    const next = this.chain.then(() => this.sync(version));
    this.chain = next.catch(() => undefined);
    return next;
  }

  private async sync(version: number): Promise<number> {
    if (this.loaded && this.loaded.version >= version) return this.loaded.version;
    const started = Date.now();
    const ref = await this.registry.waitFor(version, this.timeoutMs);
    const left = Math.max(1, this.timeoutMs - (Date.now() - started));
    await withTimeout(
      this.load(ref),
      left,
      () => `weight sync timed out after ${this.timeoutMs} ms: loading policy version ${ref.version} from ${ref.dir} did not finish`,
    );
    this.loaded = ref;
    this.log(`loaded policy v${ref.version} from ${ref.dir} in ${Date.now() - started} ms`);
    return ref.version;
  }
}
