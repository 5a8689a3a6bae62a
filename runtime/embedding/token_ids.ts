// Token ids given as an input (not text): each an integer inside the model's vocabulary, else an
// InvalidRequest naming the input and the range.

import { InvalidRequest } from "../errors/invalid_request.ts";

export function checkVocabulary(ids: readonly number[], vocab: number, param: string): void {
  const bad = ids.find((id) => !Number.isInteger(id) || id < 0 || id >= vocab);
  if (bad !== undefined) {
    throw new InvalidRequest(
      `${param}: token id ${bad} is outside the vocabulary (0..${vocab - 1})`,
      param,
      "invalid_value",
    );
  }
}
