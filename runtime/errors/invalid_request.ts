// The error for a request the runtime will never run as given: validation raises it, and so does
// the grammar compiler for a grammar that cannot be built. In a folder of its own that imports
// nothing, so that runtime's subfolders (grammar/) can raise it without importing runtime/'s top.

/** A request the runtime will never run as given (the server answers 400). */
export class InvalidRequest extends Error {
  constructor(message: string, readonly param: string | null, readonly code: string) {
    super(message);
  }
}
