// Imported first by the tokenizer's Worker, before transformers.js: the library resolves its ONNX
// runtime's URL against `location.origin` whenever `location` exists, and in a Worker started
// from a file: URL that origin is "null", which is no base URL, so importing the library throws.
// The tokenizer reads nothing relative to a location; the Worker does without one.

Object.defineProperty(globalThis, "location", { value: undefined, configurable: true });
