// The schemas the client tests ask for. Every string and array is bounded, so that even the random
// tiny model, constrained token by token, must close them within a small max_tokens.

import { z } from "zod";

export const Person = z.object({
  name: z.string().max(8),
  age: z.number().int().min(0).max(120),
  role: z.enum(["admin", "user", "guest"]),
  tags: z.array(z.string().max(5)).max(2),
  address: z.object({ city: z.string().max(8), zip: z.string().regex(/^[0-9]{5}$/) }),
});

export const WeatherArgs = z.object({
  city: z.string().max(10),
  unit: z.enum(["celsius", "fahrenheit"]),
});

export const AddArgs = z.object({
  a: z.number().int().min(-1000).max(1000),
  b: z.number().int().min(-1000).max(1000),
});

/** JSON Schema of WeatherArgs, for clients that take a schema rather than zod. */
export const weatherParameters = z.toJSONSchema(WeatherArgs);
export const addParameters = z.toJSONSchema(AddArgs);

/** Seeds the structured answers are checked over (at temperature 1). */
export const SEEDS = [1, 2, 3, 4, 5];

/** Room for the longest answer the schemas allow, at a few bytes per token. */
export const MAX_TOKENS = 400;
