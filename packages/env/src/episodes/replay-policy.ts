/** A policy that returns given messages in order (for tests and recorded conversations). */
import type { AssistantMessage, Policy, PolicyContext } from '../types';

export class ReplayPolicy implements Policy {
  readonly name = 'replay';
  private i = 0;
  private readonly messages: AssistantMessage[];

  constructor(messages: readonly (AssistantMessage | string)[]) {
    this.messages = messages.map((m) => (typeof m === 'string' ? { content: m } : m));
  }

  /** Throws once the messages run out; the episode then stops with 'policy_error'. */
  async next(_ctx: PolicyContext): Promise<AssistantMessage> {
    if (this.i >= this.messages.length) throw new Error(`replay exhausted after ${this.messages.length} messages`);
    return this.messages[this.i++];
  }
}
