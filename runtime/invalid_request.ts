// The error for a request the runtime will never run as given: validation raises it, and so does
// the grammar compiler for a grammar that cannot be built. Its own file so that both can import it
// without importing each other.

/** A request the runtime will never run as given (the server answers 400). */
export class InvalidRequest extends Error {
  constructor(message: string, readonly param: string | null, readonly code: string) {
    super(message);
  }
}
