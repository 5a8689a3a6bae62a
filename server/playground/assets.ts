// The playground page's files, imported as text so they are part of the module graph: `deno
// compile` embeds them in the binary and nothing is read from the source tree at run time.

import html from "./index.html" with { type: "text" };
import css from "./playground.css" with { type: "text" };
import js from "./playground.js" with { type: "text" };

export interface Asset {
  body: string;
  contentType: string;
}

/** URL path → file. The page links to the other two by these paths. */
export const PLAYGROUND_ASSETS: Readonly<Record<string, Asset>> = {
  "/": { body: html, contentType: "text/html; charset=utf-8" },
  "/playground/playground.css": { body: css, contentType: "text/css; charset=utf-8" },
  "/playground/playground.js": { body: js, contentType: "text/javascript; charset=utf-8" },
};
