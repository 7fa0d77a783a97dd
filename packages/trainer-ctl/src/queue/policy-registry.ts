/**
 * Weight sync: the train worker publishes each new policy version (its exported directory) in
 * keys.policy and announces it on keys.policyChannel; rollout workers wait for the version a
 * job needs, with a hard timeout that names what was expected and what was there.
 */
import type { Redis } from 'ioredis';
import { keys } from './jobs';

export interface PolicyRef {
  version: number;
  /** Model directory of the policy, as the generation backend loads it. */
  dir: string;
}

export class PolicySyncTimeoutError extends Error {
  override name = 'PolicySyncTimeoutError';
}

export class PolicyRegistry {
  constructor(
    private readonly redis: Redis,
    readonly runId: string,
  ) {}

  /** Makes `ref` the current policy. A resumed trainer may publish an older version than Redis holds. */
  async publish(ref: PolicyRef): Promise<void> {
    if (!Number.isInteger(ref.version) || ref.version < 0)
      throw new Error(`policy version must be a non-negative integer, got ${ref.version}`);
    const json = JSON.stringify({ version: ref.version, dir: ref.dir });
    await this.redis.multi().set(keys.policy(this.runId), json).publish(keys.policyChannel(this.runId), json).exec();
  }

  async current(): Promise<PolicyRef | undefined> {
    const json = await this.redis.get(keys.policy(this.runId));
    return json === null ? undefined : (JSON.parse(json) as PolicyRef);
  }

  /** Resolves with the current policy once its version is at least `version`; rejects after timeoutMs. */
  async waitFor(version: number, timeoutMs: number): Promise<PolicyRef> {
    const now = await this.current();
    if (now && now.version >= version) return now;
    const sub = this.redis.duplicate();
    // The duplicate's connection errors are the parent connection's, reported where it reports them.
    sub.on('error', (e: Error) => this.redis.listenerCount('error') > 0 && this.redis.emit('error', e));
    try {
      return await new Promise<PolicyRef>((resolve, reject) => {
        const timer = setTimeout(() => {
          void this.current().then(
            (cur) =>
              reject(
                new PolicySyncTimeoutError(
                  `weight sync timed out after ${timeoutMs} ms: waiting for policy version ${version} of run ${this.runId}, ` +
                    `newest published is ${cur ? `version ${cur.version} (${cur.dir})` : 'none'}; is the train worker running?`,
                ),
              ),
            reject,
          );
        }, timeoutMs);
        const accept = (ref: PolicyRef | undefined) => {
          if (ref && ref.version >= version) {
            clearTimeout(timer);
            resolve(ref);
          }
        };
        sub.on('message', (_ch: string, json: string) => accept(JSON.parse(json) as PolicyRef));
        // Subscribe first, then read: a publish between the two is seen by one or the other.
        sub
          .subscribe(keys.policyChannel(this.runId))
          .then(() => this.current())
          .then(accept)
          .catch((e: Error) => {
            clearTimeout(timer);
            reject(e);
          });
      });
    } finally {
      sub.disconnect();
    }
  }
}
