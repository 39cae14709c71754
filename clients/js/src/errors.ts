/** Every failure of the SDK: the server's error body `{name, status, message, errors}`, or one of the same
 * shape made on this side (`NETWORK_ERROR` with status 0 when the server could not be reached, `ABORTED`
 * when the caller's signal ended a call). */
/** `{field: [reasons]}`; nested where the input is (`{docs: {"1": {title: [...]}}}` for the second document). */
export interface FieldErrors {
  [field: string]: string[] | FieldErrors;
}

export interface ErrorBody {
  name: string;
  status: number;
  message: string;
  errors?: FieldErrors;
  /** Reasons the server left out of a very long `errors`. */
  errorsOmitted?: number;
  /** The server's id of the request (in its logs, and its `X-Request-ID` header). */
  requestId?: string;
}

export class TrellisError extends Error {
  override readonly name: string;
  readonly status: number;
  readonly errors: FieldErrors | undefined;
  readonly errorsOmitted: number | undefined;
  readonly requestId: string | undefined;

  constructor(body: ErrorBody, options?: { cause?: unknown }) {
    super(body.message, options);
    this.name = body.name;
    this.status = body.status;
    this.errors = body.errors;
    this.errorsOmitted = body.errorsOmitted;
    this.requestId = body.requestId;
  }

  /** The server's shape, e.g. for logging or showing beside a form. */
  toJSON(): ErrorBody {
    const body: ErrorBody = { name: this.name, status: this.status, message: this.message };
    if (this.errors !== undefined) body.errors = this.errors;
    if (this.errorsOmitted !== undefined) body.errorsOmitted = this.errorsOmitted;
    if (this.requestId !== undefined) body.requestId = this.requestId;
    return body;
  }
}

/** The contract's names of HTTP statuses, for answers that carry no error body (a proxy's 502 page). */
const NAMES: Record<number, string> = {
  400: "INVALID_ARGUMENTS",
  401: "UNAUTHORIZED",
  403: "FORBIDDEN",
  404: "NOT_FOUND",
  409: "CONFLICT",
  410: "GONE",
  413: "PAYLOAD_TOO_LARGE",
  415: "UNSUPPORTED_MEDIA_TYPE",
  429: "RATE_LIMITED",
  500: "INTERNAL_SERVER_ERROR",
  503: "SERVICE_UNAVAILABLE",
};

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function fieldErrors(value: unknown): FieldErrors | undefined {
  if (!isRecord(value)) return undefined;
  const errors: FieldErrors = {};
  for (const [field, reasons] of Object.entries(value)) {
    const nested = fieldErrors(reasons);
    errors[field] = nested ?? (Array.isArray(reasons) ? reasons.map(String) : [String(reasons)]);
  }
  return errors;
}

/** The error an answer with `status` and (parsed) `body` stands for; `fallback` is the message when the
 * body says nothing. */
export function errorFrom(status: number, body: unknown, fallback = ""): TrellisError {
  if (isRecord(body) && typeof body["message"] === "string") {
    const error: ErrorBody = {
      name: typeof body["name"] === "string" ? body["name"] : (NAMES[status] ?? "ERROR"),
      status: typeof body["status"] === "number" ? body["status"] : status,
      message: body["message"],
    };
    const errors = fieldErrors(body["errors"]);
    if (errors !== undefined) error.errors = errors;
    if (typeof body["errorsOmitted"] === "number") error.errorsOmitted = body["errorsOmitted"];
    if (typeof body["requestId"] === "string") error.requestId = body["requestId"];
    return new TrellisError(error);
  }
  return new TrellisError({ name: NAMES[status] ?? "ERROR", status, message: fallback || `HTTP ${status}` });
}

export function networkError(cause: unknown): TrellisError {
  const reason = cause instanceof Error ? cause.message : String(cause);
  return new TrellisError({ name: "NETWORK_ERROR", status: 0, message: `The server could not be reached: ${reason}` }, { cause });
}

export function abortedError(cause?: unknown): TrellisError {
  return new TrellisError({ name: "ABORTED", status: 0, message: "The call was aborted" }, { cause });
}

export { isRecord };
