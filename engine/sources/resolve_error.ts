// The one error of every model source: the model could not be found or fetched.

/**
 * The model could not be found or fetched; the message says what to do instead, `reason` says
 * only what went wrong (for a notice that gives its own advice).
 */
export class ModelResolveError extends Error {
  readonly reason: string;
  constructor(message: string, reason = message) {
    super(message);
    this.name = "ModelResolveError";
    this.reason = reason;
  }
}
