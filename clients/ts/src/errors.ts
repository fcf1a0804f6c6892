import type { ErrorCode } from "./types.js";

/**
 * The HTTP status of each error code (docs/openapi.yaml, `Error`). A `Record` over the
 * generated code union: a code added to the spec fails the type check here until it is listed.
 */
export const ERROR_STATUS: Readonly<Record<ErrorCode, number>> = {
  invalid_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  not_a_prefix: 409,
  forged_tool_result: 409,
  forged_approval: 409,
  version_conflict: 409,
  too_large: 413,
  over_budget: 422,
  rate_limited: 429,
  internal: 500,
  not_configured: 503,
  llm_unavailable: 503,
  space_unavailable: 503,
};

/** Whether `code` is one of the error codes this client knows. */
export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === "string" && Object.prototype.hasOwnProperty.call(ERROR_STATUS, code);
}

/** The code the client reports for an error answer without a readable `error.code`. */
function codeForStatus(status: number): ErrorCode {
  const exact: Partial<Record<number, ErrorCode>> = {
    400: "invalid_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
    405: "method_not_allowed", 409: "conflict", 413: "too_large", 422: "over_budget",
    429: "rate_limited", 503: "not_configured",
  };
  return exact[status] ?? (status >= 500 ? "internal" : "invalid_request");
}

/**
 * A non-2xx answer of session-agent (or an `error` event of a streamed turn), with its HTTP
 * status and the `error.code` of its body.
 */
export class SessionAgentError extends Error {
  override readonly name = "SessionAgentError";
  /** The HTTP status (for a streamed turn's `error` event: the status of its code). */
  readonly status: number;
  /** The answer's `error.code`. */
  readonly code: ErrorCode;
  /** Seconds to wait before trying again: the `Retry-After` of a `429 rate_limited`. */
  readonly retryAfter: number | undefined;

  constructor(status: number, code: ErrorCode, message: string, retryAfter?: number) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }

  /** The error of a non-2xx `Response`: its `{"error": {"code", "message"}}`, else its status. */
  static async fromResponse(res: Response, what: string): Promise<SessionAgentError> {
    let code: ErrorCode | undefined;
    let message: string | undefined;
    const text = await res.text().catch(() => "");
    try {
      const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
      // Kept as the server sent it, even a code newer than this client.
      if (typeof body?.error?.code === "string") code = body.error.code as ErrorCode;
      if (typeof body?.error?.message === "string") message = body.error.message;
    } catch {
      // Not JSON (a proxy's page, say): the status decides.
    }
    const seconds = retryAfterSeconds(res.headers.get("retry-after"));
    return new SessionAgentError(
      res.status,
      code ?? codeForStatus(res.status),
      message ?? `${what}: HTTP ${res.status}${text ? ` ${text.slice(0, 200)}` : ""}`,
      seconds,
    );
  }
}

/** `Retry-After` in seconds: delta-seconds as they are, an HTTP date as the seconds until it. */
function retryAfterSeconds(value: string | null): number | undefined {
  if (value === null) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v);
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}
