/** Errors the server answers with, in OpenAI's shape: {error: {message, type, param, code}}. */

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type = 'invalid_request_error',
    readonly code: string | null = null,
    readonly param: string | null = null,
    /** Extra response headers, e.g. Retry-After. */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }

  get body(): { error: { message: string; type: string; param: string | null; code: string | null } } {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

/** A client error naming the field: HTTP 400. */
export class BadRequest extends ApiError {
  constructor(message: string, param?: string, code: string | null = null) {
    super(400, message, 'invalid_request_error', code, param ?? null);
  }
}

/** The request and its answer would not fit the model's context: HTTP 400 as OpenAI and vLLM answer it. */
export const contextExceeded = (message: string, param: string): BadRequest => new BadRequest(message, param, 'context_length_exceeded');
