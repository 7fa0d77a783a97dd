/** What an endpoint gets besides its body: the served models, the client's liveness, and gated generation. */
import type { Generation, GenerationRequest } from '../backends/types';
import type { ServedModel } from './served-model';
import type { EventStream } from './stream';

export interface RequestContext {
  /** The model a request names (the first one when it names none), held until the answer is sent; a 404 when none is served under that name. */
  model(name: string | null | undefined): ServedModel;
  /** Aborted once the client has gone (closed connection): work for it stops. */
  readonly signal: AbortSignal;
  /** One generation admitted by the server's concurrency cap, stopped at the next decode step when the client leaves. */
  generate(model: ServedModel, request: GenerationRequest): Promise<Generation>;
}

/** A POST endpoint: a parsed JSON body in, the JSON answer (or a stream of chunks) out; errors are thrown as ApiError. */
export type Route = (ctx: RequestContext, body: unknown) => Promise<Record<string, unknown> | EventStream>;
