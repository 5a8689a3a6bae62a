// The one error type for "this model directory is unusable": it always says which file and why,
// so the CLI can print it as is and tests can check that the right file was blamed.

export class ModelLoadError extends Error {
  readonly file: string;
  readonly problem: string;

  constructor(file: string, problem: string) {
    super(`${file}: ${problem}`);
    this.name = "ModelLoadError";
    this.file = file;
    this.problem = problem;
  }
}
