/** What an endpoint gets besides its body: the served models, the client's liveness, and gated generation. */
import type { Generation, GenerationRequest } from '../backends/types';
import type { ServedModels } from './models';
import type { ServedModel } from './served-model';

export interface RequestContext {
  readonly models: ServedModels;
  /** Aborted once the client has gone (closed connection): work for it stops. */
  readonly signal: AbortSignal;
  /** One generation admitted by the server's concurrency cap, stopped at the next decode step when the client leaves. */
  generate(model: ServedModel, request: GenerationRequest): Promise<Generation>;
}

/** A POST endpoint: a parsed JSON body in, the JSON answer out; errors are thrown as ApiError. */
export type Route = (ctx: RequestContext, body: unknown) => Promise<Record<string, unknown>>;
